"""Shared by the safety tests (issue 23): small records, every kind of writer as one call, and
a writer held by another process (``hold_writer.py``) until the test lets it go."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import molrec_raw as mr
from molrec_raw.zarr.fileops import DelegatingFileOps, FileOps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from file_trees import files_under  # noqa: E402

HERE = Path(__file__).resolve().parent
HOLD = HERE / "hold_writer.py"
ROWS = 4


def frame(i: int) -> mr.Frame:
    return mr.Frame({}, {"atoms": mr.Block({"x": np.full(ROWS, float(i))})})


def schema() -> mr.SequenceSchema:
    return mr.SequenceSchema.from_frame(frame(0))


def system() -> mr.Frame:
    return mr.Frame({}, {"atoms": mr.Block({"mass": np.ones(ROWS)})})


def make_record(path: Path, frames: int = 6, trajectory: bool = True) -> Path:
    """A closed record: ``system/``, and (``trajectory``) ``frames`` frames, with metrics."""
    mr.write_mrec_system(path, system(), overwrite=True)
    if trajectory:
        with mr.MrecWriter(path, schema(), flush_every=2) as w:
            for i in range(frames):
                w.append(frame(i))
    with mr.MetricsWriter(path) as m:
        m.log("loss", 0.5, step=1)
    return path


def tree(path: Path) -> Dict[str, bytes]:
    """Every file under ``path`` (relative name -> bytes): what a refused writer must not change."""
    return files_under(path)


def frames_of(path: Path) -> List[float]:
    with mr.MrecReader(path) as r:
        return [float(r[i]["atoms"]["x"][0]) for i in range(len(r))]


# -- every writer, as one call that writes and finishes -------------------------------------
SECTION = {"trajectory-create": "trajectory", "trajectory-open": "trajectory", "metrics": "metrics"}
WRITERS = ["trajectory-create", "trajectory-open", "metrics", "write_mrec_frame", "write_mrec",
           "write_mrec_trajectory", "repair", "unpack", "pack-remove-source"]


def conflicts(a: str, b: str) -> bool:
    """Whether two writer kinds exclude each other: any whole-record writer excludes every
    writer; two section writers only when they write the same section."""
    sa, sb = SECTION.get(a), SECTION.get(b)
    return sa is None or sb is None or sa == sb


def start_writer(kind: str, path: Path, archive: Optional[Path] = None, fileops: Optional[FileOps] = None) -> Any:
    """Begin a writer of ``kind`` on ``path``; returns the long-lived writer (to be closed) or
    the result of a one-shot door (which has then finished)."""
    if kind == "trajectory-create":
        return mr.MrecWriter(path, schema(), fileops=fileops)
    if kind == "trajectory-open":
        return mr.MrecWriter.open(path, fileops=fileops)
    if kind == "metrics":
        return mr.MetricsWriter(path, fileops=fileops)
    if kind == "write_mrec_frame":
        return mr.write_mrec_frame(path, frame(7), system=system(), overwrite=True, fileops=fileops)
    if kind == "write_mrec":
        return mr.write_mrec(path, mr.MolRec(system=system()), overwrite=True, fileops=fileops)
    if kind == "write_mrec_trajectory":
        return mr.write_mrec_trajectory(path, [frame(i) for i in range(3)], overwrite=True, fileops=fileops)
    if kind == "repair":
        return mr.repair_mrec(path, fileops=fileops)
    if kind == "unpack":
        assert archive is not None
        return mr.unpack_mrec_zip(archive, path, overwrite=True, fileops=fileops)
    if kind == "pack-remove-source":
        return mr.pack_mrec_zip(path, remove_source=True, overwrite=True, fileops=fileops)
    raise ValueError(kind)


def finish(writer: Any) -> None:
    if isinstance(writer, (mr.MrecWriter, mr.MetricsWriter)):
        writer.close()


# -- a writer held in another process --------------------------------------------------------
class Held:
    """A writer of ``kind`` on ``path`` held by a child process: ``start()`` returns once it
    holds its lock; ``release()`` lets it finish (its exit status is returned); ``kill()``
    SIGKILLs it."""

    def __init__(self, kind: str, path: Path, archive: Optional[Path] = None) -> None:
        self.kind, self.path, self.archive = kind, path, archive
        self.proc: Optional[subprocess.Popen[str]] = None

    def start(self) -> "Held":
        args = [sys.executable, str(HOLD), self.kind, str(self.path), str(self.archive or "")]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=str(HERE))
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.kill()
            raise AssertionError(f"the holder did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def release(self) -> int:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        _, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        return self.proc.returncode

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=60)


class PauseAfterLock(DelegatingFileOps):
    """A seam that, once the writer holds an exclusive lock (its holder note written), calls
    ``pause()`` at the writer's next file call — a mutation, or the release of the lock — so
    a one-shot door stays inside its lock until ``pause`` returns."""

    def __init__(self, pause: Callable[[], None]) -> None:
        super().__init__()
        self.pause = pause
        self._armed = self._paused = False

    def _call(self, verb: str, path: str, function: Callable[..., Any], *args: Any) -> Any:
        if self._armed and not self._paused:
            self._paused = True
            self.pause()
        result = function(*args)
        if verb == "lock" and args[1]:
            self._armed = True
        return result


def in_thread(kind: str, path: Path, archive: Optional[Path] = None) -> Callable[[], None]:
    """Run a door of ``kind`` in a thread of this process, paused inside its lock; returns
    the function that lets it finish (and re-raises what it raised)."""
    held, go, done = threading.Event(), threading.Event(), []

    def pause() -> None:
        held.set()
        go.wait(60)

    def run() -> None:
        try:
            finish(start_writer(kind, path, archive, fileops=PauseAfterLock(pause)))
        except BaseException as exc:  # reported to the test by the release function
            done.append(exc)
        held.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(60)

    def release() -> None:
        go.set()
        thread.join(60)
        if done:
            raise done[0]
    return release
