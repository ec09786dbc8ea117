"""Markdown tables of a throughput result: every point, ratios, predicted feasibility.

Run: python -m benchmarks.report benchmarks/results/throughput_scale0.1.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def report(path: Path) -> str:
    doc = json.loads(path.read_text())
    pts = doc["points"]
    by = {(p["query"], p["rate"], p["plan"]): p for p in pts}
    v = doc.get("versions", {})
    head = (f"`{doc.get('command', '')}` on {doc.get('date', '')}, "
            f"{doc.get('machine', {}).get('cpus')} cores, pyspark {v.get('pyspark')}, duckdb "
            f"{v.get('duckdb')}; window scale {doc.get('scale')}, {doc.get('plugs')} plugs, "
            f"profile `{doc.get('profile')}`.")
    cols = ("| query | rate | plan | placement | rho | achieved/s | steady | predicted C_b | "
            "predicted feasible | measured feasible |")
    out = [f"### {path.name}", "", head, "", cols, "|---|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(pts, key=lambda p: (p["query"], p["rate"], p["plan"])):
        out.append(
            f"| {p['query']} | {p['rate']:.0f} | {p['plan']} | `{p['placement']}` | "
            f"{p['rho']:.2f} | {p['achieved_tps']:.0f} | {'yes' if p['steady'] else 'no'} | "
            f"{p['predicted_C_b']:.2f} | {'yes' if p['predicted_feasible'] else 'no'} | "
            f"{'yes' if p['rho'] >= 1 else 'no'} |")
    hdr = ("| query | rate | auto / best measured | auto / pure-SPE | auto / pure-DB | "
           "best measured plan |")
    out += ["", hdr, "|---|---|---|---|---|---|"]
    for q, rate in sorted({(p["query"], p["rate"]) for p in pts}):
        here = [p for p in pts if p["query"] == q and p["rate"] == rate]
        best = max(here, key=lambda p: p["rho"])
        a = by.get((q, rate, "auto"))
        s = by.get((q, rate, "spe"))
        d = by.get((q, rate, "db"))
        if not a:
            continue

        def ratio(x, a=a):
            return f"{a['rho'] / x['rho']:.2f}" if x and x["rho"] else "-"

        out.append(f"| {q} | {rate:.0f} | {ratio(best)} | {ratio(s)} | {ratio(d)} | "
                   f"{best['plan']} (rho {best['rho']:.2f}) |")
    if "max_throughput" in doc:
        out += ["", "| query | plan | max sustainable (tested rates) | peak achieved |",
                "|---|---|---|---|"]
        for m in doc["max_throughput"]:
            out.append(f"| {m['query']} | {m['plan']} | {m['mst']:.0f} | {m['peak']:.0f} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(report(Path(arg)))
