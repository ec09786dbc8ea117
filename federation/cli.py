"""`fedq`: explain, run, generate, calibrate."""

from __future__ import annotations

import argparse
import json
import math
import sys


def _number(text: str, low: float, inclusive: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < low or (v == low and not inclusive):
        raise argparse.ArgumentTypeError(
            f"must be a finite number {'>=' if inclusive else '>'} {low:g}, got {text!r}")
    return v


def positive(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    return _number(text, 0.0, inclusive=False)


def non_negative(text: str) -> float:
    """A finite number >= 0 (argparse type)."""
    return _number(text, 0.0, inclusive=True)


def count(text: str) -> int:
    """A whole number >= 1 (argparse type)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def _rates(text: str) -> list[float]:
    """'1000:40000:1000' (start:stop:step, inclusive) or '1000,2000'; each rate > 0.

    Example:
        >>> _rates("1000:3000:1000")
        [1000.0, 2000.0, 3000.0]
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(
                f"bad sweep {text!r}: want start:stop:step (e.g. 1000:40000:1000)")
        a, b, s = (positive(x) for x in parts)
        if b < a:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: stop is below start")
        if (b - a) / s > 10_000:
            raise argparse.ArgumentTypeError(f"bad sweep {text!r}: more than 10,000 rates")
        out, x = [], a
        while x <= b + 1e-9:
            out.append(x)
            x += s
        return out
    return [positive(x) for x in text.split(",") if x.strip()]


def _sweep_text(text: str) -> str:
    _rates(text)  # validated when the arguments are read
    return text


def _query(name: str):
    from federation.smartplug.queries import QUERIES

    key = name.upper()
    if key not in QUERIES:
        raise SystemExit(f"fedq: unknown query {name!r}; choose one of {', '.join(QUERIES)}")
    return QUERIES[key]


def cmd_explain(a: argparse.Namespace) -> int:
    from costmodel.profile import load_profile
    from federation.explain import explain_json, explain_text, sweep
    from federation.optimizer import optimize

    make = _query(a.query)
    profile = load_profile(a.profile)
    kw = {"profile": profile, "feasibility_check": not a.no_feasibility_check,
              "max_subplan_ops": a.max_subplan_ops}

    def mk(rate: float):
        return make(rate=rate, scale=a.scale, plugs=a.plugs)

    if a.sweep:
        rows = sweep(mk, _rates(a.sweep), **kw)
        if a.json:
            print(json.dumps(rows, indent=2))
            return 0
        print(f"{'rate':>8}  {'C_b':>9}  {'C_u':>9}  feasible  placement")
        for r in rows:
            mark = " <- changes" if r["changed"] and r is not rows[0] else ""
            print(f"{r['rate']:>8.0f}  {r['C_b']:>9.4g}  {r['C_u']:>9.4g}  "
                  f"{'yes' if r['feasible'] else 'NO ':<8}  {r['placement']}{mark}")
        return 0
    r = optimize(mk(a.rate), **kw)
    print(json.dumps(explain_json(r), indent=2) if a.json else explain_text(r))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fedq", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    e = sub.add_parser("explain", help="show the optimizer's physical plan for a query")
    e.add_argument("query", help="CQ1..CQ6")
    e.add_argument("--rate", type=positive, default=2000.0, help="input rate, tuples/s")
    e.add_argument("--scale", type=positive, default=1.0, help="window range scale (1 = paper)")
    e.add_argument("--plugs", type=count, default=2125, help="number of plugs (groups)")
    e.add_argument("--json", action="store_true")
    e.add_argument("--no-feasibility-check", action="store_true",
                   help="rank plans by C_u alone (paper section 8.4)")
    e.add_argument("--sweep", metavar="START:STOP:STEP", type=_sweep_text,
                   help="show the optimal placement across a range of rates")
    e.add_argument("--profile", help="cost profile JSON (default: calibrated, else shipped)")
    e.add_argument("--max-subplan-ops", type=count, default=15)
    e.set_defaults(func=cmd_explain)

    try:
        from federation import cli_runtime
    except ImportError:  # pragma: no cover
        cli_runtime = None
    if cli_runtime is not None:
        cli_runtime.add_commands(sub)

    a = p.parse_args(argv)
    return int(a.func(a) or 0)


if __name__ == "__main__":
    sys.exit(main())
