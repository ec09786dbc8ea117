"""Markdown tables of a throughput result: every point, ratios, predicted feasibility.

Run: python -m benchmarks.report benchmarks/results/throughput_scale0.1.json

Every number says which measurement protocol it comes from (benchmarks.throughput.PROTOCOL,
"v1: ..." for the points before issue 22): a column of the every-point and the
maximum-throughput tables, and a legend of the protocols under the first table.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

from benchmarks.throughput import max_throughput


def _rho(p: dict) -> str:
    if math.isnan(p["rho"]):  # no event second finished within the budget
        return f"< {1 / p['wall_s']:.3f}"
    return f"{p['rho']:.2f}"


def _val(p: dict) -> float:
    return -1.0 if math.isnan(p["rho"]) else p["rho"]


def protocol_tag(p: dict) -> str:
    """The short name of a point's protocol: "v1", "v2", "quick"; "?" when not recorded."""
    return (p.get("protocol") or "?").split(":")[0]


def protocols(pts: list[dict]) -> str:
    """The protocols of some points, short names joined by "+" (e.g. "v1+v2")."""
    return "+".join(sorted({protocol_tag(p) for p in pts}))


def protocol_legend(pts: list[dict]) -> list[str]:
    """What each protocol of the points means, with how many points and commits it has."""
    by: dict[str, list[dict]] = {}
    for p in pts:
        by.setdefault(p.get("protocol") or "?", []).append(p)
    out = []
    for proto, ps in sorted(by.items()):
        commits = sorted({p["commit"] for p in ps if p.get("commit")})
        what = {"?": "?: not recorded", "quick": "quick: a --quick run (it may have measured "
                "fewer than 60 one-second batches)"}.get(proto, proto)
        out.append(f"- {what}; {len(ps)} points, commit "
                   f"{', '.join(commits) if commits else 'not recorded'}")
    return ["Protocols (column `protocol`):", "", *out]


def report(path: Path) -> str:
    doc = json.loads(path.read_text())
    pts = doc["points"]
    doc["max_throughput"] = max_throughput(pts)  # recomputed: older files lack fields
    by = {(p["query"], p["rate"], p["plan"]): p for p in pts}
    v = doc.get("versions", {})
    head = (f"`{doc.get('command', '')}` on {doc.get('date', '')}, "
            f"{doc.get('machine', {}).get('cpus')} cores, pyspark {v.get('pyspark')}, duckdb "
            f"{v.get('duckdb')}; window scale {doc.get('scale')}, {doc.get('plugs')} plugs, "
            f"profile `{doc.get('profile')}`.")
    cols = ("| query | rate | plan | placement | rho | achieved/s | steady | predicted C_b | "
            "predicted feasible | measured feasible | protocol |")
    out = [f"### {path.name}", "", head, "", cols,
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(pts, key=lambda p: (p["query"], p["rate"], p["plan"])):
        out.append(
            f"| {p['query']} | {p['rate']:.0f} | {p['plan']} | `{p['placement']}` | "
            f"{_rho(p)} | {p['achieved_tps']:.0f} | {'yes' if p['steady'] else 'no'} | "
            f"{p['predicted_C_b']:.2f} | {'yes' if p['predicted_feasible'] else 'no'} | "
            f"{'yes' if p['rho'] >= 1 else 'no'} | {protocol_tag(p)} |")
    out += ["", *protocol_legend(pts)]
    hdr = ("| query | rate | auto / best measured | auto / pure-SPE | auto / pure-DB | "
           "best measured plan | protocol |")
    out += ["", hdr, "|---|---|---|---|---|---|---|"]
    for q, rate in sorted({(p["query"], p["rate"]) for p in pts}):
        here = [p for p in pts if p["query"] == q and p["rate"] == rate]
        best = max(here, key=_val)
        a = by.get((q, rate, "auto"))
        s = by.get((q, rate, "spe"))
        d = by.get((q, rate, "db"))
        if not a:
            continue

        def ratio(x, a=a):
            if x and math.isnan(x["rho"]):  # x's rho < 1 / wall
                return f"> {a['rho'] * x['wall_s']:.0f}"
            return f"{a['rho'] / x['rho']:.2f}" if x and x["rho"] else "-"

        out.append(f"| {q} | {rate:.0f} | {ratio(best)} | {ratio(s)} | {ratio(d)} | "
                   f"{best['plan']} (rho {best['rho']:.2f}) | {protocols(here)} |")
    if doc["max_throughput"]:
        out += ["", ("Maximum throughput by search over the measured rates (docs/architecture.md, benchmark protocol): MST = the "
                 "largest rate sustained (rho >= 1 there and at every lower rate), peak "
                 "achieved = the largest rate x min(1, rho), peak processed = the largest "
                 "rate x rho (not capped by the requested rate)."), "",
                ("| query | plan | MST | peak achieved/s | peak processed/s (at rate) | "
                "every point steady | protocol |"),
                "|---|---|---|---|---|---|---|"]
        for m in doc["max_throughput"]:
            theirs = [p for p in pts if p["query"] == m["query"] and p["plan"] == m["plan"]]
            out.append(f"| {m['query']} | {m['plan']} | {m['mst']:.0f} | {m['peak']:.0f} | "
                       f"{m['peak_processed']:.0f} ({m['peak_processed_at_rate']:.0f}) | "
                       f"{'yes' if m['all_steady'] else 'no'} | {protocols(theirs)} |")
        out += ["", *ratio_table(doc), "", *boundary_table(doc), "", *beaten(doc), "",
                *shipped_choice(doc)]
    return "\n".join(out) + "\n"


def ratio_table(doc: dict) -> list[str]:
    """Hybrid (the optimizer's plan) over pure-SPE and pure-DB, maximum throughput."""
    mt = {(m["query"], m["plan"]): m for m in doc["max_throughput"]}
    out = [("| query | auto/spe MST | auto/db MST | auto/spe peak achieved | "
           "auto/db peak achieved | auto/spe peak processed | auto/db peak processed | "
           "protocol |"),
           "|---|---|---|---|---|---|---|---|"]

    def r(a, b, k):
        return f"{a[k] / b[k]:.2f}" if a and b and b[k] else ("inf" if a and a[k] else "-")

    for q in sorted({m["query"] for m in doc["max_throughput"]}):
        a, s, d = mt.get((q, "auto")), mt.get((q, "spe")), mt.get((q, "db"))
        theirs = [p for p in doc["points"] if p["query"] == q
                  and p["plan"] in ("auto", "spe", "db")]
        out.append(f"| {q} | {r(a, s, 'mst')} | {r(a, d, 'mst')} | {r(a, s, 'peak')} | "
                   f"{r(a, d, 'peak')} | {r(a, s, 'peak_processed')} | "
                   f"{r(a, d, 'peak_processed')} | {protocols(theirs)} |")
    return out


def _refit_feasible(doc: dict, p: dict, profile) -> bool:
    """Feasibility of the point's placement predicted by `profile` (the shipped one)."""
    from benchmarks.throughput import point_plan
    from costmodel.plan_cost import plan_cost
    from federation.errors import PlacementError
    from federation.physical import build_physical_plan

    try:
        pp = build_physical_plan(point_plan(doc, p, profile), p["placement"])
    except PlacementError:  # Phase-One numbered this query's plan differently
        return p["predicted_feasible"]
    return plan_cost(pp, profile).vector.is_feasible


def boundary_table(doc: dict) -> list[str]:
    """Predicted against measured feasibility boundary of each plan label: as the run's
    profile predicted it, and as the shipped profile predicts it now."""
    from costmodel.profile import load_profile

    prof = load_profile()
    for p in doc["points"]:
        p["now_feasible"] = _refit_feasible(doc, p, prof)
    out = [(f"| query | plan | predicted feasible up to (`{doc.get('profile')}`) | "
            f"predicted (`{prof.name}`) | measured feasible up to | "
            "rates where the run's prediction disagrees | where the shipped one does | "
            "protocol |"),
           "|---|---|---|---|---|---|---|---|"]
    by: dict = {}
    for p in doc["points"]:
        by.setdefault((p["query"], p["plan"]), []).append(p)
    for (q, plan), ps in sorted(by.items()):
        ps.sort(key=lambda p: p["rate"])

        def upto(ok, ps=ps):
            best = 0.0
            for p in ps:
                if not ok(p):
                    break
                best = p["rate"]
            return f"{best:.0f}" if best else "none"

        bad = [f"{p['rate'] / 1000:g}k" for p in ps
               if p["predicted_feasible"] != (p["rho"] >= 1)]
        bad_now = [f"{p['rate'] / 1000:g}k" for p in ps
                   if p["now_feasible"] != (p["rho"] >= 1)]
        out.append(f"| {q} | {plan} | {upto(lambda p: p['predicted_feasible'])} | "
                   f"{upto(lambda p: p['now_feasible'])} | "
                   f"{upto(lambda p: p['rho'] >= 1)} | {', '.join(bad) or '-'} | "
                   f"{', '.join(bad_now) or '-'} | {protocols(ps)} |")
    return out


def shipped_choice(doc: dict) -> list[str]:
    """Per point: the placement the shipped profile's optimizer chooses now, and how that
    placement measured in this run (any label with the same placement)."""
    from costmodel.profile import load_profile
    from federation.optimizer import optimize
    from federation.smartplug.queries import QUERIES

    prof = load_profile()
    pts = doc["points"]
    out = [(f"| query | rate | choice under `{prof.name}` | measured rho | / best measured | "
           "/ the run's choice | protocol |"), "|---|---|---|---|---|---|---|"]
    worst = []
    for q, rate in sorted({(p["query"], p["rate"]) for p in pts}):
        here = [p for p in pts if p["query"] == q and p["rate"] == rate]
        plan = optimize(QUERIES[q](rate=rate, scale=doc["scale"], plugs=doc["plugs"]),
                        profile=prof).plan.placement_string
        same = next((p for p in here if p["placement"] == plan), None)
        best = max(here, key=_val)
        auto = next((p for p in here if p["plan"] == "auto"), None)
        label = next((p["plan"] for p in here if p["placement"] == plan), "other")
        if same is None or math.isnan(same["rho"]):
            out.append(f"| {q} | {rate:.0f} | `{plan}` | not measured | - | - | - |")
            continue
        r_best = same["rho"] / best["rho"]
        worst.append(r_best)
        r_auto = same["rho"] / auto["rho"] if auto else float("nan")
        out.append(f"| {q} | {rate:.0f} | {label} | {same['rho']:.2f} | {r_best:.2f} | "
                   f"{r_auto:.2f} | {protocols(here)} |")
    if worst:
        out += ["", (f"Shipped profile's choice / best measured plan: median "
                f"{statistics.median(worst):.2f}, worst {min(worst):.2f} over {len(worst)} "
                "points.")]
    return out


def beaten(doc: dict) -> list[str]:
    """Every point at which the optimizer's plan was not the best measured plan."""
    out = []
    pts = doc["points"]
    for q, rate in sorted({(p["query"], p["rate"]) for p in pts}):
        here = [p for p in pts if p["query"] == q and p["rate"] == rate]
        a = next((p for p in here if p["plan"] == "auto"), None)
        best = max(here, key=_val)
        if a and best["placement"] != a["placement"] and best["rho"] > a["rho"]:
            out.append(f"- {q} at {rate:.0f}/s: beaten by {best['plan']} "
                       f"(`{best['placement']}`) by {100 * (best['rho'] / a['rho'] - 1):.0f}% "
                       f"(rho {a['rho']:.2f} vs {best['rho']:.2f}; protocol "
                       f"{protocols([a, best])})")
    return ["Points where the optimizer's plan was beaten:", "", *(out or ["- none"])]


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(report(Path(arg)))
