"""The fresh run that takes over a resumed run it could not continue (execute.py: Spark
refused its checkpoint, or a stage's offset log was unreadable), without handing any
instant to a sink twice or losing one.

The interrupted run's sinks (a Parquet directory, a DuckDB table, a broker's topic) hold
its results up to some instant, and a fresh run computes every instant again. So, before
the fresh run claims the work directory:

1. every result part of the interrupted run (`results/`, on disk before any sink had it)
   is handed again to its durable sinks under its own key (a key already there is skipped:
   exactly once), so each sink holds every instant up to the run's last;
2. that last instant of each query (its high-water mark) and a batch-id offset past every
   key used are written to `<work>/takeover.json`;
3. the fresh run keeps the run id (the directory and the broker's session stay its own);
   its sinks get only rows after the mark, under keys shifted by the offset.

A fresh run killed and resumed reads `takeover.json` again (the mark and the offset hold
across any number of crashes); a new run in the directory removes it. The console and an
iterator are not durable: they are not handed the parts again, and see the fresh run's
instants after the mark.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from federation.parts import atomic_write_bytes
from federation.runtime.recovery import results_dir
from federation.runtime.result import results_table
from federation.runtime.sinks import close_sinks, is_durable, open_run_sinks

TAKEOVER = "takeover.json"
_PART = re.compile(r"part-(\d+)-(\d+)\.parquet$")


@dataclass
class TakeOver:
    """What the fresh run's sinks skip: keys below `offset` are the interrupted runs', and
    each query's rows up to its mark (an ISO instant) were handed on by them."""

    offset: int = 0
    marks: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, work: Path) -> TakeOver | None:
        path = work / TAKEOVER
        if not path.exists():
            return None
        d = json.loads(path.read_text())
        return cls(int(d["offset"]), dict(d["marks"]))

    def save(self, work: Path) -> None:
        atomic_write_bytes(work / TAKEOVER, json.dumps(
            {"offset": self.offset, "marks": self.marks}, indent=2).encode())

    def wrap(self, sinks: dict[str, list]) -> dict[str, list]:
        """Each query's sinks as the fresh run hands them rows."""
        return {q: [Shifted(s, self.marks.get(q), self.offset) for s in ss]
                for q, ss in sinks.items()}


class Shifted:
    """A sink of a run that took over: rows after the mark, keys shifted by the offset."""

    def __init__(self, sink, mark: str | None, offset: int) -> None:
        self.sink, self.offset = sink, offset
        self.mark = None if mark is None else dt.datetime.fromisoformat(mark)
        self.durable = is_durable(sink)

    def put(self, key: tuple[int, int], rows: pa.Table, query: str = "") -> None:
        if self.mark is not None and rows.num_rows:
            rows = rows.filter(pc.greater(rows.column("tau"),
                                          pa.scalar(self.mark, rows.column("tau").type)))
        if rows.num_rows:
            self.sink.put((key[0], key[1] + self.offset), rows, query=query)

    def close(self) -> None:
        self.sink.close()


def take_over(opt, work: Path, rid: str, lg, columns: dict[str, list[str]]) -> TakeOver:
    """Before a fresh run replaces the interrupted run `rid` in `work` (of the queries of
    `lg`, with their result `columns`): its results handed to its sinks again, and the
    take-over saved (module doc)."""
    sinks = open_run_sinks(opt, rid, True, list(lg.tops), lg.many)
    try:
        return hand_on(work, sinks, {q: results_dir(work, q) for q in lg.tops},
                       columns, TakeOver.load(work))
    finally:
        close_sinks(sinks, opt)


def hand_on(work: Path, sinks: dict[str, list], parts: dict[str, Path],
            columns: dict[str, list[str]], before: TakeOver | None) -> TakeOver:
    """Hand every result part of the interrupted run (in `parts[q]`, per query) to its
    durable sinks again, through the take-over it ran under (`before`), and save the
    take-over of the fresh run: marks at the last instants handed on, keys past them."""
    before = before or TakeOver()
    sinks = before.wrap(sinks) if before.offset or before.marks else sinks
    marks, top = dict(before.marks), -1
    for q, directory in parts.items():
        found = sorted((int(m[1]), int(m[2]), p) for p in directory.glob("part-*.parquet")
                       if (m := _PART.search(p.name)))
        for stage, batch, path in found:
            top = max(top, batch)
            rows = results_table([pq.read_table(path)], columns[q])
            if not rows.num_rows:
                continue
            for s in (s for s in sinks.get(q, ()) if is_durable(s)):
                s.put((stage, batch), rows, query=q)
            last = pc.max(rows.column("tau")).as_py()
            if q not in marks or dt.datetime.fromisoformat(marks[q]) < last:
                marks[q] = last.isoformat()
    after = TakeOver(before.offset + top + 1, marks)
    after.save(work)
    return after
