"""`make demo`: generate a few minutes of smart-plug data and run CQ1 three ways.

Spark starts and is warmed up first by an untimed run of the same query under the
optimizer's placement over the first --warmup-seconds event seconds, so that no timed plan
pays the JVM's first micro-batches (without it the first plan measured about half the rho
of the same placement run later). Then the optimizer's placement, pure-SPE and pure-DB
run over the same data one after another; sample results and the three measured rho are
printed side by side, and the outputs are checked to be equal. rho = event seconds per
wall second of the micro-batches (filling the windows and the end-of-input flush
included); it excludes the ingest (the input is validated and spooled before Spark's
queries start; its CPU time is shown beside) and Spark's start-up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from federation.api import run
from federation.cli.progress import ConsoleProgress
from federation.explain import explain_text
from federation.optimizer import optimize
from federation.results import diff_results
from federation.smartplug.datagen import generate
from federation.smartplug.queries import QUERIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--query", default="CQ1")
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--plugs", type=int, default=100)
    ap.add_argument("--scale", type=float, default=0.1, help="window scale (0.1: 30 s for 5 min)")
    ap.add_argument("--seconds-per-batch", type=int, default=4,
                    help="event seconds per micro-batch (pure Spark pays ~2 s per batch)")
    ap.add_argument("--warmup-seconds", type=int, default=40,
                    help="event seconds of the untimed warm-up run before the timed ones "
                    "(0: none)")
    ap.add_argument("--keep", action="store_true", help="keep the data and work directories")
    a = ap.parse_args(argv)
    t_start = time.time()
    work = Path(tempfile.mkdtemp(prefix="fedq-demo-"))
    try:
        return _demo(a, work, t_start)
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _demo(a, work: Path, t_start: float) -> int:
    print(f"== 1/5 generating {a.seconds} s of smart-plug data at {a.rate:.0f} tuples/s, "
          f"{a.plugs} plugs -> {work / 'data'}", flush=True)
    with ConsoleProgress() as shown:
        shown.phase("generating", total=a.seconds, unit="event seconds")
        generate(work / "data", rate=a.rate, seconds=a.seconds, plugs=a.plugs, seed=1,
                 progress=shown.advance)
    q = QUERIES[a.query](rate=a.rate, scale=a.scale, plugs=a.plugs)
    print("== 2/5 the optimizer's plan (fedq explain)", flush=True)
    print(explain_text(optimize(q)).split("\n-- ")[0])
    warmed = warm_up(q, work, a.warmup_seconds, a.seconds_per_batch)
    results = {}
    for k, placement in enumerate(("auto", "spe", "db")):
        what = {"auto": "the optimizer's plan", "spe": "pure Spark", "db": "pure DuckDB"}
        print(f"== {3 + k}/5 running {a.query}: {what[placement]} ({placement})", flush=True)
        with ConsoleProgress() as shown:
            r = run(q, placement, work / "data", work_dir=work / placement,
                    seconds_per_batch=a.seconds_per_batch, progress=shown)
        results[placement] = r
        print(f"   {r.summary.placement}: {r.summary.result_rows} rows, "
              f"rho {r.summary.rho:.2f}, wall {r.summary.wall_s:.1f} s", flush=True)
    print("== sample results (optimizer's plan)")
    print(results["auto"].rows.slice(0, 8).to_pandas().to_string(index=False))
    print("\n== side by side")
    print(timing_note(warmed, a.seconds_per_batch))
    print(f"{'plan':<6} {'rho':>6} {'rho steady':>10} {'wall s':>7} {'rows':>7} "
          f"{'ingest CPU s':>12}  placement")
    for k, r in results.items():
        s = r.summary
        ing = f"{s.ingest_cpu_s:>12.2f}" if s.ingest_cpu_s is not None else f"{'-':>12}"
        print(f"{k:<6} {s.rho:>6.2f} {s.rho_steady:>10.2f} {s.wall_s:>7.1f} "
              f"{s.result_rows:>7} {ing}  {s.placement}")
    same = all(diff_results(results[k].rows, results["spe"].rows) is None for k in results)
    print(f"outputs equal across placements: {'yes' if same else 'NO'}")
    print(f"demo took {time.time() - t_start:.0f} s", file=sys.stderr)
    return 0 if same else 1


def warm_up(q, work: Path, seconds: int, seconds_per_batch: int) -> bool:
    """Start Spark and run `q` under the optimizer's placement over the first `seconds`
    event seconds of work/data, untimed, so that the timed runs all find a warm JVM.
    False when `seconds` is 0 (no warm-up)."""
    if seconds <= 0:
        return False
    print(f"   warming Spark up: Spark starts (~15 s), then an untimed run of the optimizer's "
          f"plan over the first {seconds} event seconds", flush=True)
    t0 = time.time()
    with ConsoleProgress() as shown:
        run(q, "auto", work / "data", work_dir=work / "warmup",
            seconds_per_batch=seconds_per_batch, max_files=seconds, progress=shown)
    shutil.rmtree(work / "warmup", ignore_errors=True)
    print(f"   warmed up in {time.time() - t0:.0f} s (not counted below)", flush=True)
    return True


def timing_note(warmed: bool, seconds_per_batch: int) -> str:
    """What the side by side's timing includes, said on the screen."""
    return (f"rho = event seconds per wall second of the micro-batches ({seconds_per_batch} "
            "event s each; filling the windows and the end-of-input flush included); it "
            "excludes the ingest (validation and spool before Spark's queries start: its CPU "
            "time is the column 'ingest CPU s') and Spark's start-up; "
            + ("Spark was warmed up by an untimed run first, so no plan pays the JVM's "
               "first batches." if warmed else
               "NOT warmed up (--warmup-seconds 0): the first plan pays the JVM's first "
               "batches."))


if __name__ == "__main__":
    raise SystemExit(main())
