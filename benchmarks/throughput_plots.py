"""Plots of a throughput result: the paper's Fig. 5 and Fig. 6."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.common import say

_COLORS = {"auto": "C0", "spe": "C1", "db": "C2", "nofeas": "C3"}


def _achieved(p: dict) -> float:
    """Achieved throughput; for a point without one finished event second, its upper
    bound rate / wall time (drawn as a downward triangle)."""
    if math.isnan(p["rho"]):
        return p["rate"] / p["wall_s"]
    return p["rate"] * min(1.0, p["rho"])


def _series(pts: list[dict], q: str, plan: str, key: str) -> tuple[list, list]:
    xs = sorted((p["rate"], p[key]) for p in pts if p["query"] == q and p["plan"] == plan)
    return [x for x, _ in xs], [y for _, y in xs]


def plot(doc: dict, path: Path) -> None:
    """Fig. 5 (a1-f1: achieved vs requested; a2-f2: maximum throughput per plan) as
    <name>.png and Fig. 6 (with and without the feasibility check) as <name>_fig6.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    queries = sorted({p["query"] for p in pts})
    lim = max(p["rate"] for p in pts)
    protos = "+".join(sorted({(p.get("protocol") or "?").split(":")[0] for p in pts}))
    title = (f"window scale {doc.get('scale')}, {doc.get('plugs')} plugs, "
             f"{doc.get('date', '')[:10]}, protocol {protos}; hollow: not at steady state; "
             "triangle: upper bound (no event second within the budget)")
    fig, axes = plt.subplots(2, len(queries), figsize=(3.6 * len(queries), 7), squeeze=False)
    for i, q in enumerate(queries):
        ax = axes[0][i]
        for plan in ("auto", "spe", "db"):
            sel = sorted((p for p in pts if p["query"] == q and p["plan"] == plan),
                         key=lambda p: p["rate"])
            if not sel:
                continue
            ys = [_achieved(p) for p in sel]
            ax.plot([p["rate"] for p in sel], ys,
                    color=_COLORS[plan], lw=2.5 if plan == "auto" else 1, label=plan)
            for p, y in zip(sel, ys, strict=True):
                ax.plot(p["rate"], y, "v" if math.isnan(p["rho"]) else "o",
                        color=_COLORS[plan], mfc=_COLORS[plan] if p["steady"] else "none")
        ax.plot([0, lim], [0, lim], ls=":", color="grey")
        ax.set_title(f"({'abcdef'[i % 6]}1) {q}: achieved vs requested", fontsize=9)
        ax.set_xlabel("requested tuples/s")
        ax.set_ylabel("achieved tuples/s")
        ax.legend(fontsize=7)
        ax = axes[1][i]
        mt = {m["plan"]: m for m in doc["max_throughput"] if m["query"] == q}
        plans = [p for p in ("auto", "spe", "db") if p in mt]
        ax.bar(plans, [mt[p]["peak_processed"] for p in plans], color="none",
               edgecolor=[_COLORS[p] for p in plans], hatch="//", label="peak processed")
        bars = ax.bar(plans, [mt[p]["peak"] for p in plans],
                      color=[_COLORS[p] for p in plans], label="peak achieved")
        for b, p in zip(bars, plans, strict=True):
            ax.annotate(f"{mt[p]['peak'] / 1000:.1f}k\nMST {mt[p]['mst'] / 1000:.0f}k",
                        (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                        va="bottom", fontsize=6)
        ax.set_yscale("log")
        ax.set_title(f"({'abcdef'[i % 6]}2) {q}: max throughput", fontsize=9)
        ax.set_ylabel("tuples/s")
        ax.legend(fontsize=6)
    fig.suptitle(f"Fig. 5 - {title}", fontsize=9)
    fig.tight_layout()
    out = path.with_suffix(".png")
    fig.savefig(out, dpi=80)
    plt.close(fig)
    say(f"wrote {out}")
    if not any(p["plan"] == "nofeas" for p in pts):
        return
    fig, axes = plt.subplots(1, len(queries), figsize=(3.6 * len(queries), 3.8),
                             squeeze=False)
    for i, q in enumerate(queries):
        ax = axes[0][i]
        for plan, label in (("auto", "with check"), ("nofeas", "without check")):
            xs, ys = _series(pts, q, plan, "processed_tps")
            if xs:
                ax.plot(xs, ys, marker="o" if plan == "auto" else "x",
                        color=_COLORS[plan], label=label)
        diff = [p["rate"] for p in pts if p["query"] == q and p["plan"] == "nofeas"
                and "same_as" not in p]
        for r in diff:
            ax.axvline(r, color="grey", lw=0.5, ls="--")
        ax.plot([0, lim], [0, lim], ls=":", color="grey")
        ax.set_title(f"{q}: processed vs requested\n(dashed: the plans differ)", fontsize=9)
        ax.set_xlabel("requested tuples/s")
        ax.set_ylabel("processed tuples/s")
        ax.legend(fontsize=7)
    fig.suptitle(f"Fig. 6 - plans with and without the feasibility check; {title}",
                 fontsize=9)
    fig.tight_layout()
    out6 = path.with_name(path.stem + "_fig6.png")
    fig.savefig(out6, dpi=80)
    plt.close(fig)
    say(f"wrote {out6}")
