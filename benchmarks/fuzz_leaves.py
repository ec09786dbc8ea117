"""The leaves a query draws: a time or tuple window of one of the streams, a DuckDB table, a
session window (its rows, its sessions' aggregate, a view over it).

A mixin of the fuzzer's builder (benchmarks/fuzz_builder.py): its methods draw with
`self.draw` and build with the builder's other methods."""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz_domain import (
    HOUSES,
    PLUGS,
    RATE,
    TABLE,
    Rel,
    table_db,
)
from federation.logical import table, window


class Leaves:
    """The leaves a query draws (a mixin of fuzz_builder._Builder)."""

    # -- leaves ----------------------------------------------------------------------------
    def window(self, range_s: float | None = None) -> Rel:
        d = self.draw
        # a window over the second stream now and then (a query over two streams)
        stream, name = (self.other, "s2") if self.chance(25) else (self.stream, "s")
        slide, offset = self.slide, self.offset
        if self.coarser > 1 and self.chance(50):  # a coarser grid through the query's
            slide *= self.coarser
            offset += self.slide * d(st.integers(0, self.coarser - 1))
        if range_s is not None and range_s < slide:
            slide, offset = self.slide, self.offset
        at = f", offset={offset:g}" if offset else ""
        if range_s is None and self.chance(16):
            rows = d(st.sampled_from([5, 20]))
            where = self.readings()  # the last n of the selected readings
            w = window(stream, rows=rows, slide=slide, where=where, offset=offset)
            tail = f", where={where!r}" if where else ""
            src = f"window({name}, rows={rows}, slide={slide:g}{at}{tail})"
        elif range_s is None and self.chance(15 if slide == self.slide else 40):
            # Flink's CUMULATE: size k steps (more often on a coarser grid: read between
            # its steps, held, once the query has finer instants)
            size = slide * d(st.integers(2, 5))
            w = window(stream, range=size, slide=slide, cumulate=True, offset=offset)
            src = f"window({name}, range={size:g}, slide={slide:g}{at}, cumulate=True)"
        else:
            if range_s is None:
                k = d(st.integers(1, 6))
                extra = d(st.sampled_from([0.0, 0.0, 0.5, 0.25]))  # ranges the slide won't divide
                range_s = slide * (k + extra)
            w = window(stream, range=range_s, slide=slide, offset=offset)
            src = f"window({name}, range={range_s:g}, slide={slide:g}{at})"
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts"}
        return Rel(w, src, hints)

    def at(self) -> str:
        """The window's offset in its DSL source (none where it is 0)."""
        return f", offset={self.offset:g}" if self.offset else ""

    def table(self) -> Rel:
        """The database table, often filtered, as the right side of a join."""
        t = Rel(table(TABLE, db=table_db()), f"table({TABLE!r}, db=T)",
                {"house_id": "key", "household_id": "key", "rank": "code", "tariff": "value",
                 "label": "vnum", "active": "bool"})
        if self.chance(50):
            t = self.filter(t, self.draw(st.sampled_from(["active", "rank < 3",
                                                          "tariff > 0.2"]))) or t
        return t

    def session(self) -> Rel:
        """Sessions of a stream per a key (or none) and their aggregate, or their rows for
        the operators above (the sessions closing at each instant): gaps from half to
        twice the mean time between two readings of one key, so that sessions both close
        and go on (fuzz data: RATE readings a second over PLUGS plugs in HOUSES houses)."""
        d = self.draw
        stream, name = (self.other, "s2") if self.chance(25) else (self.stream, "s")
        keys = d(st.sampled_from([[], ["plug_id"], ["house_id"], ["house_id", "plug_id"],
                                  ["household_id"]]))
        per_key = RATE / (PLUGS // HOUSES if keys == ["plug_id"] else PLUGS if "plug_id" in keys
                          else HOUSES if keys == ["house_id"] else 1)
        gap = round(d(st.sampled_from([0.5, 1.0, 2.0])) / per_key, 3)
        where = self.readings()  # the sessions of the selected readings
        part: list[str] | dict[str, str] = keys
        hints = {"value": "value", "property": "code", "house_id": "key",
                 "household_id": "key", "plug_id": "key", "id": "id", "ts": "ts",
                 "window_start": "ts", "window_end": "ts"}
        if keys and self.chance(25):  # a key computed of each reading (its last key's)
            c, k = keys[-1], self.fresh("k", keys[-1].split("_")[0])
            part = {**{x: x for x in keys[:-1]}, k: d(st.sampled_from([
                f"{c} % 2", f"{c} < 3", f"CASE WHEN {c} = 1 THEN 10 ELSE {c} END",
                f"CAST({c} AS VARCHAR)"]))}
            keys, hints[k] = list(part), "key"
        try:
            w = window(stream, gap=gap, slide=self.slide, partition_by=part, where=where,
                       offset=self.offset)
        except ValueError:  # a computed key named as a column of the stream
            return self.window()
        tail = f", where={where!r}" if where else ""
        r = Rel(w, f"window({name}, gap={gap:g}, slide={self.slide:g}{self.at()}, "
                   f"partition_by={part!r}"
                   f"{tail})", hints)
        if self.chance(30):  # read by other operators: the rows of the sessions closing at
            return self.select(r) if self.chance(50) else r  # each instant, bounds with them
        if keys and self.chance(30):  # a selection of a key below the sessions' aggregate
            r = self.filter(r, f"{keys[0]} <> 1") or r
        by = ["window_start", "window_end", *keys]
        if self.chance(30):  # a view's columns: the aggregate reads the readings' expressions
            r, by = self.session_view(r, by)
        return self.aggregate(r, keys=by) or self.window()

    def session_view(self, r: Rel, by: list[str]) -> tuple[Rel, list[str]]:
        """`r`, a session window's rows, under a projection that passes the keys `by` on
        (one maybe renamed), keeps some columns and computes some (session_fold.py)."""
        d = self.draw
        rest = [c for c in r.node.schema if c not in by]
        keep = [c for c in rest if c in d(st.lists(st.sampled_from(rest), max_size=3,
                                                   unique=True))]
        outputs: list[tuple[str, str, str]] = []
        if len(by) > 2 and self.chance(40):
            c = by[-1]
            outputs.append((self.fresh("k", c.split("_")[0]), c, r.hints[c]))
        for _ in range(d(st.integers(1, 2))):
            got = self.computed(r)
            if got is not None:
                outputs.append((self.fresh("x"), *got))
        out = self.project(r, [c for c in by if c not in {e for _, e, _ in outputs}] + keep,
                           outputs)
        if out is None:
            return r, by
        return out, [c if c in out.node.schema else outputs[0][0] for c in by]

    def readings(self) -> str | None:
        """A tuple or session window's own selection (a view's, `SELECT * FROM s WHERE
        ...`), now and then: which readings it counts."""
        if not self.chance(35):
            return None
        return self.draw(st.sampled_from(["value > 40", "property = 1",
                                          "plug_id <> 2 AND value < 90",
                                          "value IS NOT NULL AND house_id % 2 = 0"]))

    def leaf(self) -> Rel:
        if self.sessions or self.chance(9):
            return self.session()
        r = self.window()
        if self.chance(50):
            r = self.select(r)
        if self.chance(15):  # the window's rows with the database table (then often grouped
            r = self.join(r, 0, table=True)  # by one of its columns)
        return r
