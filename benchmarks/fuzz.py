"""Differential fuzzing: random valid queries, random placements, random micro-batch sizes,
every run compared with the reference evaluator (db/reference.py).

The generator is a Hypothesis strategy (`queries()`, benchmarks/fuzz_queries.py): windows
of different ranges over one slide (ranges that the slide does not divide, fractions of
seconds, now and then a tuple window), selections, projections with computed columns of
every type (CASE, comparisons, literals, integer and double arithmetic, casts between INT,
BIGINT, DOUBLE, BOOLEAN and VARCHAR, //, % of negatives, ROUND), aggregations with key
subsets, computed keys and global ones, chained aggregations, joins of window rows over
windows of different ranges (each side selected and renamed), aggregated by a key or
globally, joins of window rows with aggregates, joins of aggregates, self-joins, windows
over a second stream (`s2`: its own directory, starting later and ending earlier); output
names in camelCase, UPPER case, 40-60 characters long or equal to SQL keywords. Each query
runs under `spe`, `db`, `auto`, the explicit placement that alternates engines by depth in
the plan (every parent and child in different engines), its complement and one random
explicit placement, each with a random number of event seconds per micro-batch. A
placement that an engine cannot run must be refused with a PlacementError naming the
operator (it is never run); anything else must equal the reference. Then a query whose
result has rows runs once more following a landing directory that a writer fills in bursts
while it runs (benchmarks/fuzz_follow.py: ended by `until` or, every other live run, by the
idle clock), its instants taken from the API's iterator (`--no-follow` skips it). Every
fourth query runs as a set with a global COUNT over its result (`--sets-every`). A run
whose report fails (a warning in its summary, no predicted memory: anything after the last
batch counts) is a crash. On a mismatch or a
crash Hypothesis shrinks the query to a minimal one, which the report shows. The report
counts the queries per shape (`fuzz_queries.SHAPES`; every record names its query's).

    python -m benchmarks.fuzz --queries 200 --seed 1     # long profile, writes a report
    python -m benchmarks.fuzz --queries 3 --seed 0       # a quick look
    python -m benchmarks.fuzz --queries 100 --seed 3 --placements 3   # 3 per query

The tests run a fast profile (a handful of queries, fixed seed) in `make test`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Flaky

from benchmarks.fuzz_queries import (
    HOUSES,
    PLUGS,
    RATE,
    SECONDS,
    SHAPES,
    Generated,
    _logical,
    as_query_set,
    queries,
)
from federation.errors import PlacementError

# -- running -----------------------------------------------------------------------------


class Runner:
    """Runs generated queries over one data set in one Spark session and records outcomes."""

    def __init__(self, work: Path, spark, seconds: int = SECONDS,
                 follow: bool | int = True, adaptive: int = 0) -> None:
        from federation.smartplug.datagen import generate

        self.work = work
        self.spark = spark
        if spark is not None:  # Java Spark cannot compile is a failure, not a logged fallback
            spark.conf.set("spark.sql.codegen.fallback", "false")
        self.data = work / "data"
        if not self.data.exists():
            generate(self.data, rate=RATE, seconds=seconds, plugs=PLUGS, houses=HOUSES, seed=11)
        # the second stream (`s2`): another seed, from 2 s later to 3 s before the end
        self.data2 = work / "data_other"
        if not self.data2.exists():
            generate(self.data2, rate=RATE, seconds=max(1, seconds - 5), plugs=PLUGS,
                     houses=HOUSES, seed=12, start=dt.datetime(2013, 9, 1, 0, 0, 2))
        self.seconds = seconds
        # a live run per query with rows (benchmarks/fuzz_follow.py); an int: for the first n
        self.follow, self.followed = follow, 0
        # every `adaptive`-th query with matching runs once more re-placed mid-run
        self.adaptive, self.adapted = adaptive, 0
        self.records: list[dict] = []
        self.k = 0  # checks so far: each one's work directory
        # per query: its number and the adaptive and live runs before it when first checked,
        # so that a replay (Hypothesis confirming a failure, or shrinking) decides alike
        self.first: dict[str, tuple[int, int, int]] = {}

    def check(self, g: Generated) -> list[dict]:
        """Run every placement of `g`; raise AssertionError on a mismatch or a crash."""
        from federation.api import run
        from federation.physical import build_physical_plan, spe_limits
        from federation.results import diff_results
        from federation.runtime.sources import read_clean_inputs

        self.k += 1
        nth, adapted, followed = self.first.setdefault(
            g.source, (len(self.first) + 1, self.adapted, self.followed))
        outcomes = []
        want = None
        for pl in g.placements:
            rec = {"query": g.source, "placement": pl, "batch_s": g.batch_s,
                   "feed": g.feed, "shapes": sorted(g.shapes)}
            t0 = time.perf_counter()
            try:
                if pl not in ("auto",):
                    plan = _logical(g.query)
                    limits = spe_limits(plan, _parse(plan, pl))
                    if limits:
                        try:
                            build_physical_plan(plan, pl)
                        except PlacementError as e:
                            rec.update(outcome="refused", reason=str(e))
                            outcomes.append(rec)
                            continue
                        raise AssertionError(f"{pl} was not refused: {limits}")
                # one work directory per run: a directory holding another placement's
                # run is refused (it could only be resumed, runtime/recovery.py)
                r = run(g.query, pl, self.data_of(g.query),
                        work_dir=self.work / f"q{self.k}" / f"p{g.placements.index(pl)}",
                        seconds_per_batch=g.batch_s, feed=g.feed, spark=self.spark)
                if want is None:
                    want = _references(g.query, read_clean_inputs(r.ingest))
                problem = "; ".join(f"{n}: {x}" for n, w in want.items()
                                    if (x := diff_results(r.of(n), w)) is not None) or None
                rec.update(outcome="match" if problem is None else "mismatch",
                           placement_run=r.summary.placement, rows=r.rows.num_rows,
                           reference_rows=sum(w.num_rows for w in want.values()))
                if problem:
                    rec["problem"] = problem
                elif (failed := report_failures(r)) is not None:
                    rec.update(outcome="crash", error=failed)
            except AssertionError:
                raise
            except Exception as e:  # noqa: BLE001 - a crash is an outcome to report
                rec.update(outcome="crash", error=f"{type(e).__name__}: {str(e)[:2000]}",
                           trace=traceback.format_exc()[-3000:])
            rec["wall_s"] = round(time.perf_counter() - t0, 2)
            outcomes.append(rec)
        ran = [o["placement"] for o in outcomes if o["outcome"] == "match"]
        live = ran and not isinstance(self.data_of(g.query), dict) and \
            g.query.kind != "queries" and want[g.query.name].num_rows
        wants = want
        want = want and want.get(g.query.name)
        if self.adaptive and ran and wants and nth % self.adaptive == 0:
            from benchmarks.fuzz_adaptive import check_adaptive

            adapted += 1
            self.adapted = max(self.adapted, adapted)
            cut = [p for p in g.placements[3:4] if p in ran]  # every engine boundary
            outcomes.append(check_adaptive(
                g, cut + [p for p in ran if p not in cut], self.data_of(g.query),
                self.work / f"q{self.k}" / "adaptive", self.spark, wants,
                # followed: one stream only (as check_following: two streams' inputs end
                # apart, and the quiet one's idle clock moves the input's end past the data's)
                live=adapted % 2 == 0 and not isinstance(self.data_of(g.query), dict),
                strategy=("move", "replay")[adapted // 2 % 2]))
        if live and (self.follow is True or followed < self.follow):
            from benchmarks.fuzz_follow import check_following

            # live input under the placement that cuts every engine boundary when it ran
            followed += 1
            self.followed = max(self.followed, followed)
            pl = next((p for p in g.placements[3:4] if p in ran), ran[0])
            outcomes.append(check_following(
                g, pl, self.data, self.work / f"q{self.k}" / "follow", self.spark, want,
                "until" if followed % 2 else "idle"))
        self.records.extend(outcomes)
        bad = [o for o in outcomes if o["outcome"] in ("mismatch", "crash")]
        if bad:
            raise AssertionError(f"{g!r}: " + "; ".join(
                f"{o['placement']}: {o.get('problem') or o.get('error')}" for o in bad))
        return outcomes


    def data_of(self, q) -> Path | dict[str, Path]:
        """The data directory, or one per stream for a query over both (`two_streams`)."""
        from benchmarks.fuzz_queries import OTHER

        if any(n.kind == "window" and n.stream.name == OTHER for n in q.walk()):
            streams = {n.stream.name for n in q.walk() if n.kind == "window"}
            return {n: self.data2 if n == OTHER else self.data for n in streams}
        return self.data


def report_failures(r) -> str | None:
    """What of a run's report failed (issue 41: anything a run does after its last batch
    counts): its summary's warnings, or a predicted memory missing; None when whole."""
    s = r.summary
    if s.warnings:
        return "report: " + "; ".join(s.warnings)
    if not s.predicted_memory:
        return "report: no predicted memory in the summary"
    return None


def _references(q, rows) -> dict:
    """The reference result of `q`, or of each query of a set, by name."""
    from db.reference import reference_result

    if q.kind != "queries":
        return {q.name: reference_result(q, rows)}
    out = {}
    for x in q.children:
        read = {n.stream.name for n in x.walk() if n.kind == "window"}
        mine = {n: t for n, t in rows.items() if n in read} if isinstance(rows, dict) else rows
        out[x.name] = reference_result(x, mine)
    return out


def _parse(plan, pl: str) -> dict:
    from federation.physical import parse_placement

    return parse_placement(plan, pl)


class _Enough(BaseException):
    """Raised inside the property once `n` distinct queries are checked (Hypothesis does
    not treat a BaseException as a failure to shrink)."""


def some_placements(g: Generated, k: int) -> Generated:
    """`g` with `k` of its placements: the two that cut every engine boundary (alternating
    by depth, and its complement) first, then spe, db and auto in an order drawn from the
    query's source (the same on a replay); spe last for a tuple window (refused)."""
    import random

    pure = ["spe", "db", "auto"]
    random.Random(g.source).shuffle(pure)
    if "rows=" in g.source:
        pure = [p for p in pure if p != "spe"] + ["spe"]
    order = [p for p in g.placements[3:5]] + pure + g.placements[5:]
    return dataclasses.replace(g, placements=list(dict.fromkeys(order))[:k])


def fuzz(n: int, seed_value: int, work: Path, spark, progress=None, shrink: bool = True,
         placements: int | None = None, seconds: int = SECONDS, follow: bool | int = True,
         sets: bool | int = False, adaptive: int = 0, shapes: frozenset[str] = frozenset()):
    """Run `n` distinct generated queries (Hypothesis repeats a query now and then with
    other placements; a repeat is skipped); returns (records, failure text or None).
    `placements`: run only that many of each query's placements (`some_placements`);
    `follow`: a live run of every query whose result has rows (True), of none (False)
    or of the first n such queries. `sets`: each query runs together with a global COUNT
    over its result (fuzz_queries.as_query_set), each result against its reference; an
    int k: every k-th query so. `shapes`: only queries with one of these shapes (fuzz_shapes),
    drawn among up to 200 n."""
    runner = Runner(work, spark, seconds, follow, adaptive)
    phases = [Phase.generate] + ([Phase.shrink] if shrink else [])
    seen: set[str] = set()

    @seed(seed_value)
    @settings(max_examples=(200 if shapes else 10) * n, deadline=None, database=None,
              phases=phases,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=True)
    @given(queries())
    def prop(g: Generated) -> None:
        if shapes and not g.shapes & shapes:
            return
        if g.source in seen and len(seen) < n:
            return
        if len(seen) >= n:
            raise _Enough
        seen.add(g.source)
        if placements:
            g = some_placements(g, placements)
        if sets is True or sets and len(seen) % sets == 0:
            g = as_query_set(g)
        try:
            runner.check(g)
        except AssertionError:
            seen.discard(g.source)  # checked again when Hypothesis replays it to shrink
            raise
        if progress:
            progress(runner)

    failure = None
    try:
        prop()
    except _Enough:
        pass
    except (AssertionError, Flaky) as e:  # Flaky: the failure did not come back on a replay
        failure = f"{type(e).__name__}: {e}"
    return runner.records, failure


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=200, help="generated queries (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/fuzz",
                    help="report path without suffix (.json and .md are written)")
    ap.add_argument("--work", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--no-follow", action="store_true",
                    help="no live run per query (benchmarks/fuzz_follow.py)")
    ap.add_argument("--event-seconds", type=int, default=SECONDS, metavar="N",
                    help=f"event seconds of generated data (default {SECONDS})")
    ap.add_argument("--placements", type=int, default=None, metavar="K",
                    help="run K placements per query: the two that cut every engine "
                         "boundary, then spe, db, auto in a random order (default: all)")
    ap.add_argument("--sets", action="store_true",
                    help="run each query together with a global COUNT over its result (one "
                         "run of two queries sharing the whole plan)")
    ap.add_argument("--sets-every", type=int, default=4, metavar="K",
                    help="without --sets: every K-th query so (default 4; 0: none)")
    ap.add_argument("--adaptive", type=int, default=0, metavar="K",
                    help="every K-th query also runs adaptively, re-placed at two instants "
                         "(benchmarks/fuzz_adaptive.py; default 0: none)")
    ap.add_argument("--shapes", default="", metavar="A,B",
                    help="run only generated queries with one of these shapes (the report's "
                         "shape names, e.g. session_window,computed_partition)")
    ap.add_argument("--merge", nargs="+", metavar="REPORT.json",
                    help="merge the reports of runs with other seeds (run side by side) into "
                         "one report at --out, instead of running")
    a = ap.parse_args(argv)
    if a.merge:
        report = merge([json.loads(Path(p).read_text()) for p in a.merge])
        Path(a.out + ".json").write_text(json.dumps(report, indent=2, default=str))
        Path(a.out + ".md").write_text(markdown(report))
        print(markdown(report).split("\n## Queries")[0])
        return 0 if not report["failure"] else 1
    if a.queries < 1:
        ap.error("--queries: must be >= 1")
    from benchmarks.fuzz_shapes import SHAPES

    shapes = frozenset(x for x in a.shapes.split(",") if x)
    if shapes - set(SHAPES):
        ap.error(f"--shapes: unknown {', '.join(sorted(shapes - set(SHAPES)))} (known: "
                 f"{', '.join(SHAPES)})")
    from spe.session import get_spark

    work = Path(a.work or tempfile.mkdtemp(prefix="fedq-fuzz-"))
    spark = get_spark()
    t0 = time.perf_counter()

    def write(records: list[dict], failure: str | None, complete: bool) -> dict:
        report = summarize(records, failure, a, time.perf_counter() - t0)
        report["complete"] = complete
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out + ".json").write_text(json.dumps(report, indent=2, default=str))
        Path(a.out + ".md").write_text(markdown(report))
        return report

    def progress(r: Runner) -> None:
        recs = r.records
        runs = sum(1 for x in recs if x["outcome"] != "refused")
        print(f"[{time.perf_counter() - t0:6.0f} s] query {r.k}/{a.queries}: {runs} runs, "
              f"{sum(1 for x in recs if x['outcome'] == 'refused')} refused", flush=True)
        write(recs, None, False)  # after every query: a long run stopped keeps its report

    if a.placements is not None and a.placements < 1:
        ap.error("--placements: must be >= 1")
    if a.event_seconds < 1:
        ap.error("--event-seconds: must be >= 1")
    records, failure = fuzz(a.queries, a.seed, work, spark, progress, not a.no_shrink,
                            a.placements, a.event_seconds, not a.no_follow,
                            True if a.sets else max(a.sets_every, 0), max(a.adaptive, 0),
                            shapes)
    report = write(records, failure, True)
    print(markdown(report).split("\n## Queries")[0])
    return 0 if failure is None else 1


def merge(reports: list[dict]) -> dict:
    """One report of several runs (other seeds, run side by side): their records, a
    query counted once even where two seeds generated it."""
    records = [r for rep in reports for r in rep["records"]]
    failures = [rep["failure"] for rep in reports if rep["failure"]]
    args = argparse.Namespace(seed=", ".join(str(rep["seed"]) for rep in reports),
                              queries=sum(rep["queries_requested"] for rep in reports),
                              event_seconds=reports[0]["data"]["event_seconds"])
    out = summarize(records, "\n\n".join(failures) or None, args,
                    max(rep["wall_s"] for rep in reports))
    out["complete"] = all(rep.get("complete", True) for rep in reports)
    out["command"] = "; ".join(rep["command"] for rep in reports) + \
        " (side by side); then python -m benchmarks.fuzz --merge ..."
    out["date"] = max(rep["date"] for rep in reports)
    return out


def summarize(records: list[dict], failure: str | None, args, wall_s: float) -> dict:
    from importlib.metadata import version

    import duckdb
    import sqlglot

    queries = list(dict.fromkeys(r["query"] for r in records))
    by = {}
    for r in records:
        by[r["outcome"]] = by.get(r["outcome"], 0) + 1
    per_query = {}
    for r in records:
        per_query.setdefault(r["query"], []).append(r)
    ran = [q for q, rs in per_query.items()]
    shapes = shape_counts(per_query)
    classes: dict[str, int] = {}
    for r in records:
        if r["outcome"] != "refused":
            c = placement_class(r["placement"])
            classes[c] = classes.get(c, 0) + 1
    feeds: dict[str, int] = {}  # how stages without SPE-ops were fed (runtime/direct.py)
    for r in records:
        if r["outcome"] != "refused":
            feeds[str(r.get("feed"))] = feeds.get(str(r.get("feed")), 0) + 1
    return {
        "placement_classes": classes,
        "feeds": feeds,
        "command": "python -m benchmarks.fuzz " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cores": __import__("os").cpu_count()},
        "versions": {"pyspark": version("pyspark"), "duckdb": duckdb.__version__,
                     "sqlglot": sqlglot.__version__},
        "seed": args.seed,
        "queries_requested": args.queries,
        "queries": len(queries),
        "runs": len(records),
        "outcomes": by,
        "placements_per_query_min": min((len(v) for v in per_query.values()), default=0),
        "runs_per_query_min": min((sum(1 for x in v if x["outcome"] != "refused")
                                   for v in per_query.values()), default=0),
        "failure": failure,
        "wall_s": round(wall_s, 1),
        "data": {"rate_tps": RATE, "plugs": PLUGS, "houses": HOUSES,
                 "event_seconds": getattr(args, "event_seconds", SECONDS)},
        "shapes": shapes,
        "records": records,
        "_queries": ran,
    }


def placement_class(pl: str) -> str:
    """spe, db, auto, explicit (op=engine items), follow (a live run) or adaptive."""
    if pl.startswith("follow"):
        return "follow"
    if pl.startswith("adaptive"):
        return "adaptive"
    return pl if pl in ("spe", "db", "auto") else "explicit"


def shape_counts(per_query: dict[str, list[dict]]) -> dict[str, dict[str, int]]:
    """Per shape: the queries that contain it, and those of them with a mismatch or a crash
    (records of reports written before shapes were recorded count under no shape)."""
    out: dict[str, dict[str, int]] = {
        s: {"queries": 0, "failing": 0} for s in SHAPES}
    for recs in per_query.values():
        failing = any(r["outcome"] in ("mismatch", "crash") for r in recs)
        for s in recs[0].get("shapes", []):
            c = out.setdefault(s, {"queries": 0, "failing": 0})
            c["queries"] += 1
            c["failing"] += failing
    return {s: out[s] for s in [*SHAPES, *sorted(set(out) - set(SHAPES))]}


def markdown(rep: dict) -> str:
    m = rep["machine"]
    v = rep["versions"]
    o = rep["outcomes"]
    head = (f"`{rep['command']}` on {rep['date']} ({m['platform']}, {m['cores']} cores; "
            f"pyspark {v['pyspark']}, duckdb {v['duckdb']}, sqlglot {v['sqlglot']}); "
            f"{rep['wall_s']:.0f} s.")
    if not rep.get("complete", True):
        head += (f" Stopped before the end: {rep['queries']} of {rep['queries_requested']} "
                 "queries ran.")
    queries = (f"- queries: **{rep['queries']}** generated (seed {rep['seed']}), placements "
               f"per query at least {rep['placements_per_query_min']} (runs at least "
               f"{rep['runs_per_query_min']})")
    bad = f"- mismatches: **{o.get('mismatch', 0)}**, crashes: **{o.get('crash', 0)}**"
    rule = ("A run matches when its rows equal the reference evaluator's as a multiset (floats "
            "to 9 significant digits or within 1e-6 relative). `refused`: an explicit "
            "placement that an engine cannot run (Spark has no tuple windows), refused with a "
            "PlacementError naming the operator, as it must be.")
    out = [
        "# Differential fuzzing report", "", head, "", queries,
        f"- runs: {rep['runs']}; outcomes: " + ", ".join(f"{k} {n}" for k, n in sorted(o.items())),
        bad,
        "- runs per placement class: " + ", ".join(
            f"{k} {n}" for k, n in sorted(rep.get("placement_classes", {}).items())),
        "- runs per feed of the stages without SPE-ops: " + ", ".join(
            f"{k} {n}" for k, n in sorted(rep.get("feeds", {}).items())),
        "- data: " + ", ".join(f"{k} {n}" for k, n in rep["data"].items()),
        "", rule,
    ]
    shapes = rep.get("shapes") or {}
    if shapes:
        n = max(rep["queries"], 1)
        out += ["", "## Shapes", "",
                ("Shapes a query contains (`benchmarks/fuzz_queries.py`, `SHAPES`; `cast:A>B`: "
                 "a conversion from A to B); a query counts under each of its shapes."), "",
                "| shape | queries | % | with a mismatch or crash |", "|---|---|---|---|"]
        for s, c in shapes.items():
            out.append(f"| {s} | {c['queries']} | {100 * c['queries'] / n:.0f} | "
                       f"{c['failing']} |")
    if rep["failure"]:
        out += ["", "## Minimal failing query (after shrinking)", "", "```", rep["failure"][:4000],
                "```"]
    out += ["", "## Queries", "", "| # | query | placement | s/batch | outcome | rows | s |",
            "|---|---|---|---|---|---|---|"]
    qi = {q: i + 1 for i, q in enumerate(rep["_queries"])}
    for r in rep["records"]:
        out.append(f"| {qi[r['query']]} | `{r['query']}` | {r['placement']} | {r['batch_s']} | "
                   f"{r['outcome']} | {r.get('rows', '')} | {r.get('wall_s', '')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
