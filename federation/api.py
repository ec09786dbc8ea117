"""`run`: the one-call facade. Plan the query (the optimizer's choice, or a placement the
user names), then execute the physical plan (federation.runtime)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from costmodel.profile import CostProfile
from federation.errors import OutputError
from federation.logical import Rstream, Window
from federation.optimizer import plan_for
from federation.runtime import (
    RunResult,
    check_arguments,
    check_output,
    execute,
    work_directory,
)
from federation.runtime.progress import as_progress


def run(
    query: Rstream,
    placement: str | Mapping[str, str] = "auto",
    data: str | Path | None = None,
    *,
    rate: float = 2000.0,
    seconds: int = 60,
    plugs: int = 200,
    seed: int = 0,
    profile: CostProfile | None = None,
    feasibility_check: bool = True,
    work_dir: str | Path | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
    **execute_options,
) -> RunResult:
    """Run `query` under a placement ("auto", "spe", "db" or explicit) over a directory of
    event-second Parquet files; with `data=None` over smart-plug data generated at `rate`
    for `seconds` and `plugs` (the smart-plug stream only). Other options: `execute`."""
    check_arguments(rate=rate, seconds=seconds, plugs=plugs, **{
        k: v for k, v in execute_options.items()
        if k in ("seconds_per_batch", "allowed_lateness_s", "event_horizon_s")})
    why = check_output(output, overwrite)
    if why:
        raise OutputError(f"output: {why}")
    prog = execute_options["progress"] = as_progress(execute_options.get("progress"))
    prog.phase("planning")
    plan, cost = plan_for(query, placement, profile, feasibility_check)
    if data is None:
        prog.phase("generating data", total=seconds, unit="event seconds")
        data = _generated(query, Path(work_dir) if work_dir else None, rate, seconds, plugs,
                          seed, prog.advance)
    return execute(plan, data, work_dir=work_dir, output=output, overwrite=overwrite,
                   predicted=cost.vector, **execute_options)


def _generated(query: Rstream, work: Path | None, rate: float, seconds: int, plugs: int,
               seed: int, progress=None) -> Path:

    from federation.smartplug.datagen import generate

    stream = next(n for n in query.walk() if isinstance(n, Window)).stream
    if stream.name != "smartplug":
        raise ValueError(f"data: give the directory of stream {stream.name!r} (only smart-plug "
                         "data can be generated)")
    data = work_directory(work) / "data"
    generate(data, rate=rate, seconds=seconds, plugs=plugs, seed=seed, progress=progress)
    return data
