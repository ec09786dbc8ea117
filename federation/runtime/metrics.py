"""Prometheus metrics of a running query (`fedq run --metrics-port PORT`,
`RunOptions.metrics_port`): served at `http://127.0.0.1:PORT/metrics` from the moment the
run has its input until it ends (the `prometheus-client` package; a registry of the run's
own, so runs in one process do not mix).

Read at every scrape from the run's own records, so a value is never older than the last
micro-batch or landed file:

| metric | labels | what |
|---|---|---|
| `fedq_run_info` | query, placement, feed | 1 while the run runs |
| `fedq_stream_rows_in_total` | stream | input rows read (valid or not) |
| `fedq_stream_rows_accepted_total` | stream | rows that passed validation |
| `fedq_stream_dead_letters_total` | stream, reason | rows dead-lettered, by reason |
| `fedq_stream_quarantined_files_total` | stream | files that could not be read |
| `fedq_stream_clock_timestamp_seconds` | stream | the latest event time accepted |
| `fedq_stage_batches_total` | stage | micro-batches handled by this process |
| `fedq_stage_batch_duration_seconds` | stage | histogram of a micro-batch's wall time |
| `fedq_stage_backlog_seconds` | stage | event seconds landed and not yet processed |
| `fedq_stage_clock_timestamp_seconds` | stage | the stage's event-time clock |
| `fedq_stage_duckdb_seconds_total` | stage | wall time in DuckDB (the MIGs' work) |
| `fedq_query_result_rows_total` | query | result rows handed to the sinks |
| `fedq_query_instants_total` | query | instants with rows handed to the sinks |
| `fedq_run_rho` | | event seconds per wall second so far (>= 1 keeps up) |
| `fedq_state_bytes` | engine, kind | state held: `measured` (DuckDB's and Spark's own accounting, every 10th batch) and `predicted` (costmodel/memory.py) |
| `fedq_adaptive_migrations_total` | | migrations of an adaptive run so far |
| `fedq_adaptive_segment_info` | placement, strategy, since | 1: the placement an adaptive run runs now, how it took over (start, move, replay) and from which instant |

Counters count what this process did: a resumed run starts them at 0 (Prometheus' rate()
handles the reset).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from federation.runtime.result import BatchMetrics

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)


class RunMetrics:
    """A run's metrics (module doc): told every micro-batch (`batch`, which passes it on
    to `then`), reading the rest from the run's records at each scrape."""

    def __init__(self, info: Mapping[str, str], then=None) -> None:
        self.info, self.then = dict(info), then
        self.registry = CollectorRegistry()
        self.durations = Histogram("fedq_stage_batch_duration_seconds",
                                   "Wall time of a micro-batch", ["stage"], buckets=BUCKETS,
                                   registry=self.registry)
        self.last: dict[int, BatchMetrics] = {}
        self.batches: dict[int, int] = {}
        self.db_s: dict[int, float] = {}
        self.measured: dict[str, dict[int, int]] = {"duckdb": {}, "spark": {}}
        self.predicted: dict[str, int] = {}
        self.inputs: Callable[[], Mapping] = dict
        self.queries: Callable[[], Mapping] = dict
        self.plan, self.cost, self.state = None, None, "running"  # for the status page
        self.segments: list[Mapping[str, str]] = []  # an adaptive run's (start_metrics)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.server = None
        self.registry.register(_Live(self))

    def batch(self, m: BatchMetrics) -> None:
        with self._lock:
            self.last[m.stage] = m
            self.batches[m.stage] = self.batches.get(m.stage, 0) + 1
            self.db_s[m.stage] = self.db_s.get(m.stage, 0.0) + m.db_s
            if m.db_memory_bytes is not None:
                self.measured["duckdb"][m.stage] = m.db_memory_bytes
            if m.spark_state_bytes is not None:
                self.measured["spark"][m.stage] = m.spark_state_bytes
        self.durations.labels(str(m.stage)).observe(m.wall_s)
        if self.then is not None:
            self.then(m)

    def snapshot(self) -> tuple[dict, dict, dict, dict[str, int]]:
        """(last BatchMetrics, batches, DuckDB seconds) per stage and the measured state
        bytes per engine, copied under the lock (the collector's and the page's view)."""
        with self._lock:
            return (dict(self.last), dict(self.batches), dict(self.db_s),
                    {e: sum(v.values()) for e, v in self.measured.items() if v})

    # -- serving -------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve the metrics and the status page (statuspage.py) on `port` (0: a free
        one); the port."""
        from federation.runtime.statuspage import serve

        self.server = serve(self, make_wsgi_app(self.registry), port, addr)
        return self.server.server_port

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _Live:
    """A collector that reads the run's records at each scrape."""

    def __init__(self, m: RunMetrics) -> None:
        self.m = m

    def describe(self):
        return []

    def collect(self):
        m = self.m
        info = GaugeMetricFamily("fedq_run_info", "The running query", labels=list(m.info))
        info.add_metric(list(m.info.values()), 1.0)
        yield info
        yield from _streams(m.inputs())
        last, batches, db_s, measured = m.snapshot()
        for name, doc, values in (
                ("fedq_stage_batches", "Micro-batches handled by this process", batches),
                ("fedq_stage_duckdb_seconds", "Wall time in DuckDB", db_s)):
            c = CounterMetricFamily(name, doc, labels=["stage"])
            for stage, v in sorted(values.items()):
                c.add_metric([str(stage)], v)
            yield c
        backlog = GaugeMetricFamily("fedq_stage_backlog_seconds",
                                    "Event seconds landed and not yet processed", labels=["stage"])
        clock = GaugeMetricFamily("fedq_stage_clock_timestamp_seconds",
                                  "The stage's event-time clock (Unix time)", labels=["stage"])
        for stage, b in sorted(last.items()):
            if b.backlog_s is not None:
                backlog.add_metric([str(stage)], b.backlog_s)
            if b.clock is not None:
                clock.add_metric([str(stage)], _unix(b.clock))
        yield backlog
        yield clock
        rows = CounterMetricFamily("fedq_query_result_rows", "Result rows handed to the sinks",
                                   labels=["query"])
        instants = CounterMetricFamily("fedq_query_instants",
                                       "Instants with rows handed to the sinks", labels=["query"])
        for q, parts in m.queries().items():
            rows.add_metric([q], parts.rows)
            instants.add_metric([q], parts.instants)
        yield rows
        yield instants
        rho = [b.rho_so_far for b in last.values() if b.rho_so_far is not None]
        if rho:
            yield GaugeMetricFamily("fedq_run_rho", "Event seconds per wall second so far",
                                    value=min(rho))
        state = GaugeMetricFamily("fedq_state_bytes", "State held, measured and predicted",
                                  labels=["engine", "kind"])
        for engine, v in sorted(measured.items()):
            state.add_metric([engine, "measured"], v)
        for engine, v in sorted(m.predicted.items()):
            state.add_metric([engine, "predicted"], v)
        yield state
        if m.segments:
            yield CounterMetricFamily("fedq_adaptive_migrations",
                                      "Migrations of the adaptive run so far",
                                      value=len(m.segments) - 1)
            seg = GaugeMetricFamily("fedq_adaptive_segment_info",
                                    "The placement the adaptive run runs now",
                                    labels=["placement", "strategy", "since"])
            now = m.segments[-1]
            seg.add_metric([now["placement"], now["strategy"], now["since"]], 1.0)
            yield seg


def _streams(inputs: Mapping):
    rows_in = CounterMetricFamily("fedq_stream_rows_in", "Input rows read", labels=["stream"])
    ok = CounterMetricFamily("fedq_stream_rows_accepted", "Rows that passed validation",
                             labels=["stream"])
    dead = CounterMetricFamily("fedq_stream_dead_letters", "Rows dead-lettered, by reason",
                               labels=["stream", "reason"])
    quarantined = CounterMetricFamily("fedq_stream_quarantined_files",
                                      "Files that could not be read", labels=["stream"])
    clock = GaugeMetricFamily("fedq_stream_clock_timestamp_seconds",
                              "The latest event time accepted (Unix time)", labels=["stream"])
    for name, res in sorted(inputs.items()):
        rows_in.add_metric([name], res.rows_in)
        ok.add_metric([name], res.rows_ok)
        for reason, n in sorted(dict(res.dead).items()):
            dead.add_metric([name, reason], n)
        quarantined.add_metric([name], len(res.quarantined))
        if res.last_ts is not None:
            clock.add_metric([name], _unix(res.last_ts))
    yield from (rows_in, ok, dead, quarantined, clock)


def _unix(t) -> float:
    import datetime as dt

    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def start_metrics(opt, ex, plan, segments=()) -> RunMetrics | None:
    """The metrics of the run `ex` (microbatch.Execution) served on `opt.metrics_port`
    (None without one): told its micro-batches, reading each stream's ingest records and
    each query's results; `segments`: an adaptive
    run's so far, this one last (handoff.Handoff)."""
    import sys

    if opt.metrics_port is None:
        return None
    m = RunMetrics({"query": plan.logical.root.name, "placement": plan.placement_string,
                    "feed": opt.feed}, then=ex.progress)
    ex.progress = m.batch
    inputs = ex.ingest.inputs
    m.inputs = lambda: inputs
    m.queries = lambda: ex.collectors
    m.plan, m.segments = plan, list(segments)
    try:
        from costmodel.plan_cost import plan_cost
        from costmodel.profile import load_profile
        from federation.runtime.summary import predicted_memory

        profile = load_profile()
        mem = predicted_memory(plan, profile)
        m.predicted = {"duckdb": int(mem["db_bytes"]), "spark": int(mem["spark_bytes"])}
        v = plan_cost(plan, profile).vector
        m.cost = (v.C_b, v.C_u)
    except Exception as e:  # noqa: BLE001 - reporting: the metric is left out
        print(f"fedq: predicted state not in the metrics ({type(e).__name__}: {e})",
              file=sys.stderr)
    port = m.serve(opt.metrics_port)
    print(f"fedq: metrics on http://127.0.0.1:{port}/metrics, status page on "
          f"http://127.0.0.1:{port}/", file=sys.stderr)
    return m
