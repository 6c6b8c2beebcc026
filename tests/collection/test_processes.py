"""Readers in many processes, each with its own environment (lmdb.md "The file"); a reader
carried across ``fork`` is reopened in the child — never shared, never closed there (closing
it would free the parent's reader slots) — and a view or a writer carried across is refused."""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import UNITS, molecule, xyzf_schema
from molrec_raw.errors import MolrecError, StoreError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")


@pytest.fixture
def written(path: Path) -> Path:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        for r in range(30):
            w.add_record(**molecule(r, n=3 + r % 5))
    return path


def digest(c: mr.CollectionReader, records: list) -> str:
    h = hashlib.sha256()
    for r in records:
        rec = c[r]
        for column in rec.frame(1).blocks["atoms"].columns.values():
            h.update(np.ascontiguousarray(column).tobytes() if column.dtype != object else repr(column.tolist()).encode())
    return h.hexdigest()


def _read_all(path: str) -> str:
    with mr.read_collection(path) as c:
        return digest(c, list(range(len(c))))


def _read_given(c: mr.CollectionReader) -> str:
    return digest(c, list(range(len(c))))


@pytest.mark.parametrize("method", ["spawn", pytest.param("fork", marks=pytest.mark.forks), "forkserver"])
def test_readers_in_many_processes_each_open_their_own_environment(written: Path, method: str) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{method} is not a start method here")
    expected = _read_all(str(written))
    context = multiprocessing.get_context(method)
    with context.Pool(3) as pool:
        by_path = pool.map(_read_all, [str(written)] * 6)
        with mr.read_collection(written) as c:  # a reader handed over (pickled as its path, or inherited)
            handed = pool.map(_read_given, [c] * 6)
    assert by_path == handed == [expected] * 6


def _child(conn: "multiprocessing.connection.Connection", c: mr.CollectionReader, view: object,
           writer: mr.CollectionWriter) -> None:
    out = {}
    try:
        out["digest"] = digest(c, list(range(len(c))))
        out["pid_of_env"] = c._handle.pid
        for name, attempt in (("view", lambda: view[0].system), ("writer", lambda: writer.add_record(**molecule(0)))):
            try:
                attempt()
                out[name] = "used"
            except StoreError as exc:
                out[name] = exc.rule
    except BaseException as exc:  # reported to the parent, which fails the test
        out["error"] = repr(exc)
    conn.send(out)
    conn.close()
    os._exit(0)


@pytest.mark.forks
def test_a_reader_carried_across_fork_is_reopened_in_the_child_never_shared(written: Path, tmp_path: Path) -> None:
    c = mr.read_collection(written)
    expected = digest(c, list(range(len(c))))
    parent_env = id(c._handle.env)  # (no reference kept: the child would inherit it)
    writer = mr.CollectionWriter(tmp_path / "w.mrec.lmdb", units=UNITS)
    with c.view() as view:
        before = view[3].trajectory[1].blocks["atoms"].columns["x"].copy()
        parent, child = multiprocessing.Pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            _child(child, c, view, writer)
        _, status = os.waitpid(pid, 0)
        got = parent.recv()
        assert os.WEXITSTATUS(status) == 0
        assert "error" not in got, got["error"]
        assert got["digest"] == expected
        assert got["pid_of_env"] == pid  # the child opened the file itself
        assert got["view"] == "lmdb#L1" and got["writer"] == "lmdb#L1"
        # the parent's environment and its open view are untouched by the child
        assert id(c._handle.env) == parent_env and c._handle.pid == os.getpid()
        assert np.array_equal(view[3].trajectory[1].blocks["atoms"].columns["x"], before)
        slots = [line.split() for line in c._handle.env.readers().splitlines()[1:]]
        mine = [slot for slot in slots if slot and slot[0] == str(os.getpid())]
        assert any(slot[-1] != "-" for slot in mine), slots  # the open view still holds its reader slot
    assert digest(c, list(range(len(c)))) == expected
    writer.add_record(**molecule(0))  # the writer still works in the process that opened it
    writer.close()
    assert len(mr.read_collection(tmp_path / "w.mrec.lmdb")) == 1


def test_without_py_lmdb_import_works_and_a_collection_names_the_extra(tmp_path: Path) -> None:
    import subprocess
    code = (
        "import sys; sys.modules['lmdb'] = None\n"
        "import molrec_raw as mr\n"
        "assert 'lmdb' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "for attempt in (lambda: mr.CollectionWriter(sys.argv[1], units={'length': 'nm'}),\n"
        "                lambda: mr.read_collection(sys.argv[1])):\n"
        "    try:\n"
        "        attempt()\n"
        "    except ImportError as exc:\n"
        "        assert \"molrec-raw[lmdb]\" in str(exc), exc\n"
        "    else:\n"
        "        raise SystemExit('no ImportError')\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.mrec.lmdb")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert not (tmp_path / "x.mrec.lmdb").exists()


def test_many_readers_while_nothing_writes_see_the_same_committed_collection(written: Path) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.starmap(_read_some, [(str(written), seed) for seed in range(4)])
    with mr.read_collection(written) as c:
        for seed, got in zip(range(4), results):
            order = np.random.default_rng(seed).permutation(len(c))[:10].tolist()
            assert got == digest(c, order)


def _read_some(path: str, seed: int) -> str:
    with mr.read_collection(path) as c:
        order = np.random.default_rng(seed).permutation(len(c))[:10].tolist()
        return digest(c, order)


def test_a_reader_whose_file_vanished_reports_it(written: Path) -> None:
    c = mr.read_collection(written)
    c.close()
    with pytest.raises(MolrecError):
        c[0].system
