"""The DB side alone: one DB-op per query against a hand-written DuckDB query (issue 10).

Run: python -m benchmarks.dbop [--queries CQ1,...] [--rates 10000,40000] [--slides 20]

For each query and rate, the DB-op of the plan that keeps the selections in Spark and
everything else in DuckDB (the optimizer's plan at high rates) runs in its MIG, fed with
the load rows (property = 1, half the stream) of 2,125 plugs, full-size windows (1, 3,
5 minutes, slide 1 s). The windows are filled first (10 event seconds per batch), then
`--slides` slides are measured at one event second per batch: the MIG's insert, fold (into
slices), query and expiry per slide (medians, and means, which carry the DELETE pass every
5 slides and the CHECKPOINT every 20), against a straightforward hand-written DuckDB query
computing the same result over a table of the window's rows (the rows sorted by time, in
one table, in the same process, with the same threads). Every measured slide's results
are compared. Writes benchmarks/results/dbop.json and prints the table of the results
README. Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import time

import duckdb
import numpy as np
import pyarrow as pa

from benchmarks.common import say, write_result
from federation.logical import NumberedPlan
from federation.physical import build_physical_plan
from federation.results import diff_results
from federation.runtime.mig import MigRuntime, mig_resources
from federation.smartplug import DEFAULT_PLUGS, PLUG_KEYS
from federation.smartplug.plugs import _topology
from federation.smartplug.queries import QUERIES

T0 = dt.datetime(2013, 9, 1)
K = ", ".join(PLUG_KEYS)


def _bounds(tau: dt.datetime, minutes: int) -> str:
    lo = tau - dt.timedelta(minutes=minutes)
    return f"ts >= TIMESTAMP '{lo}' AND ts < TIMESTAMP '{tau}'"


def hand_written(query: str, tau: dt.datetime) -> str:
    """The same result as the query's DB-op, written by hand over the table `w` of load
    rows (one scan where the query allows it; a plug is in CQ3/CQ4/CQ6's result when each
    of its windows holds a row, as the join requires)."""
    b1, b3, b5 = (_bounds(tau, m) for m in (1, 3, 5))
    if query in ("CQ1", "CQ2"):
        agg, cond, name = (("max(value)", "value > 0.9 * a", "n_high") if query == "CQ1"
                           else ("sum(value) / count(value)", "value > a + 1e-9", "n_above"))
        return (f"WITH m AS (SELECT {K}, {agg} AS a FROM w WHERE {b5} GROUP BY ALL) "
                f"SELECT {K}, count(*) AS {name} FROM w JOIN m USING ({K}) "
                f"WHERE {b5} AND {cond} GROUP BY ALL")
    if query == "CQ3":
        return (f"SELECT {K}, max(value) FILTER ({b1}) - max(value) AS max_diff, "
                f"avg(value) FILTER ({b1}) - avg(value) AS avg_diff FROM w WHERE {b5} "
                f"GROUP BY ALL HAVING count(*) FILTER ({b1}) > 0")
    if query == "CQ4":
        return (f"SELECT {K}, avg(value) - avg(value) FILTER ({b1}) AS spread FROM w "
                f"WHERE {b5} GROUP BY ALL HAVING count(*) FILTER ({b1}) > 0")
    if query == "CQ5":
        return (f"SELECT house_id, household_id, max(total) AS max_total FROM "
                f"(SELECT {K}, sum(value) AS total FROM w WHERE {b5} GROUP BY ALL) "
                f"GROUP BY ALL")
    if query == "CQ6":
        return (f"SELECT {K}, avg(value) FILTER ({b1}) AS avg1, avg(value) FILTER ({b3}) "
                f"AS avg3, avg(value) AS avg5 FROM w WHERE {b5} GROUP BY ALL "
                f"HAVING count(*) FILTER ({b1}) > 0")
    raise ValueError(query)


class LoadRows:
    """Load rows (property = 1) of `plugs` plugs at `rate` stream tuples/s (half of them)."""

    def __init__(self, rate: float, plugs: int, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.per_s = int(rate) // 2
        self.house, self.household, self.plug = _topology(np.random.default_rng(seed), 40,
                                                          plugs)
        self.next_id = 0

    def second(self, sec: int) -> pa.Table:
        n = self.per_s
        us = np.sort(self.rng.integers(0, 1_000_000, n)) + sec * 1_000_000
        ts = np.datetime64(T0, "us") + us.astype("timedelta64[us]")
        p = self.rng.integers(0, len(self.plug), n)
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        t = pa.table({
            "id": ids, "ts": pa.array(ts, pa.timestamp("us")),
            "value": np.round(self.rng.random(n) * 3000, 3),
            "property": np.ones(n, dtype=np.int32),
            "plug_id": self.plug[p].astype(np.int32),
            "household_id": self.household[p].astype(np.int32),
            "house_id": self.house[p].astype(np.int32),
        })
        return t.append_column("_ts", t.column("ts"))


def measure(query: str, rate: float, slides: int, plugs: int, warm_batch: int,
            durable: bool = False) -> dict:
    q = QUERIES[query](rate=rate, plugs=plugs)
    plan = NumberedPlan.of(q)
    sel = {o: ("spe" if plan.nodes[o].kind == "select" and plan.nodes[o].child.kind == "window"
               else "db") for o in plan.r2r_ids}
    pp = build_physical_plan(plan, sel)
    (op,) = pp.db_ops
    threads, memory = mig_resources(pp)
    state_dir = tempfile.mkdtemp(prefix="fedq-dbop-") if durable else None
    mig = MigRuntime(op, 1.0, threads=threads[op.id], memory_limit=memory, plan_nodes=plan.nodes,
                     state_path=f"{state_dir}/db1.duckdb" if durable else None)
    batch_id = iter(range(10**9))

    def step(rows, clock):  # one micro-batch: one transaction (also in memory)
        b = next(batch_id)
        mig.begin(b)
        mig.add(table, rows)
        r = mig.advance(clock)
        mig.commit(b)
        return r
    (table,) = [ci.table for ci in op.inputs]
    hand = duckdb.connect(config={"threads": threads, "memory_limit": memory})
    src = LoadRows(rate, plugs)
    warm = 300
    say(f"{query} @ {rate:.0f}/s: filling the 5-minute windows ({warm} event s) ...")
    t0 = time.perf_counter()
    for s0 in range(0, warm, warm_batch):
        rows = pa.concat_tables([src.second(s) for s in range(s0, s0 + warm_batch)])
        step(rows, T0 + dt.timedelta(seconds=s0 + warm_batch - 1))
        hand.register("_b", rows.drop_columns(["_ts"]))
        if s0 == 0:
            hand.execute("CREATE TABLE w AS SELECT * FROM _b").fetchall()
        else:
            hand.execute("INSERT INTO w SELECT * FROM _b").fetchall()
        hand.unregister("_b")
    say(f"   filled in {time.perf_counter() - t0:.0f} s; measuring {slides} slides")
    per_slide = []
    for i in range(slides):
        sec = warm + i
        rows = src.second(sec)
        before = dict(mig.db.timings)
        w0 = time.perf_counter()
        taus, out, _ = step(rows, T0 + dt.timedelta(seconds=sec))
        mig_s = time.perf_counter() - w0
        d = {k: mig.db.timings[k] - before[k] for k in before}
        # the hand-written query over a table holding exactly the window's rows
        hand.register("_b", rows.drop_columns(["_ts"]))
        hand.execute("INSERT INTO w SELECT * FROM _b").fetchall()
        hand.unregister("_b")
        tau = taus[-1]
        hand.execute(f"DELETE FROM w WHERE ts < TIMESTAMP '{tau - dt.timedelta(minutes=5)}'"
                     ).fetchall()
        hand.execute("CHECKPOINT").fetchall()
        sql = hand_written(query, tau)
        h0 = time.perf_counter()
        want = hand.sql(sql).to_arrow_table()
        hand_s = time.perf_counter() - h0
        got = out.filter(pa.compute.equal(out.column("_tau"), pa.scalar(tau, pa.timestamp("us"))))
        got = got.drop_columns(["_tau"]).select(want.column_names)
        equal = diff_results(got, want) is None
        per_slide.append({"tau": tau.isoformat(), "mig_s": mig_s, **d, "hand_s": hand_s,
                          "equal": equal, "rows": want.num_rows})
    keys = ("mig_s", "insert_s", "fold_s", "sql_s", "expire_s", "hand_s")
    med = {k: statistics.median(p[k] for p in per_slide) for k in keys}
    # the mean carries the work done every few slides (DELETE passes, CHECKPOINT)
    mean = {k: statistics.fmean(p[k] for p in per_slide) for k in keys}
    counts = mig.db.row_counts()
    kind = "raw-row" if op.raw else "sliced"
    say(f"   {kind}: MIG {med['mig_s'] * 1000:.1f} ms per slide (query "
        f"{med['sql_s'] * 1000:.1f}), hand-written {med['hand_s'] * 1000:.1f} ms, "
        f"ratio {med['mig_s'] / med['hand_s']:.2f} (of means {mean['mig_s'] / mean['hand_s']:.2f}), "
        f"equal {all(p['equal'] for p in per_slide)}")
    mig.close()
    hand.close()
    if state_dir:
        shutil.rmtree(state_dir, ignore_errors=True)
    return {"query": query, "rate": rate, "durable": durable,
            "placement": pp.placement_string, "kind": kind,
            "slices": [s.name for s in op.slices], "raw_tables": sorted(op.raw),
            "rows_held": counts, "threads": threads, "median": med, "mean": mean,
            "ratio": med["mig_s"] / med["hand_s"], "ratio_mean": mean["mig_s"] / mean["hand_s"],
            "all_equal": all(p["equal"] for p in per_slide), "slides": per_slide}


def table(results: list[dict]) -> str:
    head = ("| query | rate | DB-op | MIG ms/slide | insert | fold | query | expire (mean) | "
            "hand-written ms | ratio | MIG mean ms | hand mean ms | ratio of means | equal |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = {k: v * 1000 for k, v in r["median"].items()}
        mn = {k: v * 1000 for k, v in r["mean"].items()}
        lines.append(f"| {r['query']} | {r['rate']:,.0f} | {r['kind']} | {m['mig_s']:.1f} | "
                     f"{m['insert_s']:.1f} | {m['fold_s']:.1f} | {m['sql_s']:.1f} | "
                     f"{mn['expire_s']:.1f} | {m['hand_s']:.1f} | {r['ratio']:.2f} | "
                     f"{mn['mig_s']:.1f} | {mn['hand_s']:.1f} | {r['ratio_mean']:.2f} | "
                     f"{'yes' if r['all_equal'] else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", default="CQ1,CQ2,CQ3,CQ4,CQ5,CQ6")
    ap.add_argument("--rates", default="10000,40000", help="stream tuples/s (default: %(default)s)")
    ap.add_argument("--slides", type=int, default=20, help="slides measured (default: %(default)s)")
    ap.add_argument("--plugs", type=int, default=DEFAULT_PLUGS)
    ap.add_argument("--warm-batch", type=int, default=10,
                    help="event seconds per batch while the windows fill (default: %(default)s)")
    ap.add_argument("--out", default="dbop.json")
    ap.add_argument("--durable", action="store_true",
                    help="MIG state in a DuckDB file, one commit per micro-batch (issue 11)")
    a = ap.parse_args(argv)
    results = []
    for rate in (float(x) for x in a.rates.split(",")):
        for query in a.queries.split(","):
            results.append(measure(query, rate, a.slides, a.plugs, a.warm_batch, a.durable))
    path = write_result(a.out, {"slides": a.slides, "plugs": a.plugs, "durable": a.durable,
                                "results": results})
    print(table(results))
    say(f"wrote {path}")
    return 0 if all(r["all_equal"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
