"""`fedq generate`: smart-plug or Nexmark data, one Parquet file per event second."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from federation.cli.args import (
    Help,
    add_mqtt_security_arguments,
    count,
    mqtt_security,
    positive,
    rate_profile,
)
from federation.conventions import REJECTED_CSV


def cmd_generate(a: argparse.Namespace) -> int:
    from federation.cli.progress import ConsoleProgress
    from federation.smartplug.datagen import generate

    if a.csv is not None:
        from federation.smartplug.csvload import load_csv

        if a.out is None:
            print("fedq generate: --out: the data directory to write is needed",
                  file=sys.stderr)
            return 2
        if not a.csv.is_file():
            print(f"fedq generate: --csv: {a.csv} is not a file", file=sys.stderr)
            return 2
        with ConsoleProgress() as progress:
            progress.phase(f"converting {a.csv}", unit="files")
            s = load_csv(a.csv, a.out, progress=progress.advance)
        print(f"converted {a.csv}: {s.rows} rows in {s.files} files, {s.rejected} rejected "
              f"(see {a.out / REJECTED_CSV})" if s.rejected else
              f"converted {a.csv}: {s.rows} rows in {s.files} files")
        return 0
    if a.nexmark:
        return _nexmark(a)
    if a.start is None:
        a.start = (datetime.now().replace(microsecond=0) if a.realtime
                   else datetime(2013, 9, 1))
    seconds = sum(n for _, n in a.rate_profile) if a.rate_profile else a.seconds
    if a.publish:
        return _publish(a, seconds)
    if a.out is None:
        print("fedq generate: --out: the data directory to write is needed (or --publish)",
              file=sys.stderr)
        return 2
    speed = a.speed if a.realtime else None
    with ConsoleProgress() as progress:
        progress.phase(f"generating {a.out}" + (" in real time" if speed else ""),
                       total=seconds, unit="event seconds")
        s = generate(a.out, rate=a.rate, seconds=a.seconds, plugs=a.plugs, houses=a.houses,
                     seed=a.seed, progress=progress.advance, start=a.start,
                     rate_profile=a.rate_profile, realtime=speed)
    print(f"wrote {s.rows} rows in {s.files} files ({s.plugs} plugs, {s.houses} houses) to {a.out}"
          + (f", rates {' -> '.join(f'{r:g}/s x {n} s' for r, n in a.rate_profile)}"
             if a.rate_profile else ""))
    return 0


def _nexmark(a: argparse.Namespace) -> int:
    """Nexmark's persons, auctions and bids into OUT/person, OUT/auction, OUT/bid."""
    from federation.cli.progress import ConsoleProgress
    from federation.nexmark.datagen import BASE_TIME, generate

    for flag in ("csv", "publish", "rate_profile"):
        if getattr(a, flag):
            print(f"fedq generate: --{flag.replace('_', '-')} does not apply to --nexmark",
                  file=sys.stderr)
            return 2
    if a.out is None:
        print("fedq generate: --out: the directory to write person/, auction/ and bid/ "
              "into is needed", file=sys.stderr)
        return 2
    with ConsoleProgress() as progress:
        progress.phase(f"generating Nexmark into {a.out}", total=a.seconds,
                       unit="event seconds")
        try:
            start = a.start or (datetime.now().replace(microsecond=0) if a.realtime
                                else BASE_TIME)
            s = generate(a.out, rate=a.rate, seconds=a.seconds, seed=a.seed, start=start,
                         progress=progress.advance,
                         realtime=a.speed if a.realtime else None)
        except ValueError as e:
            print(f"fedq generate: --{e}", file=sys.stderr)
            return 2
    print(f"wrote {s.events} Nexmark events ({', '.join(f'{n} {k}s' for k, n in s.rows.items())})"
          f" to {a.out}/person, auction, bid; e.g. fedq run --sql "
          f"benchmarks/queries_sql/nexmark/q5.sql --data bid={a.out}/bid")
    return 0


def _publish(a: argparse.Namespace, seconds: int) -> int:
    """Generate, then publish every reading to a broker's topic (paced when --realtime)."""
    import tempfile

    from federation.cli.progress import ConsoleProgress
    from federation.smartplug.datagen import generate
    from federation.smartplug.publish import endpoint, publish

    security = mqtt_security(a)
    try:
        endpoint(a.publish)
    except ValueError as e:
        print(f"fedq generate: --publish: {e}", file=sys.stderr)
        return 2
    if (why := security.problem(a.publish)) is not None:
        print(f"fedq generate: --{why[0].replace('_', '-')}: {why[1]}", file=sys.stderr)
        return 2
    out = a.out or Path(tempfile.mkdtemp(prefix="fedq-publish-"))
    with ConsoleProgress() as progress:
        progress.phase(f"generating {out}", total=seconds, unit="event seconds")
        generate(out, rate=a.rate, seconds=a.seconds, plugs=a.plugs, houses=a.houses,
                 seed=a.seed, progress=progress.advance, start=a.start,
                 rate_profile=a.rate_profile)
        progress.phase(f"publishing to {a.publish}" + (" in real time" if a.realtime else ""),
                       total=seconds, unit="event seconds")
        try:
            s = publish(out, a.publish, realtime=a.realtime, speed=a.speed,
                        progress=progress.advance, security=security)
        except (OSError, TimeoutError, RuntimeError) as e:
            print(f"fedq generate: --publish: {e}", file=sys.stderr)
            return 1
    print(f"published {s.readings} readings in {s.messages} messages to {a.publish}")
    return 0


def add_parser(sub) -> None:
    g = sub.add_parser(
        "generate", help="write smart-plug data, one Parquet file per second",
        description="Write a synthetic DEBS 2014 smart-plug stream (load and work readings "
                    "of every plug), one Parquet file per event second, or convert the real "
                    "DEBS 2014 CSV file (--csv).",
        epilog="examples:\n  fedq generate --rate 2000 --seconds 600 --plugs 2125 --out data/\n"
               "  fedq generate --realtime --seconds 3600 --out landing/   # a live producer\n"
               "  fedq generate --csv sorted.csv --out data/    # the real data set\n"
               "  fedq generate --nexmark --rate 10000 --seconds 60 --out nexmark/",
        formatter_class=Help)
    g.add_argument("--rate", type=positive, default=2000.0,
                   help="tuples per event second (with --nexmark: events of all three "
                        "streams)")
    g.add_argument("--nexmark", action="store_true",
                   help="write the Nexmark streams (person, auction, bid: one, three and 46 "
                        "in every 50 events) into OUT/person, OUT/auction, OUT/bid")
    g.add_argument("--seconds", type=count, default=600, help="event seconds to write")
    g.add_argument("--realtime", action="store_true",
                   help="write one event second per wall second (a live producer for "
                        "fedq run --follow); the event time starts now unless --start")
    g.add_argument("--publish", default=None, metavar="mqtt[s]://[USER@]HOST:PORT/TOPIC",
                   help="publish the readings to an MQTT broker's topic (JSON, 100 per "
                        "message, QoS 1) instead of only writing files; mqtts:// over TLS")
    add_mqtt_security_arguments(g)
    g.add_argument("--speed", type=positive, default=1.0,
                   help="with --realtime: event seconds per wall second")
    g.add_argument("--rate-profile", type=rate_profile, default=None, metavar="RATE:SECONDS,...",
                   help="a rate that changes over event time, e.g. 2000:120,40000:120,2000:60 "
                        "(replaces --rate and --seconds)")
    g.add_argument("--plugs", type=count, default=None,
                   help="plugs (groups); default: what --houses draws (1-6 households of "
                        "2-10 plugs per house)")
    g.add_argument("--houses", type=count, default=40, help="houses the plugs belong to")
    g.add_argument("--seed", type=int, default=0, help="random seed (same seed, same data)")
    g.add_argument("--out", type=Path, default=None,
                   help="the data directory to write (with --publish: kept there, else a "
                        "temporary one)")
    g.add_argument("--start", type=datetime.fromisoformat, default=None,
                   help="event time of the first second (ISO date; default 2013-09-01, "
                        "with --realtime the current second)")
    g.add_argument("--csv", type=Path, default=None,
                   help="convert this DEBS 2014 CSV file instead of generating (rows that "
                        "do not parse go to OUT/_rejected.csv); other streams: fedq import")
    g.set_defaults(func=cmd_generate)
