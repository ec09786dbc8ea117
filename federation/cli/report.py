"""What `fedq run` prints after a run: the summary, or an adaptive run's segments. The
results are written before any of it (federation/runtime/execute.py)."""

from __future__ import annotations

from pathlib import Path


def print_summary(r, as_json: bool = False, console: bool = False) -> None:
    """The summary of a run: its rows (a few), placement, rates, dead letters, where the
    results are, and what of the report failed."""
    s = r.summary
    if as_json:
        print(s.model_dump_json(indent=2))
        return
    if r.results is not None:  # several queries: each one's rows
        print("\n".join(f"{n}: {t.num_rows} result rows" for n, t in r.results.items()))
    elif r.rows is not None and not console:  # the console sink printed them as they came
        print(r.rows.slice(0, 5).to_pandas().to_string(index=False) if r.rows.num_rows else
              "(no result rows)")
    print(f"query {s.query}  placement {s.placement}  DB-ops {s.db_ops or 'none'}")
    if s.spe_capacity:
        print(f"planned for Spark's {s.spe_capacity}")
    print(f"result rows {s.result_rows}  event seconds {s.event_seconds}  "
          f"wall {s.wall_s:.1f}s  achieved {s.achieved_rate_tps:.0f} tuples/s  "
          f"rho {s.rho:.2f} (steady {s.rho_steady:.2f})")
    print(f"dead-lettered rows {s.dead_lettered} {s.dead_by_reason or ''}")
    if s.files_quarantined:
        print(f"quarantined files {len(s.files_quarantined)}: " + "; ".join(
            f"{q['file']}: {q['reason']}" for q in s.files_quarantined))
    if Path(s.deadletter_dir).exists():
        print(f"dead letters in {s.deadletter_dir}")
    if s.output:
        print(f"results written to {s.output}")
    for w in s.warnings:  # what of the report failed (the results above are complete)
        print(f"warning: {w}")


def print_adaptive(r) -> None:
    """An adaptive run's segments, their decisions and the migrations' gaps."""
    print(f"{len(r.segments)} segment(s), {r.migrations} migration(s):")
    print(f"{'segment':<8} {'from':<20} {'placement':<50} {'started by':<10} {'instants':>8} "
          f"{'warm-up s':>9} {'wall s':>7} {'rho':>6} {'gap s':>6}")
    for k, sr in enumerate(r.segments):
        gap = r.gaps_s[k - 1] if k else None
        how = sr.strategy.split(" ")[0]
        start = "start" if sr.segment.start_at is None else str(sr.segment.start_at)
        print(f"{k + 1:<8} {start:<20} {sr.segment.placement:<50} {how:<10} "
              f"{sr.result_rows:>8} {sr.warmup_seconds:>9} {sr.wall_s:>7.1f} {sr.rho:>6.2f} "
              f"{'-' if gap is None else f'{gap:.1f}':>6}")
        if k:
            print(f"         why: {sr.segment.reason}")
            old = r.segments[k - 1]
            if gap is not None and old.tail_s is not None and sr.first_after_s is not None:
                print(f"         gap: {old.tail_s:.1f} s from the old placement's last result "
                      f"to its end, {sr.first_after_s:.1f} s from there to this one's first"
                      + (f" (it started {sr.overlap_s:.1f} s before)" if sr.overlap_s
                         else ""))
            if sr.strategy.startswith("replay ("):
                print(f"         {sr.strategy}")
    n = sum(t.num_rows for t in r.results.values()) if r.results else \
        r.rows.num_rows if r.rows is not None else sum(s.result_rows for s in r.segments)
    print(f"result rows {n}  wall {r.wall_s:.1f}s  migrations {r.migrations}  "
          f"decisions {sum(len(s.decisions) for s in r.segments)}")
    if r.halted:
        print("halted: the same command resumes the run where it stopped")
    if r.dead_lettered or r.quarantined:
        why = ", ".join(f"{k}: {n}" for k, n in sorted(r.dead_by_reason.items()))
        print(f"dead-lettered {r.dead_lettered} row(s)" + (f" ({why})" if why else "")
              + (f", {len(r.quarantined)} unreadable file(s)" if r.quarantined else "")
              + f"; kept in {r.deadletter_dir}")
