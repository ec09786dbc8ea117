"""Run a command, pass its output through, and say that it is still working whenever it has
been silent for a few seconds (used by the Makefile around `pip install`, which is quiet for
long stretches; standard library only, since it runs before anything is installed).

    python3 scripts/heartbeat.py "installing into .venv" -- CMD ARGS...
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

EVERY_S = 5.0
DROP = ("WARNING: Location",)  # pip's notes on a venv inside a symlinked path


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 1:
        print(__doc__, file=sys.stderr)
        return 2
    what, cmd = argv[0], argv[2:]
    t0 = time.monotonic()
    last = [t0]
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)
            last[0] = time.monotonic()

    say(f"[    0 s] {what}")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def beat() -> None:
        while not done.wait(0.5):
            if time.monotonic() - last[0] >= EVERY_S:
                say(f"[{time.monotonic() - t0:5.0f} s] {what} ...")

    threading.Thread(target=beat, daemon=True).start()
    for line in p.stdout:
        if not line.startswith(DROP):
            say(line.rstrip("\n"))
    rc = p.wait()
    done.set()
    say(f"[{time.monotonic() - t0:5.0f} s] {what}: {'done' if rc == 0 else f'failed ({rc})'}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
