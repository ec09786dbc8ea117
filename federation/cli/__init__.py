"""`fedq`: explain, run, generate, import and stats (one command with subcommands)."""

from __future__ import annotations

import argparse
import sys

from federation.cli import data, explain, run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fedq", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    explain.add_parser(sub)
    run.add_parsers(sub)
    data.add_parsers(sub)
    a = p.parse_args(argv)
    return int(a.func(a) or 0)


if __name__ == "__main__":
    sys.exit(main())
