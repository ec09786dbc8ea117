"""`fedq status WORK_DIR`: a run's state from its work directory, running or stopped
(federation/runtime/status.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from federation.cli.args import Help


def cmd_status(a: argparse.Namespace) -> int:
    from federation.runtime.status import run_status

    try:
        s = run_status(a.work_dir)
    except (FileNotFoundError, ValueError) as e:
        print(f"fedq status: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(s, indent=2, default=str))
        return 0
    print("\n".join(status_lines(s)))
    return 0


def status_lines(s: dict) -> list[str]:
    r = s["run"]
    if r.get("adaptive"):
        return _adaptive_lines(s)
    follow = f"following (until {r['until']})" if r.get("follow") and r.get("until") != "None" \
        else "following" if r.get("follow") else "replay"
    state = f"running (process {s['process']})" if s["running"] else "not running"
    out = [f"run {r['query']}: {state}",
           f"  placement {r['placement']}  feed {r.get('feed')}  {follow}",
           "  data " + (", ".join(f"{k}={v}" for k, v in r["data"].items())
                        if isinstance(r["data"], dict) else str(r["data"]))]
    for i, st in s["stages"].items():
        clock = min(st["clock"].values(), default=None)
        out.append(f"  stage {i}: last batch {st['batch']}, clock {clock}")
    out += _input_lines(s)
    for q, res in s["results"].items():
        span = f", instants {res['first_instant']} .. {res['last_instant']}" \
            if res["first_instant"] else ""
        out.append(f"  results {q}: {res['rows']:,} rows in {res['parts']} "
                   f"part{'s' if res['parts'] != 1 else ''}{span}")
    if s["summary"]:
        m = s["summary"]
        out.append(f"  last ended: {m.get('result_rows')} result rows, wall "
                   f"{m.get('wall_s', 0):.1f} s, rho {m.get('rho', float('nan')):.2f}, "
                   f"output {m.get('output')}")
    if s["takeover"]:
        out.append(f"  started over after a failed resume; its sinks were taken over up to "
                   f"{s['takeover']['marks']}")
    if s["resume_failure"]:
        out.append(f"  resume failure: {s['resume_failure'].splitlines()[0]}")
    return out


def _input_lines(s: dict) -> list[str]:
    out = []
    for name, inp in s["input"].items():
        dead = sum(inp["dead"].values())
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(inp["dead"].items())[:5])
        out.append(f"  input {name}: {inp['files']} files, "
                   f"{inp['rows_in']:,} rows, {dead:,} dead-lettered"
                   + (f" ({reasons})" if reasons else "")
                   + (f", {inp['quarantined']} quarantined" if inp["quarantined"] else "")
                   + (f", last reading {inp['last_ts']}" if inp["last_ts"] else ""))
    return out


def _adaptive_lines(s: dict) -> list[str]:
    """An adaptive run: its input, then each segment (runtime/status._adaptive)."""
    r = s["run"]
    state = f"running (process {s['process']})" if s["running"] else "not running"
    out = [f"adaptive run {r['query']}: {state}",
           (f"  feed {r.get('feed')}  {'following' if r.get('follow') else 'replay'}  "
            f"strategy {r.get('strategy')}"),
           "  data " + (", ".join(f"{k}={v}" for k, v in r["data"].items())
                        if isinstance(r["data"], dict) else str(r["data"]))]
    out += _input_lines(s)
    for k, g in enumerate(s["segments"]):
        span = f"{g['start_at'] or 'the first instant'} .. {g['stop_at'] or 'the end'}"
        clock = min((c for st in g["stages"].values() for c in st["clock"].values()),
                    default=None) if g["stages"] else None
        how = (f"finished ({g['strategy']}), {g['result_rows']:,} rows its own"
               if g["finished"] else f"in progress, clock {clock}")
        out.append(f"  segment {k + 1}: {g['placement']}  {span}: {how}")
        if k:
            out.append(f"    why: {g['reason']}")
    return out


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="a run's state from its work directory",
                       description="What a run's work directory says about it, while it "
                                   "runs or after it stopped: running or not, each stage's "
                                   "last micro-batch and clock, its input and dead letters, "
                                   "its results per query, how it ended.",
                       epilog="examples:\n  fedq status live1/\n  fedq status live1/ --json",
                       formatter_class=Help)
    p.add_argument("work_dir", type=Path, help="the run's --work-dir")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=cmd_status)
