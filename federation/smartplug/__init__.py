"""The DEBS 2014 smart-plug stream declaration (schema and default statistics)."""

from __future__ import annotations

import math

from federation.streams import StreamDecl, StreamStats

SMARTPLUG_SCHEMA: dict[str, str] = {
    "id": "BIGINT",
    "ts": "TIMESTAMP",
    "value": "DOUBLE",
    "property": "INT",  # 0 = work (kWh), 1 = load (W)
    "plug_id": "INT",
    "household_id": "INT",
    "house_id": "INT",
}
#: A plug is identified by (house_id, household_id, plug_id).
PLUG_KEYS: tuple[str, ...] = ("house_id", "household_id", "plug_id")
HOUSEHOLD_KEYS: tuple[str, ...] = ("house_id", "household_id")
#: The original data set: 40 houses, 2,125 plugs, about 2,000 tuples/s.
DEFAULT_PLUGS = 2125


def smartplug_stream(
    rate: float = 2000.0, plugs: int = DEFAULT_PLUGS, houses: int = 40, name: str = "smartplug"
) -> StreamDecl:
    """The smart-plug stream with statistics for `plugs` plugs at `rate` tuples/s.

    Example:
        >>> smartplug_stream(rate=4000).stats.rate_tps
        4000.0
    """
    houses = max(1, min(houses, plugs))
    households = max(houses, math.ceil(plugs / 5))
    return StreamDecl(
        name=name,
        schema=SMARTPLUG_SCHEMA,
        domains={"property": [0, 1]},
        stats=StreamStats(
            rate_tps=rate,
            distinct={"property": 2, "house_id": houses},
            groups={
                ",".join(sorted(PLUG_KEYS)): plugs,
                ",".join(sorted(HOUSEHOLD_KEYS)): households,
            },
            value_fractions={"property": {"0": 0.5, "1": 0.5}},
        ),
    )
