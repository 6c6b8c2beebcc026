"""``python hold_writer.py KIND PATH [ARCHIVE]``: begin a writer of KIND on PATH, print
``ready <pid>`` once it holds its lock, wait for a line on stdin, then finish it and exit 0.
A long-lived writer (MrecWriter, MetricsWriter) is held between its creation and its close; a
one-shot door is held inside its lock (its seam pauses right after taking it)."""
from __future__ import annotations

import os
import sys

from safety_helpers import PauseAfterLock, finish, start_writer


def main() -> int:
    kind, path = sys.argv[1], sys.argv[2]
    archive = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None

    def pause() -> None:
        print(f"ready {os.getpid()}", flush=True)
        sys.stdin.readline()

    if kind in ("trajectory-create", "trajectory-open", "metrics"):
        writer = start_writer(kind, path, archive)  # type: ignore[arg-type]
        pause()
        if kind.startswith("trajectory"):
            writer.append(start_frame())
        finish(writer)
    else:
        finish(start_writer(kind, path, archive, fileops=PauseAfterLock(pause)))  # type: ignore[arg-type]
    print("done", flush=True)
    return 0


def start_frame():  # type: ignore[no-untyped-def]
    from safety_helpers import frame

    return frame(100)


if __name__ == "__main__":
    raise SystemExit(main())
