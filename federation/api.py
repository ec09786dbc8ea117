"""`run`: the one-call facade. Plan the query (the optimizer's choice, or a placement the
user names), then execute the physical plan (federation.runtime)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from costmodel.profile import CostProfile
from federation.logical import Rstream, Window
from federation.optimizer import plan_for
from federation.runtime import (
    GenerateOptions,
    RunOptions,
    RunResult,
    execute,
    work_directory,
)
from federation.runtime.progress import as_progress


def run(
    query: Rstream,
    placement: str | Mapping[str, str] = "auto",
    data: str | Path | None = None,
    options: RunOptions | None = None,
    *,
    generate: GenerateOptions | None = None,
    profile: CostProfile | None = None,
    feasibility_check: bool = True,
    spark=None,
    progress=None,
    **option_values,
) -> RunResult:
    """Run `query` under a placement ("auto", "spe", "db" or explicit) over a directory of
    event-second Parquet files; with `data=None` over smart-plug data generated as
    `generate` says (GenerateOptions: rate, seconds, plugs, seed; the smart-plug stream
    only). `options` (RunOptions) or their fields as keywords, and the generation options
    as keywords too (`rate=...`), are checked before any work; a bad one raises OptionError
    naming it."""
    gen_values = {k: option_values.pop(k) for k in list(option_values)
                  if k in GenerateOptions.model_fields}
    gen = GenerateOptions.of(generate, **gen_values)
    opt = RunOptions.of(options, **option_values)
    prog = as_progress(progress)
    prog.phase("planning")
    plan, cost = plan_for(query, placement, profile, feasibility_check)
    if data is None:
        prog.phase("generating data", total=gen.seconds, unit="event seconds")
        data = _generated(query, opt.work_dir, gen, prog.advance)
    return execute(plan, data, opt, spark=spark, progress=prog, predicted=cost.vector)


def _generated(query: Rstream, work: Path | None, gen: GenerateOptions, progress=None) -> Path:

    from federation.smartplug.datagen import generate

    stream = next(n for n in query.walk() if isinstance(n, Window)).stream
    if stream.name != "smartplug":
        raise ValueError(f"data: give the directory of stream {stream.name!r} (only smart-plug "
                         "data can be generated)")
    data = work_directory(work) / "data"
    generate(data, rate=gen.rate, seconds=gen.seconds, plugs=gen.plugs, seed=gen.seed,
             progress=progress)
    return data
