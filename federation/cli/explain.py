"""`fedq explain`: the optimizer's physical plan for a query, as text, JSON or a sweep."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from federation.cli.args import (
    Help,
    add_query_arguments,
    count,
    data_dirs,
    non_negative,
    positive,
    query_source,
    rates,
    sweep_text,
)


def cmd_explain(a: argparse.Namespace) -> int:
    from costmodel.profile import load_profile
    from federation.errors import OptionError
    from federation.explain import explain_json, explain_text, sweep
    from federation.optimizer import optimize

    try:
        a.data = data_dirs(a.data)
    except OptionError as e:
        raise SystemExit(f"fedq explain: --data: {e.message}") from None
    make = query_source(a)
    profile, chosen_for = spe_capacity_of(
        a, load_profile(a.profile).model_copy(update={"feed": a.feed}))
    kw = {"profile": profile, "feasibility_check": not a.no_feasibility_check,
          "max_subplan_ops": a.max_subplan_ops, "memory_check": not a.no_memory_check}

    declared = None
    if isinstance(a.data, Path):  # one stream (several: each at its declared rate)
        from federation.streams import load_stream_decl

        declared = load_stream_decl(a.data)

    gen_rate = None  # a generator's own rate (--data datagen:smartplug?rate=N)
    if isinstance(a.data, str) and a.data.startswith("datagen:smartplug"):
        from federation.runtime.connectors import parse_source
        from federation.runtime.connectors.datagen import rate_and_plugs

        gen_rate = rate_and_plugs(parse_source(a.data))[0]

    def mk(rate: float | None):
        q = make(rate=rate or gen_rate or 2000.0, scale=a.scale, plugs=a.plugs)
        if declared is not None and rate is not None:  # --rate / --sweep: the declared
            from federation.adaptive import with_rate  # stream at that rate too

            q = with_rate(q, rate, declared.name)
        return q

    if a.sweep and a.margin is not None:
        from federation.adaptive import migrations_over

        steps = migrations_over(mk, rates(a.sweep), a.margin, profile)
        if a.json:
            print(json.dumps(steps, indent=2))
            return 0
        print(f"an adaptive run (--margin {a.margin:g}) as the rate steps up:")
        print(f"{'rate':>8}  running placement")
        for st in steps:
            mark = (f"   <- migrates ({st['reason']})" if st["migrates"] else
                    f"   ({st['reason']})" if st["reason"] and st["reason"] != "start" else "")
            print(f"{st['rate']:>8.0f}  {st['running']}{mark}")
        return 0
    if a.sweep:
        rows = sweep(mk, rates(a.sweep), **kw)
        if a.json:
            print(json.dumps(rows, indent=2))
            return 0
        print(f"{'rate':>8}  {'C_b':>9}  {'C_u':>9}  feasible  placement")
        for r in rows:
            mark = " <- changes" if r["changed"] and r is not rows[0] else ""
            print(f"{r['rate']:>8.0f}  {r['C_b']:>9.4g}  {r['C_u']:>9.4g}  "
                  f"{'yes' if r['feasible'] else 'NO ':<8}  {r['placement']}{mark}")
        return 0
    r = optimize(mk(a.rate), **kw)
    if chosen_for:
        r = dataclasses.replace(r, plan=dataclasses.replace(r.plan, chosen_for=chosen_for))
    print(json.dumps(explain_json(r), indent=2) if a.json else explain_text(r))
    return 0


def spe_capacity_of(a: argparse.Namespace, profile):
    """The profile for the Spark capacity asked for: --spe-cores as given, --master as
    read from the cluster (a JVM starts only then); (profile, what it is or None)."""
    if a.spe_cores:
        return profile.model_copy(update={"spe_cores": a.spe_cores}), \
            f"{a.spe_cores:g} cores, given by --spe-cores"
    if not a.master:
        return profile, None
    from federation.api import spe_profile
    from spe.session import SparkSettings, get_spark

    profile, cap = spe_profile(profile, get_spark(SparkSettings(master=a.master)))
    return profile, cap.describe()


def add_parser(sub) -> None:
    e = sub.add_parser(
        "explain", help="show the optimizer's physical plan for a query",
        description="The optimizer's placement of every operator (Spark or DuckDB), each "
                    "engine's utilization, the cost vector (C_b, C_u), the DB-ops' SQL and "
                    "the engines' limits. No JVM is started (unless --master).",
        epilog="examples:\n  fedq explain CQ1 --rate 20000\n"
               "  fedq explain CQ4 --sweep 1000:40000:1000      # where the placement changes\n"
               "  fedq explain --sql benchmarks/queries_sql/cq3.sql --json\n"
               "  fedq explain --sql docs/examples/warm_rooms.sql --data data/sensors\n"
               "  fedq explain --query my_queries.py:peaks",
        formatter_class=Help)
    add_query_arguments(e)
    e.add_argument("--data", action="append", default=None, metavar="[NAME=]DIR",
                   help="a data directory whose _stream.json declares a stream the SQL reads "
                        "(fedq import); NAME=DIR once per stream for several")
    e.add_argument("--rate", type=positive, default=None,
                   help="input rate, tuples/s (default: 2000, or the rate a --data "
                        "directory declares)")
    e.add_argument("--scale", type=positive, default=1.0, help="window range scale (1 = paper)")
    e.add_argument("--plugs", type=count, default=2125, help="number of plugs (groups)")
    e.add_argument("--json", action="store_true", help="the plan as JSON")
    e.add_argument("--no-feasibility-check", action="store_true",
                   help="rank plans by C_u alone (paper section 8.4)")
    e.add_argument("--no-memory-check", action="store_true",
                   help="choose plans whatever their predicted state memory (costmodel/memory.py)")
    e.add_argument("--spe-cores", type=positive, default=None,
                   help="cores Spark has (default: the profile's, measured on local[2])")
    e.add_argument("--master", default=None,
                   help="plan for this Spark master's executors: spark://host:7077 (starts "
                        "a JVM to read their cores and heap)")
    e.add_argument("--sweep", metavar="START:STOP:STEP", type=sweep_text,
                   help="show the optimal placement across a range of rates")
    e.add_argument("--margin", type=non_negative, default=None,
                   help="with --sweep: what an adaptive run with this margin would run at "
                        "each rate, and where it migrates (fedq run --adaptive)")
    e.add_argument("--feed", choices=["direct", "spe"], default="direct",
                   help="price the plans for this feed, as fedq run --feed (spe: Spark "
                        "forwards every row, the paper's setting)")
    e.add_argument("--profile", help="cost profile JSON (default: calibrated, else shipped)")
    e.add_argument("--max-subplan-ops", type=count, default=15,
                   help="decompose plans larger than this for Phase-Two (paper section 6)")
    e.set_defaults(func=cmd_explain)
