"""`fedq import` and `fedq stats`: any stream's files in, the statistics the optimizer needs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from federation.cli.args import Help
from federation.conventions import REJECTED_CSV

EXAMPLE_IMPORT = """example:
  fedq import readings/ --schema "ts:TIMESTAMP,room:VARCHAR,sensor:INT,temp:DOUBLE" \\
      --name sensors --out data/sensors
  fedq stats data/sensors
  fedq run --sql my_query.sql --data data/sensors --output out/result.parquet
"""


def cmd_import(a: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from federation.cli.progress import ConsoleProgress
    from federation.importer import StreamImportError, import_stream, read_declaration
    from federation.runtime.progress import RunProgress

    try:
        decl = read_declaration(a.schema, a.name, a.ts)
        with nullcontext(RunProgress()) if a.quiet else ConsoleProgress() as shown:
            current = [""]

            def progress(phase: str, i: int, n: int) -> None:
                if phase != current[0]:
                    current[0] = phase
                    shown.phase("reading" if phase == "read" else "writing", total=n,
                                unit="files" if phase == "read" else "event seconds")
                shown.advance(i, n)

            s = import_stream(a.sources, a.out, decl, header=not a.no_header, delim=a.delim,
                              progress=progress)
    except StreamImportError as e:
        print(f"fedq import: {e}", file=sys.stderr)
        return 2
    print(f"stream {decl['name']}: {s.rows} rows in {s.files} event-second files, "
          f"{s.first_ts} .. {s.last_ts}, to {s.out}")
    if s.rejected:
        print(f"rejected rows: {s.rejected} (file, line and reason in "
              f"{Path(s.out) / REJECTED_CSV}; a run counts them as dead letters)")
    print(f"declaration and measured statistics: {Path(s.out) / '_stream.json'}")
    return 0


def cmd_stats(a: argparse.Namespace) -> int:
    from federation.importer import StreamImportError, measure_stats, stats_table
    from federation.streams import STREAM_FILE, load_stream_decl

    try:
        decl = load_stream_decl(a.dir)
    except ValueError as e:
        print(f"fedq stats: {e}", file=sys.stderr)
        return 2
    if decl is None:
        from federation.smartplug import smartplug_stream

        decl = smartplug_stream()  # smart-plug data (fedq generate) has no declaration
    try:
        stats = measure_stats(a.dir, decl, a.max_files)
    except StreamImportError as e:
        print(f"fedq stats: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(stats.model_dump(), indent=2))
    else:
        print(f"stream {decl.name} in {a.dir}")
        print(stats_table(stats))
    if a.write:
        d = json.loads(decl.model_dump_json(by_alias=True))
        d["stats"] = stats.model_dump()
        (a.dir / STREAM_FILE).write_text(json.dumps(d, indent=2))
        print(f"written to {a.dir / STREAM_FILE}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    i = sub.add_parser(
        "import", help="turn CSV or Parquet files with a declared schema into a data directory",
        description="Read CSV or Parquet files into one Parquet file per event second, with "
                    "the stream's declaration and measured statistics in _stream.json. Rows "
                    "that do not fit the schema go to _rejected.csv with their reason.",
        epilog=EXAMPLE_IMPORT, formatter_class=Help)
    i.add_argument("sources", nargs="+", type=Path, help="CSV/Parquet files or directories")
    i.add_argument("--schema", required=True,
                   help='"name:TYPE,..." (TIMESTAMP, BIGINT, INT, DOUBLE, VARCHAR, BOOLEAN) or '
                        'a JSON file {"name", "schema", "ts_column"}')
    i.add_argument("--out", type=Path, required=True, help="the data directory to write")
    i.add_argument("--name", default=None, help="the stream's name in queries (default: "
                   "the JSON's name, else 'stream')")
    i.add_argument("--ts", default=None,
                   help="event-time column (default: the first TIMESTAMP column)")
    i.add_argument("--no-header", action="store_true", help="CSV files have no header line")
    i.add_argument("--delim", default=",", help="CSV delimiter")
    i.add_argument("--quiet", action="store_true", help="no progress lines")
    i.set_defaults(func=cmd_import)

    s = sub.add_parser("stats", help="measure a data directory's stream statistics",
                       description="Rate, distinct values per column, group counts per key "
                                   "set and value fractions, measured from the data: what "
                                   "the optimizer's cost model uses.",
                       epilog="examples:\n  fedq stats data/sensors\n"
                              "  fedq stats data/ --max-files 60 --json\n"
                              "  fedq stats data/sensors --write   # update _stream.json",
                       formatter_class=Help)
    s.add_argument("dir", type=Path, help="a data directory (fedq import or fedq generate)")
    s.add_argument("--max-files", type=int, default=None,
                   help="measure only the first N event seconds (default: all)")
    s.add_argument("--write", action="store_true", help="store them in DIR/_stream.json")
    s.add_argument("--json", action="store_true", help="print them as JSON")
    s.set_defaults(func=cmd_stats)
