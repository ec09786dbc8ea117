"""The feed's cost: how the stage that reads the streams gets its micro-batches.

Where an SPE-op reads a stream (a window's rows go into Spark), that stage is a Spark
streaming query and pays Spark's fixed cost per micro-batch (`spe_s_per_slide`, the
"gateway": in Ji et al.'s setting the SPE receives every stream). Where no SPE-op reads a
stream and the run's feed is "direct" (fedq's default, federation/runtime/direct.py), fedq
reads the spool itself and hands each micro-batch to the DB-ops: its own fixed cost per
micro-batch (`direct_s_per_slide`) and per row read (`direct_s_per_row`), no JVM. With the
feed "spe" (`--feed spe`, the paper's setting) Spark forwards every row either way. A
DB-op's output that SPE-ops read re-enters Spark in a query of its own, priced apart
(plan_cost.reentry_cost).
"""

from __future__ import annotations

from collections.abc import Mapping

from costmodel.profile import CostProfile


def spark_at_source(plan, placement: Mapping[str, str]) -> bool:
    """Whether Spark reads a stream under `placement`: an SPE-op over a window."""
    return any(placement.get(o, "spe") == "spe" and
               any(plan.nodes[c].kind == "window" for c in plan.children[o])
               for o in plan.r2r_ids)


def feed_of(plan, p: CostProfile, placement: Mapping[str, str] | None) -> str:
    """"spark" or "direct": who reads the streams (module doc; None: not known yet)."""
    return "spark" if placement is None or p.feed == "spe" or \
        spark_at_source(plan, placement) else "direct"


def feed_cost(sizes, plan, p: CostProfile, placement: Mapping[str, str] | None = None
              ) -> float:
    """u of the feed (module doc); `placement=None`: Spark's, as the placement search
    compares plans before it knows where the streams are read (the same for every plan)."""
    slides = max(s.l for s in sizes.values())
    if feed_of(plan, p, placement) == "spark":
        return slides * p.spe_s_per_slide
    rows = {n.stream.name: sizes[o].rate for o, n in plan.nodes.items()
            if getattr(n, "kind", None) == "window"}
    return slides * p.direct_s_per_slide + sum(rows.values()) * p.direct_s_per_row
