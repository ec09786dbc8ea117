"""Ratios and the plot of `benchmarks.peers` (benchmarks/results/peers.json, peers.png)."""

from __future__ import annotations

from pathlib import Path


def _order(q: str) -> int:  # q5 -> 5, CQ3 -> 3
    return int("".join(c for c in q if c.isdigit()))


def ratios(points: list[dict]) -> dict:
    """Per query: fedq's plan (auto) against each other engine, events/s over events/s."""
    by = {(p["query"], p["engine"]): p.get("events_per_s") for p in points}
    out: dict[str, dict] = {}
    for q in sorted({p["query"] for p in points}, key=_order):
        mine = by.get((q, "fedq-auto"))
        out[q] = {e: (round(mine / v, 2) if mine and v else None)
                  for (qq, e), v in by.items() if qq == q and e != "fedq-auto"}
    return out


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = payload["points"]
    queries = sorted({p["query"] for p in points}, key=_order)
    engines = list(dict.fromkeys(p["engine"] for p in points))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(engines)
    for i, e in enumerate(engines):
        ys = [next((p["events_per_s"] or 0 for p in points
                    if p["query"] == q and p["engine"] == e), 0) for q in queries]
        ax.bar([x + i * width for x in range(len(queries))], ys, width, label=e)
    pub = payload.get("published", {}).get("flink_per_core", {})
    cores = payload.get("cpus") or 2
    for x, q in enumerate(queries):
        if q in pub:
            ax.hlines(pub[q] * cores, x - 0.1, x + 0.9, colors="k", linestyles="dotted")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(queries))], queries)
    ax.set_yscale("log")
    ax.set_ylabel("events/s (input events / timed seconds)")
    ax.set_title(payload.get("title") or f"Nexmark, {payload['events']:,} events, {cores} "
                 "cores (dotted: Flink's published per-core figure x cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
