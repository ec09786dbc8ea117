"""What a run that fails because of something around it says (errors.RunFailed): a full
disk, a read-only directory, a sink that refuses rows, an input that cannot be read. Such
a failure stops the run where a crash would (the micro-batch in progress is not
committed), so the same command resumes once the cause is mended; the message names the
cause as the handler met it (the sink, the file, the errno), not as Spark wrapped it.

Any other error (a defect) is raised as it is, with its traceback.
"""

from __future__ import annotations

from pathlib import Path

from federation.errors import RunFailed, SinkFailed

#: an error Spark wraps (a JVM-side write of its checkpoint) is recognised by its text
AROUND_THE_RUN = ("No space left on device", "Read-only file system", "Disk quota exceeded")


def around_the_run(e: BaseException) -> bool:
    """Whether `e` comes from around the run (module doc), not from the run itself."""
    if isinstance(e, (OSError, SinkFailed)):
        return True
    if type(e).__module__.startswith("duckdb") and type(e).__name__ == "IOException":
        return True  # DuckDB could not write its state file
    return any(t in str(e) for t in AROUND_THE_RUN)


def run_failed(e: BaseException, ex, work: Path, reading: bool = False) -> RunFailed | None:
    """The RunFailed that `e`, raised while the run `ex` (microbatch.Execution) drove its
    micro-batches, stands for; None for an error that is not from around the run. The
    cause is the one a micro-batch's handler met (ex.failure), else `e` itself (`reading`:
    the follower's, which reads the input into the spool; else Spark's own writes)."""
    f = ex.failure
    cause = f.error if f is not None else e
    if not around_the_run(cause):
        return None
    at = None if f is None else f"stage {f.stage}, micro-batch {f.batch}"
    if isinstance(cause, SinkFailed):
        text = str(cause)
    elif isinstance(cause, OSError):
        text = f"{type(cause).__name__}: {cause}"
    else:
        lines = str(cause).strip().splitlines() or [repr(cause)]
        text = next((ln.strip() for ln in lines if any(t in ln for t in AROUND_THE_RUN)),
                    lines[0])[:400]
    return RunFailed(f"reading the input: {text}" if reading and f is None else text, work, at)
