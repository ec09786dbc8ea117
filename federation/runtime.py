"""The executor: runs a physical plan across Spark Structured Streaming and DuckDB.

The plan is cut into stages: stage 0 reads the validated spool of the input stream; a DB-op
whose result feeds further SPE-ops writes it to a spool that the next stage's Spark query
reads as a streaming source (re-entry). Each stage is one Spark streaming query whose
`foreachBatch` receives, as one Arrow transfer, every output of the stage tagged by
`_out`: the inputs of each MIG of the stage, the query result if the stage produces it, and
the event-time clock (punctuation rows). MIGs run their SQL for every slide instant the
clock completes. Writes are idempotent by micro-batch id.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from costmodel.profile import CostProfile, load_profile
from db.store import naive_timestamps
from federation.errors import OutputError
from federation.ingest import IngestResult, prepare_input
from federation.instants import extent_of, first_instant, last_instant
from federation.logical import NumberedPlan, Rstream, Window
from federation.mig import MigRuntime, tau_to_wt, wt_to_tau
from federation.optimizer import optimize
from federation.phase_one import phase_one
from federation.physical import MigrationCandidate, PhysicalPlan, build_physical_plan

FAR_FUTURE_S = 10 * 365 * 86400


def output_path(output: Path) -> Path:
    """Where `output` is written: the file itself (.parquet) or results.parquet inside."""
    return output if output.suffix == ".parquet" else output / "results.parquet"


def check_output(output: Path | str | None, overwrite: bool = False) -> str | None:
    """Why the results cannot be written to `output`, or None; checked before any work."""
    if output is None:
        return None
    output = Path(output)
    path = output_path(output)
    if path.exists() and not overwrite:
        return f"{path} exists; pass --overwrite to replace it"
    parent = path.parent
    if output.suffix == ".parquet" and not parent.is_dir():
        return f"directory {parent} does not exist"
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        return f"cannot write to {parent} ({probe} is not a writable directory)"
    return None


def _check_arguments(**kw) -> None:
    """Refuse a bad argument of `run` before any work, naming it."""
    for name in ("seconds", "plugs", "seconds_per_batch"):
        v = kw[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: must be a whole number >= 1, got {v!r}")
    for name, lo in (("rate", 0.0), ("event_horizon_s", 0.0)):
        v = kw[name]
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= lo:
            raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
    v = kw["allowed_lateness_s"]
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"allowed_lateness_s: must be a finite number >= 0, got {v!r}")


@dataclass
class RunResult:
    """What a run returns: result rows (with `tau`), per-batch metrics and a summary."""

    rows: pa.Table
    metrics: list[dict]
    summary: dict
    plan: PhysicalPlan
    ingest: IngestResult

    def to_pandas(self):
        return self.rows.to_pandas()


class ResultCollector:
    """The in-memory sink: result parts keyed by (stage, batch id) so replays overwrite."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.parts: dict[tuple, pa.Table] = {}

    def put(self, key: tuple, t: pa.Table) -> None:
        self.parts[key] = t

    def table(self) -> pa.Table:
        parts = [self.parts[k] for k in sorted(self.parts)]
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return pa.table({"tau": pa.array([], pa.timestamp("us"))})
        t = pa.concat_tables([p.select(["_tau", *self.columns]) for p in parts],
                             promote_options="permissive")
        return t.rename_columns(["tau", *self.columns]).sort_by("tau")


def _stages(pp: PhysicalPlan) -> tuple[dict[str, int], dict[str, int]]:
    """Stage of every node (SPE side) and of every DB-op."""
    lg = pp.logical
    node_stage: dict[str, int] = {}
    cand_stage: dict[str, int] = {}
    for oid in lg.post_order():
        node = lg.nodes[oid]
        if isinstance(node, Window):
            node_stage[oid] = 0
            continue
        if oid == "root":
            continue
        cand = pp.candidate_of(oid)
        if cand is not None:
            if oid == cand.root:
                cand_stage[cand.id] = max(
                    (node_stage[o] for ci in cand.inputs for o in ci.op_ids), default=0)
                node_stage[oid] = cand_stage[cand.id] + 1  # its output re-enters Spark
            continue
        node_stage[oid] = max(node_stage[c] for c in lg.children[oid])
    return node_stage, cand_stage


class _Stage:
    """One Spark streaming query of the plan and what its foreachBatch feeds."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.outputs: list[tuple[str, object]] = []  # ("mig", (cand_id, table)) | ("result",)
        self.clock_sources: list[int] = []
        self.query = None
        self.clock: dict[int, dt.datetime] = {}
        self.done_batches: set[int] = set()
        self.data_batches = 0


def run(
    query: Rstream,
    placement: str | Mapping[str, str] = "auto",
    data: str | Path | None = None,
    *,
    rate: float = 2000.0,
    seconds: int = 60,
    plugs: int = 200,
    seed: int = 0,
    seconds_per_batch: int = 1,
    allowed_lateness_s: float = 0.0,
    profile: CostProfile | None = None,
    output: str | Path | None = None,
    work_dir: str | Path | None = None,
    realtime: bool = False,
    max_files: int | None = None,
    spark=None,
    progress: Callable[[dict], None] | None = None,
    domains: Mapping[str, set] | None = None,
    feasibility_check: bool = True,
    budget_s: float | None = None,
    warmup_batch_s: int | None = None,
    drain: bool = True,
    event_horizon_s: float = 3600.0,
    overwrite: bool = False,
) -> RunResult:
    """Run `query` under a placement ("auto", "spe", "db" or explicit) over a data directory
    of event-second Parquet files (generated when `data` is None).

    `warmup_batch_s` fast-forwards the warm-up: the first (largest window range) event
    seconds go in micro-batches of that many seconds, the rest one `seconds_per_batch` each.
    Results are the same; only the wall time until the windows are full shrinks.
    `drain=False` (throughput measurement only) skips the end of input: the windows that
    would close after the last event second are not computed, so the result is incomplete.
    """
    from spe.pipeline import (
        instants_relation,
        reentry_source,
        select_columns,
        spool_source,
        start_query,
        tag_outputs,
    )
    from spe.session import get_spark
    from spe.translate import TS, WT, SpeStream, SpeTranslator

    _check_arguments(rate=rate, seconds=seconds, plugs=plugs,
                     seconds_per_batch=seconds_per_batch, allowed_lateness_s=allowed_lateness_s,
                     event_horizon_s=event_horizon_s)
    why = check_output(output, overwrite)
    if why:
        raise OutputError(f"output: {why}")
    profile = profile or load_profile()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fedq-run-"))
    work.mkdir(parents=True, exist_ok=True)
    stream = next(n for n in query.walk() if isinstance(n, Window)).stream
    if data is None:
        from federation.smartplug.datagen import generate

        data = work / "data"
        generate(data, rate=rate, seconds=seconds, plugs=plugs, seed=seed)
    if domains is None:
        domains = {c: set(v) for c, v in stream.domains.items()}
    windows = [n for n in query.walk() if isinstance(n, Window)]
    slide_s = windows[0].slide_s  # one slide per query (checked where the query is built)
    max_range = max((w.range_s or 0.0) for w in windows)
    extent_s = extent_of(windows)
    if warmup_batch_s is not None and seconds_per_batch != 1:
        raise ValueError("warmup_batch_s needs seconds_per_batch=1, "
                         f"got seconds_per_batch={seconds_per_batch}")
    ff_s = math.ceil(max_range) if warmup_batch_s else 0
    ingest = prepare_input(data, work / "input", stream, allowed_lateness_s=allowed_lateness_s,
                           flush_after_s=max_range + 10 * slide_s if drain else None,
                           max_files=max_files,
                           domains=domains, fast_forward_s=ff_s,
                           fast_forward_batch=warmup_batch_s or 1, tick_s=slide_s,
                           horizon_s=event_horizon_s)
    life = None if ingest.first_ts is None else (
        first_instant(ingest.first_ts, slide_s),
        last_instant(ingest.last_ts, extent_s, slide_s))
    ff_batches = ingest.warmup_files
    ff_seconds = min(ff_s, ingest.files)

    def event_seconds_done(batches: int) -> int:
        if batches <= ff_batches:
            return min(ff_seconds, batches * (warmup_batch_s or 1))
        return min(ff_seconds + (batches - ff_batches) * seconds_per_batch, ingest.files)

    # -- the plan ------------------------------------------------------------------------
    if isinstance(placement, str) and placement == "auto":
        pp = optimize(query, profile=profile, feasibility_check=feasibility_check).plan
    else:
        logical = NumberedPlan.of(phase_one(query, profile))
        pp = build_physical_plan(logical, placement, profile)
    lg = pp.logical
    node_stage, cand_stage = _stages(pp)
    root_child = lg.children["root"][0]
    root_cand = pp.candidate_of(root_child)
    result_cols = list(lg.nodes[root_child].schema)
    collector = ResultCollector(result_cols)
    n_stages = 1 + max([*node_stage.values(), *cand_stage.values()], default=0)
    if root_cand is None:
        n_stages = max(n_stages, node_stage[root_child] + 1)
    stages = [_Stage(i) for i in range(n_stages)]
    migs: dict[str, MigRuntime] = {
        c.id: MigRuntime(c, slide_s, allowed_lateness_s, plan_nodes=lg.nodes, life=life)
        for c in pp.candidates
    }
    reentry: dict[str, Path] = {}
    for c in pp.candidates:
        if c is not root_cand:
            reentry[c.id] = work / "reentry" / c.id
            shutil.rmtree(reentry[c.id], ignore_errors=True)
            reentry[c.id].mkdir(parents=True)
    out_dir = Path(output) if output else None
    if out_dir is not None and out_dir.suffix != ".parquet":
        out_dir.mkdir(parents=True, exist_ok=True)

    spark = spark or get_spark()
    chk_root = work / "checkpoints"
    shutil.rmtree(chk_root, ignore_errors=True)
    metrics: list[dict] = []
    lock = threading.Lock()
    delay_ms = round(allowed_lateness_s * 1000)

    # -- build each stage's DataFrames ---------------------------------------------------
    # (the closures below read this iteration's `built` and `sources`, and are only called
    # within it: B023 does not apply)
    for st in stages:
        built: dict[str, SpeStream] = {}
        sources: list = []  # clock DataFrames
        base = None
        ticks = None

        def base_rows():
            nonlocal base, ticks
            if base is None:
                base, clock, ticks = spool_source(spark, stream.columns, stream.ts_column,
                                                  str(ingest.spool_dir), seconds_per_batch,
                                                  delay_ms)
                sources.append(clock)  # noqa: B023
            return base

        def instants():
            base_rows()
            return instants_relation(ticks, extent_s, slide_s)  # noqa: B023

        translator = SpeTranslator(instants)

        def reentry_stream(cand: MigrationCandidate) -> SpeStream:
            rows, clock = reentry_source(spark, dict(lg.nodes[cand.root].schema),
                                         str(reentry[cand.id]))
            sources.append(clock)  # noqa: B023
            return rows

        def build(oid: str) -> SpeStream:
            if oid in built:  # noqa: B023
                return built[oid]  # noqa: B023
            node = lg.nodes[oid]
            cand = pp.candidate_of(oid)
            if isinstance(node, Window):
                s = SpeStream(base_rows(), True, node)
            elif cand is not None:
                s = reentry_stream(cand)
            else:
                s = translator.visit(node, [build(c) for c in lg.children[oid]])  # noqa: B023
            built[oid] = s  # noqa: B023
            return s

        outs = []
        for c in pp.candidates:
            if cand_stage[c.id] != st.index:
                continue
            for ci in c.inputs:
                s = build(ci.op_ids[0])
                tag = TS if s.row_level else WT
                cols = [tag, *ci.node.schema]
                outs.append((("mig", (c.id, ci.table)), select_columns(s.df, cols)))
        if root_cand is None and node_stage[root_child] == st.index:
            s = translator.as_relation(build(root_child))
            outs.append((("result", None), select_columns(s.df, [WT, *result_cols])))
        if not outs:
            continue
        st.outputs = [what for what, _ in outs]
        st.clock_sources = list(range(len(sources)))
        union = tag_outputs([df for _, df in outs], sources)
        st.df = union

    t_start = time.perf_counter()
    last_end = {st.index: t_start for st in stages}

    def route(cand: MigrationCandidate, key: tuple, taus, out: pa.Table | None, wm) -> None:
        if cand is root_cand:
            if out is not None:
                collector.put(key, out)
            return
        cols = list(lg.nodes[cand.root].schema)
        parts = []
        if out is not None and out.num_rows:
            t = pa.table({WT: tau_to_wt(out), **{c: out.column(c) for c in cols},
                          "_punct": pa.array([False] * out.num_rows)})
            parts.append(t)
        # punctuation: everything up to `wm` is complete
        # non-null neutral values: Spark adds isnotnull(keys) below the watermark of joins
        punct = {WT: pa.array([wm], pa.timestamp("us")),
                 **{c: _neutral(lg.nodes[cand.root].schema[c]) for c in cols},
                 "_punct": pa.array([True])}
        parts.append(pa.table(punct))
        table = pa.concat_tables(parts, promote_options="permissive")
        path = reentry[cand.id] / f"part-{key[0]}-{key[1]:08d}.parquet"
        tmp = path.with_name("." + path.name)
        pq.write_table(table, tmp)
        tmp.rename(path)

    def make_handler(st: _Stage):
        def handle(batch_df, batch_id: int) -> None:
            with lock:
                if batch_id in st.done_batches:  # idempotent by micro-batch id
                    return
                t0 = time.perf_counter()
                tbl = batch_df.toArrow()
                t1 = time.perf_counter()
                outcol = tbl.column("_out")
                prev_clock = dict(st.clock)
                rows_in = 0
                for j in st.clock_sources:
                    c = tbl.filter(pc.equal(outcol, -1 - j)).column("_clock")
                    if len(c):
                        v = naive_timestamps(pa.table({"c": c})).column("c")
                        hi = pc.max(v).as_py()
                        st.clock[j] = max(hi, st.clock.get(j, hi))
                result_rows = 0
                for k, what in enumerate(st.outputs):
                    sub = tbl.filter(pc.equal(outcol, k)).column(f"_p{k}")
                    if len(sub) == 0:
                        continue
                    part = pa.Table.from_struct_array(sub.combine_chunks())
                    rows_in += part.num_rows
                    if what[0] == "mig":
                        cid, table = what[1]
                        migs[cid].add(table, part)
                    else:
                        part = wt_to_tau(part)
                        result_rows += part.num_rows
                        collector.put((st.index, batch_id), part)
                db_s = 0.0
                slides = 0
                for cid, s in cand_stage.items():
                    if s != st.index:
                        continue
                    mig = migs[cid]
                    src = prev_clock if mig.rel_inputs else st.clock
                    wm = _watermark(src, st.clock_sources, allowed_lateness_s
                                    if st.index == 0 else 0.0)
                    taus, out, took = mig.advance(wm)
                    db_s += took
                    slides = max(slides, len(taus))
                    if taus or (mig.cand is not root_cand and wm is not None):
                        done = mig.next_tau - mig.slide if mig.next_tau else wm
                        route(mig.cand, (st.index, batch_id), taus, out, done)
                    if out is not None:
                        result_rows += out.num_rows if mig.cand is root_cand else 0
                st.done_batches.add(batch_id)
                end = time.perf_counter()
                clock = _watermark(st.clock, st.clock_sources, 0.0)
                m = {
                    "stage": st.index, "batch": batch_id, "rows_in": rows_in,
                    "result_rows": result_rows, "transfer_s": t1 - t0, "db_s": db_s,
                    "handler_s": end - t0, "wall_s": end - last_end[st.index],
                    "slides": slides, "t": end - t_start,
                    "watermark": str(clock), "clock": clock,
                }
                # a data batch consumed input: it produced rows or moved the clock (a pure
                # Spark plan emits nothing until its first windows close)
                m["data"] = bool(rows_in) or st.clock != prev_clock
                if st.index == 0:
                    st.data_batches += 1 if m["data"] else 0
                    done_s = event_seconds_done(st.data_batches)
                    m["event_seconds_done"] = done_s
                    m["backlog_s"] = ingest.files - done_s
                    m["rho_so_far"] = done_s / max(end - t_start, 1e-9)
                last_end[st.index] = end
                metrics.append(m)
                if progress:
                    progress(m)
        return handle

    for st in stages:
        if not st.outputs:
            continue
        st.query = start_query(st.df, make_handler(st), str(chk_root / f"stage{st.index}"),
                               f"fedq_{lg.root.name}_s{st.index}_{id(st)}",
                               seconds_per_batch if realtime else None)
    truncated = threading.Event()

    if budget_s is not None:
        def stop_all() -> None:
            truncated.set()
            for st in stages:
                if st.query is not None:
                    try:
                        st.query.stop()
                    except Exception as e:  # noqa: BLE001 - stopping is best effort
                        print(f"fedq: stopping stage {st.index}: {e}", file=sys.stderr)

        timer = threading.Timer(budget_s, stop_all)
        timer.daemon = True
        timer.start()
    try:
        for st in stages:
            if st.query is None or truncated.is_set():
                continue
            try:
                st.query.processAllAvailable()
            except Exception:
                if truncated.is_set():
                    break
                raise
            if truncated.is_set():
                break
            exc = st.query.exception()
            if exc is not None:
                raise RuntimeError(f"stage {st.index} failed: {exc}")
            if not drain:
                continue
            # end of input: the MIGs of this stage finish every remaining slide
            with lock:
                for cid, s in cand_stage.items():
                    if s != st.index:
                        continue
                    mig = migs[cid]
                    far = dt.datetime(2100, 1, 1)
                    taus, out, _ = mig.advance(far)
                    route(mig.cand, (st.index, 10**8), taus, out, far)
    finally:
        if budget_s is not None:
            timer.cancel()
        for st in stages:
            if st.query is not None:
                st.query.stop()
    wall = time.perf_counter() - t_start
    rows = collector.table()
    event_seconds = ingest.files
    data_batches = [m for m in metrics if m["stage"] == 0 and m["data"]]
    # per-batch wall time of the regular batches (after a fast-forwarded warm-up, if any)
    regular = data_batches[ff_batches:]
    steady = [m["wall_s"] for m in regular[3:]] or [m["wall_s"] for m in regular]
    per_batch = statistics.median(steady) if steady else float("nan")
    secs_per_batch = seconds_per_batch
    if not steady and data_batches:  # stopped within a fast-forwarded warm-up
        steady = [m["wall_s"] for m in data_batches[1:]] or [data_batches[0]["wall_s"]]
        per_batch = statistics.median(steady)
        secs_per_batch = warmup_batch_s or 1
    # after the windows are full (DESIGN 8): event seconds from then on over the wall time
    # until every stage has drained them
    # until every stage has processed the last event second; the end-of-input flush (the
    # windows that close after the data end, all at once) is not steady-state work
    warm = ff_batches if ff_batches else round(max_range / seconds_per_batch)
    last = ingest.last_ts
    end = next((i for i, m in enumerate(data_batches)
                if last is not None and m["clock"] is not None and m["clock"] >= last),
               len(data_batches) - 1)
    t_end = data_batches[end]["t"] if data_batches else wall
    for st in stages[1:]:  # re-entry stages: their clock lags the DB-op by a slide
        near = [m["t"] for m in metrics if m["stage"] == st.index and m["clock"] is not None
                and last is not None and m["clock"] >= last - dt.timedelta(seconds=2 * slide_s)]
        t_end = max(t_end, near[0] if near else wall)
    if end > warm and not truncated.is_set():
        t_warm = data_batches[warm]["t"]
        rho_full = (end - warm) * seconds_per_batch / max(t_end - t_warm, 1e-9)
    else:
        rho_full = float("nan")
    summary = {
        "query": lg.root.name,
        "placement": pp.placement_string,
        "db_ops": [c.id + ":" + "+".join(c.members) for c in pp.candidates],
        "stages": n_stages,
        "result_rows": rows.num_rows,
        "event_seconds": event_seconds,
        "input_rows": ingest.rows_in,
        "wall_s": wall,
        "rho": event_seconds / wall if wall else float("nan"),
        "rho_steady": secs_per_batch / per_batch
        if per_batch and not math.isnan(per_batch) else float("nan"),
        "rho_windows_full": rho_full,
        "warmup_batches": warm,
        "warmup_batch_s": warmup_batch_s,
        "drained": drain,
        "achieved_rate_tps": ingest.rows_ok / wall if wall else float("nan"),
        "truncated": truncated.is_set(),
        "data_batches": len(data_batches),
        "dead_lettered": ingest.rows_dead,
        "dead_by_reason": dict(ingest.dead),
        "files_quarantined": ingest.quarantined,
        "deadletter_dir": str(ingest.deadletter_dir),
        "predicted": {"C_b": pp.cost.bottleneck_cost, "C_u": pp.cost.utilization_cost,
                      "feasible": pp.cost.is_feasible},
        "db_memory_bytes": {cid: m.memory_bytes() for cid, m in migs.items()},
    }
    for m in migs.values():
        m.close()
    (work / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    if out_dir is not None:
        path = output_path(out_dir)
        pq.write_table(rows, path)
        summary["output"] = str(path)
        (work / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return RunResult(rows, metrics, summary, pp, ingest)


_ARROW_NEUTRAL = {"BIGINT": (pa.int64(), -1), "INT": (pa.int32(), -1), "DOUBLE": (pa.float64(), 0.0),
                  "VARCHAR": (pa.string(), ""), "BOOLEAN": (pa.bool_(), False),
                  "TIMESTAMP": (pa.timestamp("us"), dt.datetime(1970, 1, 1))}


def _neutral(typ: str) -> pa.Array:
    t, v = _ARROW_NEUTRAL[typ]
    return pa.array([v], t)


def _watermark(clock: dict[int, dt.datetime], sources: list[int], lateness_s: float):
    if not sources or any(j not in clock for j in sources):
        return None
    return min(clock[j] for j in sources) - dt.timedelta(seconds=lateness_s)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use fedq run")
