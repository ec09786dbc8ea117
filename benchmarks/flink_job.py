"""One Flink SQL job for `benchmarks.peers`, run by the Python of `.venv-flink` (PyFlink
pins numpy, pandas and pyarrow below what fedq uses, so it has a virtualenv of its own:
`make peers-setup`). Standard library and PyFlink only: this file imports nothing of fedq.

    .venv-flink/bin/python benchmarks/flink_job.py SPEC.json

SPEC: {"tables": {name: {"path": dir of CSV files, "columns": [[name, type], ...],
"time": the event-time column (default dateTime)}},
"warmup": the same for a small input (or null), "queries": {name: Flink SQL text},
"out": a directory for each query's rows as CSV (or null: a blackhole sink), "jars": [jar
files of the queries' Java functions]}. A query's text is the Nexmark project's: statements
before the last (CREATE FUNCTION) run first, and the last is a SELECT or an INSERT INTO
whose target this job replaces by its own sink.

Per query, after a warm-up job over the small input (which starts the JVM's compilers and
Flink's planner), the measured job reads every CSV file of its tables and runs to the end
of the input (a bounded filesystem source in streaming mode: windows close on the final
watermark). Printed on stdout, one JSON line per query: the seconds from the submission
of the INSERT to its end (planning, deployment, CSV parsing and the query), and the rows
written when `out` is given.
"""

from __future__ import annotations

import json
import re
import sys
import time


def ddl(name: str, path: str, columns: list[list[str]], time: str = "dateTime") -> str:
    cols = ",\n  ".join(f"`{c}` {t}" for c, t in columns)
    return (f"CREATE TEMPORARY TABLE `{name}` (\n  {cols},\n"
            f"  WATERMARK FOR `{time}` AS `{time}` - INTERVAL '0' SECOND\n"
            f") WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', "
            f"'csv.ignore-parse-errors' = 'false')")


def split(text: str) -> tuple[list[str], str]:
    """The statements before the query and the query's SELECT (an INSERT INTO's target
    removed); comments dropped."""
    lines = [x for x in text.splitlines() if not x.lstrip().startswith("--")]
    parts = [x.strip() for x in "\n".join(lines).split(";") if x.strip()]
    *before, last = parts
    last = re.sub(r"^INSERT\s+INTO\s+\S+\s+", "", last, flags=re.IGNORECASE)
    return before, last


def sink_ddl(env, name: str, select: str, path: str | None) -> str:
    schema = env.sql_query(select).get_schema()
    cols = []
    for c, t in zip(schema.get_field_names(), schema.get_field_data_types()):
        typ = str(t).replace(" *ROWTIME*", "").replace("NOT NULL", "").strip()
        if typ.startswith("TIMESTAMP"):
            typ = "TIMESTAMP(3)"
        elif typ == "DECIMAL":  # str() leaves out precision and scale
            typ = f"DECIMAL({t.precision}, {t.scale})"
        elif typ == "VARCHAR":
            typ = "STRING"
        cols.append(f"`{c}` {typ}")
    where = (f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'"
             if path else "'connector' = 'blackhole'")
    return f"CREATE TEMPORARY TABLE `{name}` ({', '.join(cols)}) WITH ({where})"


def main(spec_path: str) -> int:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    with open(spec_path) as f:
        spec = json.load(f)
    t0 = time.perf_counter()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(spec.get("parallelism", 2)))
    conf.set("table.local-time-zone", "UTC")
    conf.set("python.executable", sys.executable)
    if spec.get("jars"):
        conf.set("pipeline.jars", ";".join(f"file://{j}" for j in spec["jars"]))
    print(json.dumps({"event": "started", "jvm_s": round(time.perf_counter() - t0, 3)}),
          flush=True)
    for q, text in spec["queries"].items():
        before, select = split(text)
        for statement in before:
            try:
                env.execute_sql(statement)
            except Exception as e:  # the same function declared by an earlier query
                if "already exists" not in str(e):
                    raise
        if spec.get("warmup"):
            for name, t in spec["warmup"].items():
                env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS `{name}`")
                env.execute_sql(ddl(name, t["path"], t["columns"], t.get("time", "dateTime")))
            env.execute_sql("DROP TEMPORARY TABLE IF EXISTS `warm_sink`")
            env.execute_sql(sink_ddl(env, "warm_sink", select, None))
            w = time.perf_counter()
            env.execute_sql(f"INSERT INTO `warm_sink` {select}").wait()
            warm_s = time.perf_counter() - w
        else:
            warm_s = None
        for name, t in spec["tables"].items():
            env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS `{name}`")
            env.execute_sql(ddl(name, t["path"], t["columns"], t.get("time", "dateTime")))
        out = f"{spec['out']}/{q}" if spec.get("out") else None
        sink = f"sink_{q}"
        env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS `{sink}`")
        env.execute_sql(sink_ddl(env, sink, select, out))
        s = time.perf_counter()
        try:
            env.execute_sql(f"INSERT INTO `{sink}` {select}").wait()
        except Exception as e:
            if not out or "update" not in str(e).lower():
                raise
            # an updating result (an unbounded GROUP BY), which a file sink refuses: for
            # the check, its final rows from Flink's batch mode over the same files
            batch = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
            batch.get_config().set("table.local-time-zone", "UTC")
            for statement in [*before, *(ddl(n, t["path"], t["columns"],
                                              t.get("time", "dateTime"))
                                          for n, t in spec["tables"].items())]:
                batch.execute_sql(statement)
            batch.execute_sql(sink_ddl(batch, sink, select, out))
            batch.execute_sql(f"INSERT INTO `{sink}` {select}").wait()
        run_s = time.perf_counter() - s
        print(json.dumps({"event": "query", "query": q, "run_s": round(run_s, 3),
                          "warmup_s": None if warm_s is None else round(warm_s, 3)}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
