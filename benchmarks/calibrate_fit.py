"""Fitting a cost profile from the calibration runs (calibrate.py) and refitting it from a
throughput result: the figures in, the profile out."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np

from benchmarks.common import say
from costmodel.fit import nnls_fit, slope
from costmodel.plan_cost import plan_cost
from costmodel.profile import CostProfile, PerKind
from federation.errors import PlacementError
from federation.physical import build_physical_plan

_STATE_TERMS = ("stateful ops", "rows in", "rows x copies", "state keys")


def _with_terms(p: CostProfile, op=0.0, row=0.0, copy=0.0, state=0.0) -> CostProfile:
    return p.model_copy(update={
        "spe_s_per_stateful_op_slide": op,
        "spe_s_per_row": p.spe_s_per_row.model_copy(update={"aggregate": row, "join": row}),
        "spe_s_per_window_copy": copy, "spe_s_per_state_group_window": state})


def throughput_rows(path: Path, base: CostProfile) -> list[dict]:
    """Pure-SPE points of a throughput run (`benchmarks.throughput`, any window scale) as
    observations of the stateful SPE terms: batch time 1/rho against the four features the
    cost model derives from the plan (the model is linear in its unit costs, so feature k is
    C_u with unit cost k = 1 and the other three 0, less C_u with all four 0)."""
    from benchmarks.throughput import point_plan

    doc = json.loads(Path(path).read_text())
    zero = _with_terms(base).model_copy(update={
        "spe_s_per_slide": 0.0, "spe_s_per_stateless_op_slide": 0.0})
    out = []
    for pt in doc["points"]:
        if pt["plan"] != "spe" or "same_as" in pt or not pt["rho"] > 0:
            continue
        lg = point_plan(doc, pt, base)

        def cu(p: CostProfile, lg=lg, pt=pt) -> float:
            return plan_cost(build_physical_plan(lg, pt["placement"]), p).vector.C_u

        try:
            z = cu(zero)
        except PlacementError:
            say(f"skipped {pt['query']} {pt['rate']:.0f}/s spe: operator ids of another plan")
            continue
        feats = [cu(_with_terms(zero, **{k: 1.0})) - z for k in ("op", "row", "copy", "state")]
        out.append({"plan": f"{pt['query']} spe {pt['rate']:.0f}/s (scale {doc['scale']:g})",
                    "features": feats, "batch_s": 1.0 / pt["rho"],
                    "per_query": cu(zero.model_copy(update={"spe_s_per_slide": 1.0})) - z,
                    "per_stateless": cu(zero.model_copy(
                        update={"spe_s_per_stateless_op_slide": 1.0})) - z,
                    "query": pt["query"], "rate": pt["rate"], "scale": doc["scale"],
                    "plugs": doc["plugs"], "placement": pt["placement"]})
    return out


DB_TERMS = ("scan per row: select/project", "scan per row: join",
             "scan per row: aggregate")


def _with_db_terms(p: CostProfile, sel=0.0, join=0.0, agg=0.0) -> CostProfile:
    return p.model_copy(update={
        "db_scan_s_per_row": PerKind(select=sel, project=sel, join=join, aggregate=agg)})


def refit_db(profile: CostProfile, path: Path, plan_profile: CostProfile
             ) -> tuple[CostProfile, list[dict]]:
    """Refit the DuckDB scan cost per row on the plans with DB-ops of a throughput run
    (pure-DB, the optimizer's and the kept plans): batch time 1/rho less what the model
    charges everything else, against the features of the three per-kind scan terms (linear,
    as above). The microbenchmarks of the generated SQL use windows of thousands of rows; at
    the paper's window sizes a DB-op scans millions per slide. The Arrow transfer per row
    stays as the selection trade-off measured it (it rises with the rate like the scans, so
    one fit cannot tell them apart)."""
    from benchmarks.throughput import point_plan

    doc = json.loads(Path(path).read_text())
    zero = _with_db_terms(profile)
    rows = []
    for pt in doc["points"]:
        if pt["plan"] == "spe" or "same_as" in pt or not pt["rho"] > 0 or not pt["steady"]:
            continue
        lg = point_plan(doc, pt, plan_profile)  # the plan the run numbered

        def cu(p: CostProfile, lg=lg, pt=pt) -> float:
            return plan_cost(build_physical_plan(lg, pt["placement"]), p).vector.C_u

        try:
            z = cu(zero)
        except PlacementError:
            say(f"skipped {pt['query']} {pt['rate']:.0f}/s {pt['plan']}: its operator ids "
                "belong to another Phase-One join order")
            continue
        feats = [cu(_with_db_terms(profile, **{k: 1.0})) - z
                 for k in ("sel", "join", "agg")]
        rows.append({"plan": f"{pt['query']} {pt['plan']} {pt['rate']:.0f}/s "
                             f"(scale {doc['scale']:g})", "features": feats, "rest_s": z,
                     "batch_s": 1.0 / pt["rho"], "query": pt["query"], "rate": pt["rate"],
                     "scale": doc["scale"], "plugs": doc["plugs"],
                     "placement": pt["placement"]})
    if not rows:
        return profile, rows
    a = np.array([r["features"] for r in rows])
    b = np.array([r["batch_s"] - r["rest_s"] for r in rows])
    w = 1.0 / np.array([r["batch_s"] for r in rows])
    sel, join, agg = nnls_fit(a * w[:, None], b * w)
    return _with_db_terms(profile, float(sel), float(join), float(agg)), rows


def fit_profile(spe_rows, cq4, hybrid, dbf, cores: float, tradeoff=None, extra=None
                ) -> tuple[CostProfile, dict]:
    c_stateless = 0.0
    if tradeoff:
        # pure-DB against Spark-select -> DuckDB: T = s0 + [Spark selection] c_stateless
        # + rows into DuckDB x c_row (one fit)
        a = np.array([[1.0, 1.0 if t["placement"] != "db" else 0.0, t["rows_to_db_per_batch"]]
                      for t in tradeoff])
        b = np.array([t["batch_s"] for t in tradeoff])
        s0, c_stateless, c_row = nnls_fit(a, b)
        c_transfer = max(c_row - dbf["insert_s_per_row"] - dbf["expire_s_per_row"]
                         - dbf["scan_select_s_per_row"], 0.0)
    else:  # figures of an older calibration: the Spark-select -> DuckDB runs only
        s0, c_transfer = slope([h["rows_per_batch"] for h in hybrid],
                               [h["batch_s"] - h["db_s"] for h in hybrid])
    s_stateful_base = s0 + c_stateless  # the stateful runs below also have the selection
    # stateful SPE-ops: batch time beyond s0 against (stateful ops, rows in, rows x window
    # copies, groups x open windows); CQ4 has two aggregations and a join
    design, target = [], []
    for r in spe_rows:
        lam = r["rate"] / 2
        design.append([1.0, lam, lam * r["range_s"], r["plugs"] * r["range_s"]])
        target.append(r["batch_s"] - s_stateful_base)
    lam = cq4["rate"] / 2
    design.append([3.0, 2 * lam + 2 * cq4["plugs"], lam * sum(cq4["ranges_s"]),
                   cq4["plugs"] * (sum(cq4["ranges_s"]) + 1)])
    target.append(cq4["batch_s"] - s0 - 3 * c_stateless)  # two selections, a projection
    measured = [r["batch_s"] for r in spe_rows] + [cq4["batch_s"]]
    for e in extra or []:  # throughput points: features and fixed part from the model
        design.append(e["features"])
        target.append(e["batch_s"] - s0 * e["per_query"] - c_stateless * e["per_stateless"])
        measured.append(e["batch_s"])
    a = np.array(design)
    b = np.array(target)
    # relative error: a 0.5 s calibration batch weighs as much as a 20 s one at full scale
    w = 1.0 / np.array(measured)
    c_op, c_agg, c_copy, c_state = nnls_fit(a * w[:, None], b * w)
    fixed = np.array(measured) - b  # what each row's target left out
    pred = fixed + a @ np.array([c_op, c_agg, c_copy, c_state])
    c_join = c_agg
    c_select = 0.0  # stateless Spark ops: below what the batch times resolve
    p = CostProfile(
        name=f"calibrated {dt.date.today().isoformat()}",
        measured=True,
        notes="fedq calibrate on this machine; figures in calibration.json",
        spe_s_per_row=PerKind(select=c_select, project=c_select, join=c_join,
                              aggregate=float(c_agg)),
        spe_s_per_window_copy=float(c_copy),
        spe_s_per_state_group_window=float(c_state),
        spe_s_per_slide=float(s0),
        spe_s_per_stateful_op_slide=float(c_op),
        spe_s_per_stateless_op_slide=float(c_stateless),
        db_transfer_in_s_per_row=c_transfer,
        db_transfer_out_s_per_row=dbf["insert_s_per_row"],
        db_window_maintain_s_per_row=dbf["insert_s_per_row"] + dbf["expire_s_per_row"],
        db_sql_fixed_s=dbf["sql_fixed_s"],
        db_scan_s_per_row=PerKind(select=dbf["scan_select_s_per_row"],
                                  project=dbf["scan_select_s_per_row"],
                                  join=dbf["scan_join_s_per_row"],
                                  aggregate=dbf["scan_aggregate_s_per_row"]),
        capacity_cores=cores,
    )
    fit = {"spe_fit_predicted_batch_s": pred.tolist(),
           "spe_measured_batch_s": measured,
           "columns": list(_STATE_TERMS),
           "throughput_points": [e["plan"] for e in extra or []]}
    return p, fit


def _db_terms(p: CostProfile, fixed=0.0, slice_=0.0, sel=0.0, join=0.0, agg=0.0, fold=0.0,
              keep=0.0) -> CostProfile:
    return p.model_copy(update={
        "db_sql_fixed_s": fixed, "db_slice_s_per_row": slice_, "db_fold_s_per_row": fold,
        "db_window_maintain_s_per_row": keep,
        "db_scan_s_per_row": PerKind(select=sel, project=sel, join=join, aggregate=agg)})


def fit_dbop(profile: CostProfile, path: Path) -> tuple[CostProfile, list[dict]]:
    """Fit the DuckDB terms of the sliced and raw-row DB-ops on `python -m benchmarks.dbop`
    (one DB-op per query at full window size, steady state): the MIG's time per slide
    (insert, fold, query, expiry) against the cost model's features of the fixed,
    slice-combine, per-kind scan, fold and upkeep terms (non-negative least squares,
    relative errors). The Arrow transfer from Spark is not in that benchmark and stays as
    the calibration runs measured it."""
    from federation.logical import NumberedPlan
    from federation.smartplug.queries import QUERIES

    doc = json.loads(Path(path).read_text())
    zero = _db_terms(profile)
    rows = []
    for r in doc["results"]:
        plan = NumberedPlan.of(QUERIES[r["query"]](rate=r["rate"], plugs=doc["plugs"]))
        pp = build_physical_plan(plan, r["placement"])

        def cost(p: CostProfile, pp=pp):
            (d,) = plan_cost(pp, p).db.values()
            return d

        z = cost(zero)
        sql = [cost(_db_terms(profile, **{k: 1.0})).sql - z.sql
               for k in ("fixed", "slice_", "sel", "join", "agg")]
        state = [cost(_db_terms(profile, **{k: 1.0})).maintain - z.maintain
                 for k in ("fold", "keep")]
        m = r["median"]
        rows.append({"plan": f"{r['query']} {r['kind']} {r['rate']:.0f}/s",
                     "features": sql + state,
                     "mig_s": m["insert_s"] + m["fold_s"] + m["sql_s"] + m["expire_s"]})
    # one fit of the MIG's whole time per slide; the fixed cost per SQL stays the one the
    # calibration measured on an empty input (the slice rows of full windows hardly vary
    # between rates, so a fit cannot tell them from a constant)
    fixed = profile.db_sql_fixed_s
    a = np.array([x["features"][1:] for x in rows])
    b = np.array([x["mig_s"] - fixed * x["features"][0] for x in rows])
    w = 1.0 / np.array([x["mig_s"] for x in rows])
    coef = nnls_fit(a * w[:, None], b * w)
    slice_, sel, join, agg, fold, keep = (float(c) for c in coef)
    fitted = _db_terms(profile, fixed, slice_, sel, join, agg, fold, keep)
    for x in rows:
        x["fit_s"] = float(np.dot(x["features"], [fixed, *coef]))
    return fitted, rows
