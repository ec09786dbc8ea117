"""`make demo`: generate a few minutes of smart-plug data and run CQ1 three ways.

The optimizer's placement, pure-SPE and pure-DB run over the same data one after another;
sample results and the three measured rho are printed side by side, and the outputs are
checked to be equal.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from federation.api import run
from federation.explain import explain_text
from federation.optimizer import optimize
from federation.results import diff_results
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--query", default="CQ1")
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--plugs", type=int, default=100)
    ap.add_argument("--scale", type=float, default=0.1, help="window scale (0.1: 30 s for 5 min)")
    ap.add_argument("--seconds-per-batch", type=int, default=1)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedq-demo-"))
    print(f"== generating {a.seconds} s of smart-plug data at {a.rate:.0f} tuples/s, "
          f"{a.plugs} plugs -> {work / 'data'}")
    generate(work / "data", rate=a.rate, seconds=a.seconds, plugs=a.plugs, seed=1)
    q = QUERIES[a.query](rate=a.rate, scale=a.scale, plugs=a.plugs)
    print("== the optimizer's plan (fedq explain)")
    print(explain_text(optimize(q)).split("\n-- ")[0])
    results = {}
    for placement in ("auto", "spe", "db"):
        print(f"== running {a.query} with placement {placement} ...", flush=True)
        r = run(q, placement, work / "data", work_dir=work / placement,
                seconds_per_batch=a.seconds_per_batch)
        results[placement] = r
        print(f"   {r.summary.placement}: {r.summary.result_rows} rows, "
              f"rho {r.summary.rho:.2f}, wall {r.summary.wall_s:.1f} s")
    print("== sample results (optimizer's plan)")
    print(results["auto"].rows.slice(0, 8).to_pandas().to_string(index=False))
    print("\n== side by side")
    print(f"{'plan':<6} {'rho':>6} {'rho steady':>10} {'wall s':>7} {'rows':>7}  placement")
    for k, r in results.items():
        s = r.summary
        print(f"{k:<6} {s.rho:>6.2f} {s.rho_steady:>10.2f} {s.wall_s:>7.1f} "
              f"{s.result_rows:>7}  {s.placement}")
    same = all(diff_results(results[k].rows, results["spe"].rows) is None for k in results)
    print(f"outputs equal across placements: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
