"""`fedq run`: the command that starts the engines.

Calibration measures the machine with the benchmarks: `python -m benchmarks.calibrate`."""

from __future__ import annotations

import argparse
import shutil
import sys
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path

from federation.cli.args import (
    Help,
    add_engine_arguments,
    add_mqtt_security_arguments,
    add_query_arguments,
    count,
    data_dirs,
    non_negative,
    positive,
    query_source,
)
from federation.cli.report import print_adaptive, print_summary
from federation.errors import OptionError
from federation.runtime.connectors import parse_source
from federation.runtime.options import is_topic, work_directory

#: the flag of each option an OptionError names (its `option`, as the Python API spells it)
FLAGS = {"seconds_per_batch": "--seconds-per-batch", "allowed_lateness_s": "--allowed-lateness",
         "event_horizon_s": "--event-horizon", "rate": "--rate", "seconds": "--seconds",
         "plugs": "--plugs", "data": "--data", "output": "--output", "every_s": "--decide-every",
         "margin": "--margin", "min_interval_s": "--min-interval", "strategy": "--strategy",
         "placement": "--placement", "adaptive": "--adaptive", "decide": "--adaptive",
         "options": "fedq run", "follow": "--follow", "until": "--until",
         "idle_timeout_s": "--idle-timeout", "output_table": "--output-table", "source": "--source",
         "metrics_port": "--metrics-port"}


def _fail(option: str, message: str) -> int:
    print(f"fedq run: {option}: {message}", file=sys.stderr)
    return 2


def _tidy(work: Path) -> None:
    """After a run in a temporary work directory: remove the spool, Spark's checkpoints and
    the DuckDB state (they only serve a resume, and a temporary directory is never resumed);
    keep the dead letters and the summary when there are dead letters, else remove it all."""
    dead = work / "input" / "deadletter"
    if any(p.is_file() for p in dead.rglob("*")):
        for sub in work.iterdir():
            if sub.name == "input":
                for p in sub.iterdir():
                    if p.name != "deadletter":
                        shutil.rmtree(p) if p.is_dir() else p.unlink()
            elif sub.name != "summary.json":
                shutil.rmtree(sub) if sub.is_dir() else sub.unlink()
        for d in list(dead.iterdir()):
            if d.is_dir() and not any(d.rglob("*")):
                d.rmdir()
    else:
        shutil.rmtree(work, ignore_errors=True)


def _options(a: argparse.Namespace, work_dir: Path):
    """The run options of the command line, checked (OptionError names a bad one)."""
    from federation.runtime import RunOptions

    return RunOptions.of(seconds_per_batch=a.seconds_per_batch, output=a.output,
                         overwrite=a.overwrite, allowed_lateness_s=a.allowed_lateness,
                         event_horizon_s=a.event_horizon, work_dir=work_dir, fresh=a.fresh,
                         realtime=a.realtime, follow=a.follow, source=a.source, until=a.until,
                         idle_timeout_s=a.idle_timeout, max_batch_rows=a.max_batch_rows,
                         output_table=a.output_table, console=a.console,
                         state_store=a.state_store, feed=a.feed, mqtt_ca=a.mqtt_ca,
                         mqtt_cert=a.mqtt_cert, mqtt_key=a.mqtt_key,
                         mqtt_password_file=a.mqtt_password_file, metrics_port=a.metrics_port)


def _run_adaptive(a: argparse.Namespace, q, data: Path | None, profile, work_dir: Path):
    """`fedq run --adaptive`: run, watch, decide and migrate while running; then the
    segments, their decisions and the migrations' gaps."""
    from federation.adaptive import decide_and_run
    from federation.cli.progress import ConsoleProgress

    if data is None:
        raise OptionError("adaptive", "needs --data (the rates are measured from the data)")
    opt = _options(a, work_dir)
    with ConsoleProgress() if not a.quiet else nullcontext(None) as progress, \
            _halt_on_signal(a) as halt:
        r = decide_and_run(q, data, opt, decide={  # its rows in the output as computed
            "every_s": a.decide_every, "margin": a.margin,
            "min_interval_s": a.min_interval, "start_placement": a.placement},
            profile=profile, strategy=a.strategy, progress=progress, halt=halt)
    path = r.output
    print_adaptive(r)
    if path:
        print(f"results written to {path}")
    return 0


def _data_and_query(a: argparse.Namespace):
    """The data directory (checked), the query at the data's rate and plugs, and the
    generation options when there is no data."""
    from federation.runtime import GenerateOptions

    if a.source is not None and a.data is not None:
        raise OptionError("source", "reads a broker's topic: give --source or --data, not both")
    a.data = data_dirs(a.data) if a.source is None else a.source
    make = query_source(a)
    specs = {} if a.data is None else {n: parse_source(v) for n, v in (
        a.data.items() if isinstance(a.data, dict) else [(None, a.data)])}
    a.follow = a.follow or any(s.live for s in specs.values())  # a live source never ends
    if a.until is not None and not a.follow:
        raise OptionError("until", "needs --follow or a live source (a directory read once "
                                   "ends at its last file)")
    if a.follow and not specs:
        raise OptionError("follow", "needs --data (the landing directory to follow) or --source")
    for name, spec in specs.items():
        where = f"{name}={spec.path}" if name else str(spec.path)
        if spec.path is not None and not spec.path.is_dir():
            raise OptionError("data", f"{where} is not a directory")
        if spec.kind == "dir" and not a.follow and not any(spec.path.glob("part-*.parquet")):
            raise OptionError("data", f"{where} holds no part-*.parquet files")
    if isinstance(a.data, dict):  # a source per stream
        gen = GenerateOptions.of(rate=a.rate or 2000.0, seconds=a.seconds, plugs=a.plugs or 200)
        return a.data, make(rate=gen.rate, scale=a.scale, plugs=gen.plugs), gen
    plugs, rate = a.plugs, a.rate
    spec = specs.get(None)
    if spec is not None and spec.kind == "datagen":  # the generator's rate and plugs
        from federation.runtime.connectors.datagen import rate_and_plugs

        given_rate, given_plugs = rate_and_plugs(spec)
        plugs, rate = plugs or given_plugs, rate or given_rate
    elif spec is not None and spec.path is not None:
        from federation.smartplug.datagen import read_manifest

        try:
            man = read_manifest(spec.path)
            plugs, rate = plugs or man.plugs, rate or man.rate
        except (FileNotFoundError, OSError, ValueError):
            pass
    gen = GenerateOptions.of(rate=rate or 2000.0, seconds=a.seconds, plugs=plugs or 200)
    return a.data, make(rate=gen.rate, scale=a.scale, plugs=gen.plugs), gen


def _output(text: str) -> Path | str:
    """--output: a path, or a broker's topic (a URL stays a string)."""
    return text if is_topic(text) else Path(text)


def cmd_run(a: argparse.Namespace) -> int:
    from federation.errors import FedqError, RunFailed
    from federation.runtime.live import RunHalted

    own_work = a.work_dir is None  # a temporary work directory, tidied after the run
    work_dir = None
    try:
        data, q, gen = _data_and_query(a)
        _options(a, a.work_dir)  # every option checked before any work
        if a.placement.strip().lower() != "auto":  # a malformed placement fails before any work
            _check_placement(q, a)
        from costmodel.profile import load_profile

        work_dir = work_directory(a.work_dir, "fedq-adaptive-" if a.adaptive else "fedq-run-")
        if a.adaptive:
            return _run_adaptive(a, q, data, load_profile(a.profile), work_dir)
        r = _run(a, q, data, gen, work_dir, load_profile(a.profile))
    except OptionError as e:
        return _fail(FLAGS.get(e.option, f"--{e.option.replace('_', '-')}"), e.message)
    except RunHalted as e:
        print(f"fedq run: {e}", file=sys.stderr)
        return 0
    except RunFailed as e:  # a full disk, a failing sink: resumable (runtime/failure.py)
        print(f"fedq run: {e.at + ': ' if e.at else ''}{e.cause}; nothing after the last "
              "committed micro-batch is kept" + (
                  "; a run with --work-dir DIR resumes after such a failure" if own_work else
                  f": once that is mended, the same command resumes from {e.work}"),
              file=sys.stderr)
        return 1
    except FedqError as e:
        print(f"fedq run: {e}", file=sys.stderr)
        return 2
    finally:
        if own_work and work_dir is not None:
            _tidy(work_dir)
    print_summary(r, a.json, a.console)
    return 0


def _check_placement(q, a: argparse.Namespace) -> None:
    from costmodel.profile import load_profile
    from federation.errors import FedqError
    from federation.logical import NumberedPlan
    from federation.optimizer.phase_one import phase_one
    from federation.physical import build_physical_plan

    try:
        build_physical_plan(NumberedPlan.of(phase_one(q, load_profile(a.profile))), a.placement)
    except FedqError as e:
        raise OptionError("placement", str(e)) from None


@contextmanager
def _halt_on_signal(a: argparse.Namespace):
    """A following run's halt: SIGINT or SIGTERM stops it after the micro-batch in
    progress (the handlers are kept when Spark starts: spe/session.get_spark)."""
    import signal
    import threading

    halt, saved = threading.Event(), {}

    def on_signal(signum, frame) -> None:
        print(f"\nfedq run: {signal.Signals(signum).name}: stopping after the micro-batch in "
              "progress " + ("(the same command resumes)" if a.work_dir else
                             "(its temporary work directory is removed: a run with "
                             "--work-dir DIR resumes)"), file=sys.stderr)
        halt.set()

    try:
        if a.follow:
            for sig in (signal.SIGINT, signal.SIGTERM):
                saved[sig] = signal.signal(sig, on_signal)
        yield halt
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _run(a: argparse.Namespace, q, data, gen, work_dir: Path, profile):
    import warnings

    from federation.api import run
    from federation.cli.progress import ConsoleProgress
    from federation.runtime.progress import RunProgress
    from federation.runtime.summary import ReportingWarning

    with ConsoleProgress() if not a.quiet else nullcontext(RunProgress()) as progress:
        spark = None
        if a.master:
            from spe.session import SparkSettings, get_spark

            progress.phase(f"connecting to Spark at {a.master}")
            spark = get_spark(SparkSettings(master=a.master))
        with _halt_on_signal(a) as halt, warnings.catch_warnings():
            warnings.simplefilter("ignore", ReportingWarning)  # printed with the summary
            return run(q, a.placement, data, _options(a, work_dir), generate=gen,
                       profile=profile, spark=spark, progress=progress, halt=halt,
                       memory_check=not a.no_memory_check)


def add_parsers(sub) -> None:

    r = sub.add_parser(
        "run", help="run a query across Spark and DuckDB",
        description="Plan a query (auto) or take a placement, then run it over a data "
                    "directory with Spark Structured Streaming and DuckDB; prints progress, "
                    "a summary and where the results and dead letters are.",
        epilog="examples:\n  fedq run CQ3 --data data/ --output out/cq3.parquet\n"
               "  fedq run --sql benchmarks/queries_sql/cq1.sql --data data/ --placement db\n"
               "  fedq run CQ1 --data data/ --work-dir run1/   # same command again: resumes\n"
               "  fedq run --sql benchmarks/queries_sql/nexmark/q8.sql --console "
               "--data 'person=datagen:nexmark?rate=1000' "
               "--data 'auction=datagen:nexmark?rate=1000'   # live, two streams",
        formatter_class=Help)
    add_query_arguments(r)
    r.add_argument("--placement", default="auto",
                   help="auto | spe | db | op1=db,op3=spe,... (ids from fedq explain)")
    r.add_argument("--data", action="append", default=None, metavar="[NAME=]SOURCE",
                   help="a directory of part-*.parquet (generated when left out), follow:DIR, "
                        "mqtt[s]://HOST:PORT/TOPIC or datagen:smartplug|nexmark?rate=N; a "
                        "query over several streams gives each its own: --data NAME=SOURCE")
    r.add_argument("--rate", type=positive, default=None, help="tuples/s (default: the data's manifest, else 2000)")
    r.add_argument("--seconds", type=count, default=60, help="event seconds to generate")
    r.add_argument("--plugs", type=count, default=None, help="plugs (default: the data's manifest, else 200)")
    r.add_argument("--scale", type=positive, default=1.0, help="window range scale")
    r.add_argument("--seconds-per-batch", type=count, default=1,
                   help="event seconds per micro-batch (Spark pays ~2 s per batch: more "
                        "seconds per batch, fewer batches)")
    r.add_argument("--allowed-lateness", type=non_negative, default=0.0,
                   help="seconds a reading may arrive behind the largest event time seen")
    r.add_argument("--event-horizon", type=positive, default=3600.0,
                   help="seconds: a reading further than this ahead of the stream's clock "
                        "(or from the first file's other readings) is dead-lettered")
    r.add_argument("--output", type=_output, default=None,
                   help="results: a .parquet file, a directory (a following run: one part per "
                        "micro-batch and _manifest.jsonl, as they are computed), a .duckdb "
                        "file (table --output-table, rows as they are computed) or "
                        "mqtt[s]://HOST:PORT/TOPIC (a message per query and instant)")
    r.add_argument("--output-table", default="results",
                   help="the table of a .duckdb --output (appended; --overwrite replaces it)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    r.add_argument("--work-dir", type=Path, default=None,
                   help="keeps the run's state: the same command on it resumes after a crash "
                        "(default: a temporary directory, removed after the run but for "
                        "its dead letters)")
    r.add_argument("--fresh", action="store_true",
                   help="discard an interrupted run in --work-dir and start over")
    r.add_argument("--realtime", action="store_true",
                   help="one micro-batch per batch interval of wall time instead of max speed")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    lv = r.add_argument_group(
        "live input (--follow)",
        "read --data's files as they land (write each under another name, then rename it to "
        "part-*.parquet) and run until SIGINT/SIGTERM (the micro-batch in progress finishes; "
        "the same command with the same --work-dir resumes) or --until")
    lv.add_argument("--follow", action="store_true",
                    help="follow --data: read files as they land, never end by itself")
    lv.add_argument("--source", default=None, metavar="mqtt[s]://[USER@]HOST:PORT/TOPIC",
                    help="follow an MQTT broker's topic instead of a directory (messages: "
                         "a JSON reading, a JSON array of readings, or CSV lines in the "
                         "stream's column order; QoS 1, acknowledged once durable); "
                         "mqtts:// over TLS")
    add_mqtt_security_arguments(lv)
    lv.add_argument("--until", type=datetime.fromisoformat, default=None,
                    help="event time (ISO) at which a followed input ends: every window "
                         "over the readings so far is then computed and the run ends")
    lv.add_argument("--idle-timeout", type=positive, default=5.0,
                    help="seconds of wall time without a file after which the stream's "
                         "clock moves on with wall time (quiet windows close)")
    lv.add_argument("--max-batch-rows", type=int, default=500_000, metavar="N",
                    help="a micro-batch reads at most about N readings of each stream (a "
                         "burst is caught up in batches of that size; its backlog waits on disk)")
    add_engine_arguments(r)
    r.add_argument("--console", action="store_true", help="print each instant's rows as computed")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics while the "
                        "run runs (0: a free port, printed)")
    ad = r.add_argument_group("re-optimization while running (--adaptive)", "every "
        "--decide-every event seconds the run measures the last window (input rate, "
        "selectivities, its own pace); when the optimizer's plan for those statistics is "
        "better than the running placement by the margin, it migrates at that instant: the new "
        "placement takes the DuckDB window state over (move) or replays the last window (replay)")
    ad.add_argument("--adaptive", action="store_true",
                    help="re-optimize as the input rate changes (--placement is the start)")
    ad.add_argument("--decide-every", type=positive, default=10.0,
                    help="event seconds between decisions (a multiple of the slide)")
    ad.add_argument("--margin", type=non_negative, default=0.1,
                    help="how much cheaper (C_u, or C_b when infeasible) a plan must be")
    ad.add_argument("--min-interval", type=non_negative, default=30.0,
                    help="event seconds at least between two migrations")
    ad.add_argument("--strategy", choices=["move", "replay"], default="move",
                    help="how a new placement gets its window state: move it from DuckDB "
                         "where it is there (else replay), or always replay the last window")
    r.set_defaults(func=cmd_run)
