"""`python -m benchmarks.calibrate`: measure this machine's unit costs and write a cost profile.

SPE: pure-Spark runs of a windowed aggregation at several (rate, range, groups) give the
per-micro-batch fixed cost, the per-row cost, the per-window-copy cost of Spark's sliding
window expansion and the per-(group x open window) state cost, by a non-negative least
squares fit of the median steady batch time; a pure-Spark CQ4 gives the join's per-row cost.
DB: a Spark-select + DuckDB-aggregate plan at two rates gives the Arrow transfer cost per
row; DuckDB runs of the generated SQL at two window sizes give the fixed SQL cost and the
scan cost per row of each operator kind. Every figure used is written into the profile's
notes together with the fit, and predicted u is printed against measured batch time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.calibrate_fit import DB_TERMS, fit_dbop, fit_profile, refit_db, throughput_rows
from benchmarks.common import environment, say
from costmodel.fit import slope
from costmodel.plan_cost import plan_cost
from costmodel.profile import USER_PROFILE_PATH
from federation.expressions import max_
from federation.logical import NumberedPlan, window
from federation.physical import build_physical_plan
from federation.smartplug import PLUG_KEYS, smartplug_stream
from federation.smartplug.datagen import generate
from federation.smartplug.queries import cq4_plan

SPE_CONFIGS = [  # (rate tuples/s, window range s, plugs)
    (1000, 10, 50), (4000, 10, 50), (1000, 40, 50), (1000, 10, 400), (4000, 40, 400),
    (4000, 120, 1000),
]


def agg_query(rate: float, range_s: float, plugs: int):
    s = smartplug_stream(rate=rate, plugs=plugs)
    w = window(s, range=range_s, slide=1).filter("property = 1")
    return w.aggregate(by=PLUG_KEYS, m=max_("value")).rstream("calibration")


def u_total(pp, profile) -> float:
    """Predicted C_u of a physical plan."""
    return plan_cost(pp, profile).vector.C_u


def steady(metrics: list, skip: int, key: str = "wall_s") -> float:
    xs = [getattr(m, key) for m in metrics if m.stage == 0 and m.rows_in]
    xs = xs[skip:] or xs
    return statistics.median(xs)


def measure_spe(work: Path, quick: bool) -> tuple[list[dict], dict]:
    from federation.api import run

    rows = []
    configs = SPE_CONFIGS[:2] + SPE_CONFIGS[4:5] if quick else SPE_CONFIGS
    for i, (rate, rng, plugs) in enumerate(configs):
        say(f"[spe {i + 1}/{len(configs)}] aggregation, {rate}/s, range {rng} s, {plugs} plugs")
        data = work / f"spe{i}"
        generate(data, rate=rate, seconds=rng + 14, plugs=plugs, seed=5)
        r = run(agg_query(rate, rng, plugs), "spe", data, work_dir=work / f"spe{i}w")
        t = steady(r.metrics, rng + 2)
        rows.append({"rate": rate, "range_s": rng, "plugs": plugs, "batch_s": t})
        say(f"    median batch {t * 1000:.0f} ms")
    say("[spe] CQ4 (two aggregations, a join, a projection), 1000/s, 50 plugs")
    data = work / "cq4"
    generate(data, rate=1000, seconds=24, plugs=50, seed=5)
    r = run(cq4_plan(rate=1000, scale=1 / 30, plugs=50), "spe", data, work_dir=work / "cq4w")
    cq4 = {"rate": 1000, "plugs": 50, "ranges_s": [10, 2], "batch_s": steady(r.metrics, 12)}
    return rows, cq4


def measure_selection_tradeoff(work: Path, rates=(1000, 8000, 20000)) -> list[dict]:
    """Pure-DB against Spark-select -> DuckDB at several rates, alternating in one warm JVM:
    what a stateless Spark operator costs per batch against what it saves per row."""
    from federation.api import run

    out = []
    run(agg_query(1000, 10, 50), "db", _data(work, 1000), work_dir=work / "warmup")
    for rate in rates:
        data = _data(work, rate)
        for placement in ("db", "op2=db", "db", "op2=db"):
            say(f"[selection] {placement} at {rate}/s")
            r = run(agg_query(rate, 10, 50), placement, data,
                    work_dir=work / f"sel{placement}{rate}{len(out)}")
            ms = [m for m in r.metrics if m.stage == 0 and m.rows_in][5:]
            out.append({"rate": rate, "placement": placement,
                        "rows_to_db_per_batch": statistics.median(m.rows_in for m in ms),
                        "db_s": statistics.median(m.db_s for m in ms),
                        "batch_s": statistics.median(m.wall_s for m in ms)})
    return out


def _data(work: Path, rate: float) -> Path:
    data = work / f"hyb{rate}"
    if not data.exists():
        generate(data, rate=rate, seconds=20, plugs=50, seed=5)
    return data


def measure_hybrid(work: Path) -> list[dict]:
    from federation.api import run

    out = []
    for rate in (1000, 8000):
        say(f"[transfer] Spark select -> DuckDB aggregate at {rate}/s")
        r = run(agg_query(rate, 10, 50), "op2=db", _data(work, rate),
                work_dir=work / f"hyb{rate}w")
        ms = [m for m in r.metrics if m.stage == 0 and m.rows_in][5:]
        out.append({"rate": rate, "rows_per_batch": statistics.median(m.rows_in for m in ms),
                    "transfer_s": statistics.median(m.transfer_s for m in ms),
                    "db_s": statistics.median(m.db_s for m in ms),
                    "batch_s": statistics.median(m.wall_s for m in ms)})
    return out


def _rows(n: int, plugs: int, seconds: float, rng) -> pa.Table:
    t0 = dt.datetime(2013, 9, 1)
    us = np.sort(rng.integers(0, int(seconds * 1e6), n))
    ts = pa.array(us.astype("timedelta64[us]") + np.datetime64(t0, "us"), pa.timestamp("us"))
    return pa.table({
        "_ts": ts, "id": pa.array(np.arange(n), pa.int64()), "ts": ts,
        "value": pa.array(rng.random(n) * 100),
        "property": pa.array(rng.integers(0, 2, n), pa.int32()),
        "plug_id": pa.array(rng.integers(0, plugs, n), pa.int32()),
        "household_id": pa.array(np.zeros(n, np.int32)),
        "house_id": pa.array(np.zeros(n, np.int32)),
    })


def _time_sql(members, plan, rows: pa.Table, tau, repeat: int = 5) -> tuple[float, float, float]:
    """(query time per slide, insert s per row, expiry s per row) of the DB-op of `members`
    over `rows` (every input table gets them), as the MIG runs it."""
    from federation.runtime.mig import MigRuntime

    placement = {o: ("db" if o in members else "spe") for o in plan.r2r_ids}
    (op,) = build_physical_plan(plan, placement).db_ops
    db = MigRuntime(op, 1.0, plan_nodes=plan.nodes).db
    t0 = time.perf_counter()
    for ci in op.inputs:
        db.insert(ci.table, rows)
    ins = (time.perf_counter() - t0) / max(rows.num_rows * len(op.inputs), 1)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        db.run([tau])
        ts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    db.expire(tau + dt.timedelta(seconds=20_000))
    exp = (time.perf_counter() - t0) / max(rows.num_rows, 1)
    db.close()
    return statistics.median(ts), ins, exp


def measure_db() -> dict:
    say("[db] DuckDB: fixed SQL cost, scan cost per row by operator kind")
    rng = np.random.default_rng(3)
    plan = NumberedPlan.of(agg_query(1000, 10_000, 500))
    tau = dt.datetime(2013, 9, 1, 1)
    sizes = [50_000, 400_000]
    sel, agg, ins, exp = [], [], [], []
    for n in sizes:
        rows = _rows(n, 500, 3000, rng)
        t_sel, i1, e1 = _time_sql(["op1"], plan, rows, tau)
        t_all, _, _ = _time_sql(["op1", "op2"], plan, rows, tau)
        sel.append(t_sel)
        agg.append(t_all)
        ins.append(i1)
        exp.append(e1)
    empty = _time_sql(["op1", "op2"], plan, _rows(0, 1, 1, rng), tau)[0]
    _, c_sel = slope(sizes, sel)
    _, c_all = slope(sizes, agg)
    c_agg = max(c_all - c_sel, 0.0) * 2  # the aggregate reads the selected half
    # join: two per-plug aggregates joined, against the same without the join
    j_plan = NumberedPlan.of(cq4_plan(rate=1000, scale=50, plugs=20_000))
    j = []
    for n in sizes:
        rows = _rows(n, 20_000, 3000, rng)
        t_full = _time_sql(["op1", "op2", "op3", "op4", "op5"], j_plan, rows, tau)[0]
        t_aggs = (_time_sql(["op1", "op2"], j_plan, rows, tau)[0]
                  + _time_sql(["op3", "op4"], j_plan, rows, tau)[0])
        j.append(max(t_full - t_aggs + empty, 0.0))
    groups = [min(n / 2, 20_000) * 2 for n in sizes]
    _, c_join = slope(groups, j)
    return {"sql_fixed_s": empty, "scan_select_s_per_row": c_sel,
            "scan_aggregate_s_per_row": c_agg, "scan_join_s_per_row": c_join,
            "insert_s_per_row": statistics.median(ins),
            "expire_s_per_row": statistics.median(exp)}




def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=USER_PROFILE_PATH)
    ap.add_argument("--cores", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="fewer Spark runs")
    ap.add_argument("--reuse", action="store_true", help="refit the figures of a previous run")
    ap.add_argument("--figures", type=Path, default=Path("benchmarks/results/calibration.json"))
    ap.add_argument("--throughput", type=Path, action="append", default=[],
                    help="also fit the pure-SPE points of this throughput result (e.g. the "
                         "full run at the paper's window sizes); repeatable")
    ap.add_argument("--dbop", type=Path, default=None,
                    help="fit the DuckDB terms (fixed, slice combine, scans, fold, upkeep) on "
                         "this `python -m benchmarks.dbop` result instead of the throughput "
                         "points")
    a = ap.parse_args(argv)
    from costmodel.profile import load_profile

    base = load_profile()  # numbers the operators as the throughput runs did
    extra = [e for path in a.throughput for e in throughput_rows(path, base)]
    if extra:
        say(f"{len(extra)} pure-SPE throughput points join the fit")
    work = Path(tempfile.mkdtemp(prefix="fedq-calibrate-"))
    if a.reuse and a.figures.exists():  # refit earlier measurements
        old = json.loads(a.figures.read_text())
        spe_rows, cq4, hybrid, dbf = old["spe_runs"], old["cq4"], old["hybrid"], old["db"]
        tradeoff = old.get("selection_tradeoff") or measure_selection_tradeoff(work)
    else:
        spe_rows, cq4 = measure_spe(work, a.quick)
        hybrid = measure_hybrid(work)
        tradeoff = measure_selection_tradeoff(work)
        dbf = measure_db()
    profile, fit = fit_profile(spe_rows, cq4, hybrid, dbf, a.cores, tradeoff, extra)
    db_rows: list[dict] = []
    for path in a.throughput if a.dbop is None else []:
        profile, more = refit_db(profile, path, base)
        db_rows += more
    if a.dbop is not None:
        profile, dbop_rows = fit_dbop(profile, a.dbop)
        say(f"{len(dbop_rows)} DB-ops of {a.dbop} fit the DuckDB terms")
        fit["dbop"] = dbop_rows
        for x in dbop_rows:
            say(f"   {x['plan']:<24} MIG {x['mig_s'] * 1000:6.1f} ms per slide, model "
                f"{x['fit_s'] * 1000:6.1f}")
        profile = profile.model_copy(update={
            "name": "measured-2core-sliced",
            "notes": "Measured on this machine (2 cores, PySpark 4.3.0, DuckDB 2.0.1). Spark "
                     "terms: `python -m benchmarks.calibrate` runs and the pure-SPE points of "
                     "the full run (benchmarks/results/calibration.json). DuckDB terms "
                     "(fixed per slide, per slice row combined, scan per row and kind, fold "
                     "per row, upkeep per kept row): fit on `python -m benchmarks.dbop` "
                     "(sliced and raw-row DB-ops at full window size); Arrow transfer from "
                     "the selection trade-off runs. capacity_cores 1: Spark and DuckDB run "
                     "one after the other in each micro-batch. Command: python -m "
                     "benchmarks.calibrate --reuse --cores 1 --throughput "
                     "benchmarks/results/throughput_full.json --dbop "
                     "benchmarks/results/dbop.json --out costmodel/profiles/default.json"})
    if db_rows:
        say(f"{len(db_rows)} throughput points with DB-ops refit the DuckDB per-row terms")
        fit["db_refit"] = {"columns": list(DB_TERMS), "points": [r["plan"] for r in db_rows]}
    profile.save(a.out)
    say(f"wrote profile {a.out}")
    # predicted u against measured batch time (slide 1 s: seconds of work per batch)
    checks = []
    for r in spe_rows:
        q = NumberedPlan.of(agg_query(r["rate"], r["range_s"], r["plugs"]))
        pp = build_physical_plan(q, "spe")
        checks.append({"plan": f"agg spe {r['rate']}/s range {r['range_s']} plugs {r['plugs']}",
                       "predicted_C_u": u_total(pp, profile), "measured_batch_s":
                       r["batch_s"]})
    pp = build_physical_plan(NumberedPlan.of(cq4_plan(rate=1000, scale=1 / 30, plugs=50)),
                             "spe")
    checks.append({"plan": "CQ4 spe 1000/s", "predicted_C_u": u_total(pp, profile),
                   "measured_batch_s": cq4["batch_s"]})
    for h in hybrid:
        pp = build_physical_plan(NumberedPlan.of(agg_query(h["rate"], 10, 50)), "op2=db")
        checks.append({"plan": f"agg spe->db {h['rate']}/s", "predicted_C_u":
                       u_total(pp, profile), "measured_batch_s": h["batch_s"]})
    for t in tradeoff or []:
        pp = build_physical_plan(NumberedPlan.of(agg_query(t["rate"], 10, 50)),
                                 t["placement"])
        checks.append({"plan": f"agg {t['placement']} {t['rate']}/s", "predicted_C_u":
                       u_total(pp, profile), "measured_batch_s": t["batch_s"]})
    from federation.optimizer.phase_one import phase_one
    from federation.smartplug.queries import QUERIES

    for e in [*extra, *db_rows]:
        q = QUERIES[e["query"]](rate=e["rate"], scale=e["scale"], plugs=e["plugs"])
        pp = build_physical_plan(NumberedPlan.of(phase_one(q, base)), e["placement"])
        checks.append({"plan": e["plan"], "predicted_C_u": u_total(pp, profile),
                       "measured_batch_s": e["batch_s"]})
    print(f"{'reference plan':<40} {'predicted u (s/s)':>18} {'measured (s/batch)':>19}")
    for c in checks:
        print(f"{c['plan']:<40} {c['predicted_C_u']:>18.3f} {c['measured_batch_s']:>19.3f}")
    a.figures.parent.mkdir(parents=True, exist_ok=True)
    a.figures.write_text(json.dumps({**environment(), "spe_runs": spe_rows, "cq4": cq4,
                                     "hybrid": hybrid,
                                     "selection_tradeoff": tradeoff,
                                     "throughput_sources": [str(x) for x in a.throughput], "db": dbf, "fit": fit,
                                     "checks": checks, "profile": json.loads(profile.to_json())},
                                    indent=2, default=str))
    say(f"wrote figures {a.figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
