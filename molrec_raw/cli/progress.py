"""The progress bar long subcommands draw on stderr."""
from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO, Optional, Type


class ProgressBar:
    """``bar(done, total)`` redraws one line on ``stream`` (stderr), at most ten times a
    second; silent when the stream is not a terminal, so pipes and logs stay clean."""

    WIDTH = 30

    def __init__(self, label: str, stream: Optional[IO[str]] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (done < total and now - self._last < 0.1):
            return
        self._last = now
        fraction = min(1.0, done / total) if total else 1.0
        filled = int(fraction * self.WIDTH)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {fraction:6.1%}")
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
