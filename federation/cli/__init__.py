"""`fedq`: explain, run, status, generate, import and stats (one command with subcommands)."""

from __future__ import annotations

import argparse
import sys

from federation.cli import data, explain, generate, run, status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="fedq", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="a first session:\n"
               "  fedq generate --rate 2000 --seconds 120 --plugs 100 --out data/\n"
               "  fedq explain CQ1 --rate 2000\n"
               "  fedq run CQ1 --data data/ --output out/cq1.parquet\n"
               "your own stream: fedq import --help;  queries in SQL: docs/sql.md\n"
               "each command's options: fedq COMMAND --help")
    sub = p.add_subparsers(dest="cmd", required=True)
    explain.add_parser(sub)
    generate.add_parser(sub)
    run.add_parsers(sub)
    status.add_parser(sub)
    data.add_parsers(sub)
    a = p.parse_args(argv)
    return int(a.func(a) or 0)


if __name__ == "__main__":
    sys.exit(main())
