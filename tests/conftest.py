"""Fixtures shared by every test directory."""
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw import MrecWriter, SequenceSchema
from molrec_raw.zarr import MemoryStore


@pytest.fixture
def memstore():
    return MemoryStore()


def coordinates_schema(rows: int) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms", rows=rows)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
    return schema


def coordinates(i: int, rows: int) -> mr.Frame:
    rng = np.random.default_rng(i)
    x, y, z = rng.normal(size=(3, rows)) + i
    return mr.Frame({}, {"atoms": mr.Block({"x": x, "y": y, "z": z})}, mr.Box(np.eye(3) * 20.0))


def _write_coordinates(path: Path, frames: int, rows: int, flush_every: Optional[int] = None) -> Path:
    """A trajectory of ``frames`` frames of ``rows`` atoms (x, y, z), fixed cell."""
    with MrecWriter(path, coordinates_schema(rows), flush_every=flush_every, durable=False) as w:
        for i in range(frames):
            w.append(coordinates(i, rows), step=10 * i, time=0.5 * i)
    return path


@pytest.fixture(scope="session")
def write_coordinates():
    """``write_coordinates(path, frames, rows, flush_every=None)``: a trajectory of x, y, z."""
    return _write_coordinates


# A test whose subject is fork itself (a reader carried into a fork child, lmdb#L1; checkers
# sharing the states of a power-cut campaign copy-on-write) forks on purpose.  Python 3.12 warns
# on any fork of a process that has threads (the suite's process does: zarr-python's event loop,
# thread pools of earlier tests), because a lock held by another thread stays held in the child.
# Those children only read and leave with os._exit or end with their pool; the warning is
# filtered for the tests marked ``forks`` alone, every other fork still warns.
FORK_WARNING = r"ignore:This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks:DeprecationWarning"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("forks") is not None:
            item.add_marker(pytest.mark.filterwarnings(FORK_WARNING))


# The peers' objects (molrs, molpy: PyO3 classes marked "unsendable") must be dropped on the
# thread that made them; one left in a reference cycle is otherwise freed by whichever thread
# next triggers a collection — a later test's HTTP server thread — and PyO3 raises there.  After
# the last test of a module that uses a peer, its garbage is collected on the main thread.
_PEERS = ("molrs", "molpy")
_USES_PEER: dict = {}


def _uses_peer(module) -> bool:
    path = getattr(module, "__file__", None)
    if path not in _USES_PEER:
        try:
            text = open(path, encoding="utf-8").read() if path else ""
        except OSError:
            text = ""
        _USES_PEER[path] = any(name in text for name in _PEERS)
    return _USES_PEER[path]


def pytest_runtest_teardown(item, nextitem):
    module = getattr(item, "module", None)
    if module is None or (nextitem is not None and getattr(nextitem, "module", None) is module):
        return
    if _uses_peer(module):
        import gc
        gc.collect()


# Many tests run the package in child processes (the CLI, crash and fault campaigns, the docs'
# examples).  With PYTHONDONTWRITEBYTECODE=1 in the environment each child compiled every module
# it imported again (~1.7 s of CPU for the collection reader, the trajectory and zarr layers and
# the CLI, against 0.5 s from bytecode; issue 36).  For the run alone the bytecode goes to a
# private temporary cache (PYTHONPYCACHEPREFIX): the source tree still gets no __pycache__, and
# the xdist workers and every child compile each module once.  Set before the workers start.
_PYCACHE: dict = {}


def pytest_configure(config):
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        _PYCACHE["dir"] = tempfile.mkdtemp(prefix="molrec-tests-pycache-")
        os.environ.pop("PYTHONDONTWRITEBYTECODE")
        os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE["dir"]


def pytest_unconfigure(config):
    if "dir" in _PYCACHE:
        shutil.rmtree(_PYCACHE.pop("dir"), ignore_errors=True)
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
