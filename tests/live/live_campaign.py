"""The live-reading campaign (issue 12): one writer process, several reader processes.

The writer appends frames of known content (a function of the frame index) with an
automatic commit after every frame, a durable ``flush()`` every 10 frames, a topology
change (bonds restated), a cell change, and numbering that stops being a progression
(the ``step`` array is born mid-run); it records when each commit returned, then closes
(the status says ``succeeded``).  Each reader ``refresh()``-es, reads the newest frame and
a few random committed ones, one by one and as one ``read_frames`` batch, and every few
refreshes iterates the newest frames (``iter_frames``: views); it compares each with what
the writer appended, bit for bit, until the run is over, then reads the whole run the three
ways; it records when each frame first became visible.  Odd readers keep a small chunk
cache (evictions and re-reads while the writer appends; issue 21).

Reported: reads per second, the lag between a commit and its visibility to a reader
(median, p99), wrong frames and errors that are not ``MolrecError`` (both must be 0), and
library errors (a read that failed after its bounded retries).  Shared by
``tests/live/test_live_campaign.py`` (3 s) and ``bench/live.py`` (≥ 20 s).

    python live_campaign.py writer PATH SECONDS INTERVAL OUT
    python live_campaign.py reader PATH SECONDS SEED OUT
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

import molrec_raw as mr
from molrec_raw.errors import MolrecError
from molrec_raw.record.live import FINISHED_STATES
from molrec_raw.record.trajectory.chunk_cache import DEFAULT_CACHE_BYTES

ATOMS = 64
TOPOLOGY_EVERY = 150  # bonds restated (one bond fewer or more) every this many frames
CELL_EVERY = 100  # the cell changes every this many frames
STEPS_BREAK = 300  # numbering stops being a progression here (the step array is born)
DURABLE_EVERY = 10
RANDOM_READS = 4  # random committed frames read per refresh, beside the newest
WINDOW, WINDOW_EVERY = 40, 10  # the newest frames iterated every this many refreshes
SMALL_CACHE = 256 * 1024  # the chunk cache of odd readers: a few chunks, evicted all the time


def step_of(i: int) -> int:
    return 10 * i if i < STEPS_BREAK else 10 * i + 5


def time_of(i: int) -> float:
    return 0.002 * i


def _bonds(version: int) -> mr.Block:
    n = ATOMS // 2 - (version % 2)
    return mr.Block({"atomi": np.arange(0, 2 * n, 2, dtype=np.uint64),
                     "atomj": np.arange(1, 2 * n, 2, dtype=np.uint64)})


def _cell(i: int) -> mr.Box:
    return mr.Box(np.eye(3) * (20.0 + (i // CELL_EVERY) % 3))


def appended(i: int) -> mr.Frame:
    """Frame i as the writer appends it: bonds only when their version changes."""
    x, y, z = np.random.default_rng(i).normal(size=(3, ATOMS))
    blocks = {"atoms": mr.Block({"x": x, "y": y, "z": z})}
    if i % TOPOLOGY_EVERY == 0:
        blocks["bonds"] = _bonds(i // TOPOLOGY_EVERY)
    return mr.Frame({"pe": -0.5 * i, "temp": 300.0 + i % 7}, blocks, _cell(i))


def expected(i: int) -> mr.Frame:
    """Frame i as a reader must resolve it (bonds carried forward)."""
    f = appended(i)
    f.blocks["bonds"] = _bonds(i // TOPOLOGY_EVERY)
    return f


def schema() -> mr.SequenceSchema:
    return mr.SequenceSchema.from_frames([appended(0)])


def same(got: mr.Frame, want: mr.Frame) -> bool:
    """Bitwise equality of blocks, cell and meta."""
    if list(got.blocks) != list(want.blocks) or got.meta != want.meta or got.box != want.box:
        return False
    for name, block in want.blocks.items():
        other = got.blocks[name]
        if list(other.columns) != list(block.columns):
            return False
        for c, values in block.columns.items():
            a, b = np.asarray(other.columns[c]), np.asarray(values)
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                return False
    return True


# ---------------------------------------------------------------- the processes
def write(path: Path, seconds: float, interval: float, out: Path) -> None:
    """Append until ``seconds`` passed (one frame every ``interval`` s at most), recording
    when each commit returned (monotonic clock: shared by the processes of one machine)."""
    commits: List[float] = []
    w = mr.MrecWriter(path, schema(), flush_every=1)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end or i < STEPS_BREAK + 2 * DURABLE_EVERY:  # every change happens
        started = time.monotonic()
        w.append(appended(i), step=step_of(i), time=time_of(i))  # an automatic commit
        commits.append(time.monotonic())
        i += 1
        if i % DURABLE_EVERY == 0:
            w.flush()  # durable: sync + checkpoint
        pause = interval - (time.monotonic() - started)
        if pause > 0:
            time.sleep(pause)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"commits": commits}))
    os.replace(tmp, out)
    w.close()  # status: succeeded, after the last commit


def read(path: Path, seconds: float, seed: int, out: Path) -> None:
    """Follow the run until its status says it is over (or ``seconds`` + a margin)."""
    rnd = random.Random(seed)
    report: Dict[str, Any] = {"reads": 0, "refreshes": 0, "wrong": [], "library_errors": [],
                              "other_errors": [], "first_seen": [], "first_index": None, "saw_end": False,
                              "final_nstep": 0}
    deadline = time.monotonic() + seconds + 120.0
    while not path.joinpath("trajectory", "zarr.json").exists():  # the writer is creating it
        if time.monotonic() > deadline:
            raise SystemExit("the record never appeared")
        time.sleep(0.01)
    # odd readers keep a small chunk cache, so that evictions and re-reads happen while the
    # writer appends (issue 21: caches never serve stale data)
    reader = mr.MrecReader(path, cache_bytes=SMALL_CACHE if seed % 2 else DEFAULT_CACHE_BYTES)
    started = time.monotonic()
    seen = None  # frames visible at the last refresh
    steps: List[int] = []
    times: List[float] = []

    def compare(i: int, frame: mr.Frame) -> None:
        report["reads"] += 1
        if not same(frame, expected(i)) or steps[i] != step_of(i) or times[i] != time_of(i):
            report["wrong"].append(i)

    def guarded(what: str, read: Any) -> None:
        try:
            read()
        except MolrecError as exc:
            report["library_errors"].append(f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - counted: the campaign's point
            report["other_errors"].append(f"{what}: {type(exc).__name__}: {exc}")

    def check(i: int) -> None:
        guarded(f"frame {i}", lambda: compare(i, reader.read_frame(i)))

    def check_batch(indices: List[int]) -> None:  # one planned read (read_frames)
        guarded(f"frames {indices}", lambda: [compare(i, f) for i, f in zip(indices, reader.read_frames(indices))])

    def check_window(lo: int, hi: int) -> None:  # views through the iterator
        guarded(f"frames {lo}:{hi}", lambda: [compare(i, f) for i, f in zip(range(lo, hi), reader.iter_frames(lo, hi))])

    while time.monotonic() < deadline:
        over = (reader.run_status() or {}).get("state") in FINISHED_STATES  # read before the refresh
        try:
            n = reader.refresh()
            report["refreshes"] += 1
        except MolrecError as exc:
            report["library_errors"].append(f"refresh: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001
            report["other_errors"].append(f"refresh: {type(exc).__name__}: {exc}")
            continue
        now = time.monotonic()
        if seen is None:  # frames committed before this reader started are not lag samples
            report["first_index"] = n
        else:
            report["first_seen"].extend([now] * (n - seen))
        seen = n if seen is None else max(seen, n)
        steps, times = reader.step, reader.time or []
        if n:
            check(n - 1)
            for _ in range(RANDOM_READS):
                check(rnd.randrange(n))
            check_batch([n - 1] + [rnd.randrange(n) for _ in range(RANDOM_READS)] + [n - 1])
            if report["refreshes"] % WINDOW_EVERY == 0:
                check_window(max(0, n - WINDOW), n)
        if over:
            for i in range(n):  # the whole run, once, at the end: frame by frame, in a batch, iterated
                check(i)
            check_batch(list(range(n)))
            check_window(0, n)
            report["saw_end"], report["final_nstep"] = True, n
            break
    report["seconds"] = time.monotonic() - started
    reader.close()
    out.write_text(json.dumps(report))


# ---------------------------------------------------------------- the orchestrator
def run(work: Path, seconds: float, readers: int = 2, interval: float = 0.005, seed: int = 1) -> Dict[str, Any]:
    """One campaign in ``work``: the writer and ``readers`` reader processes; the summary."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "live.mrec"
    me = str(Path(__file__).resolve())
    env = dict(os.environ, PYTHONHASHSEED="0")
    procs = [subprocess.Popen([sys.executable, me, "writer", str(path), str(seconds), str(interval),
                               str(work / "writer.json")], env=env)]
    for k in range(readers):
        procs.append(subprocess.Popen([sys.executable, me, "reader", str(path), str(seconds), str(seed * 1000 + k),
                                       str(work / f"reader{k}.json")], env=env))
    codes = [p.wait(timeout=seconds + 300) for p in procs]
    if any(codes):
        raise RuntimeError(f"campaign process exit codes {codes}")
    commits = json.loads((work / "writer.json").read_text())["commits"]
    reports = [json.loads((work / f"reader{k}.json").read_text()) for k in range(readers)]
    lags = [seen - commits[r["first_index"] + k] for r in reports for k, seen in enumerate(r["first_seen"])
            if r["first_index"] + k < len(commits)]
    lags_ms = np.asarray(lags) * 1e3
    return {
        "frames": len(commits),
        "writer_seconds": commits[-1] - commits[0] if commits else 0.0,
        "readers": readers,
        "reads": sum(r["reads"] for r in reports),
        "reads_per_s": sum(r["reads"] / r["seconds"] for r in reports if r["seconds"] > 0),
        "refreshes_per_s": sum(r["refreshes"] / r["seconds"] for r in reports if r["seconds"] > 0),
        "lag_ms_median": float(np.median(lags_ms)) if lags else None,
        "lag_ms_p99": float(np.percentile(lags_ms, 99)) if lags else None,
        "lag_samples": len(lags),
        "wrong_frames": sum(len(r["wrong"]) for r in reports),
        "other_errors": sum(len(r["other_errors"]) for r in reports),
        "library_errors": sum(len(r["library_errors"]) for r in reports),
        "saw_end": all(r["saw_end"] for r in reports),
        "final_nstep": [r["final_nstep"] for r in reports],
        "details": [{k: r[k][:5] for k in ("wrong", "library_errors", "other_errors")} for r in reports],
    }


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    role, path, seconds = args[0], Path(args[1]), float(args[2])
    if role == "writer":
        write(path, seconds, float(args[3]), Path(args[4]))
    else:
        read(path, seconds, int(args[3]), Path(args[4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
