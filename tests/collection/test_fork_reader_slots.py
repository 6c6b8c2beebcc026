"""A reader that has read before ``fork`` keeps reading in the parent after a child opened the
file and read it (lmdb#L1: each process its own environment).  py-lmdb ends an environment's
cached spare read transaction when the child frees the inherited object, which released the
parent's reader slot in the shared lock table; the child's own environment then took that
slot and the parent's next read failed with MDB_BAD_RSLOT (found by a DataLoader whose
persistent workers read while the parent went on).  Readers keep no spare transaction."""
from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

import molrec_raw as mr
from collection_helpers import UNITS, molecule


@pytest.mark.forks
def test_lmdb_L1_the_parent_reads_on_after_a_forked_child_read(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(6):
            w.add_record(**molecule(r))
    c = mr.read_collection(path)
    expected = c[3].trajectory[0].meta["pe"]
    c.batch([0, 1])  # the parent's environment has read (and ended) transactions before forking
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            own = mr.read_collection(path)  # the child's own environment
            own[1].system
            c[2].system  # the inherited reader reopens the file here
            gc.collect()  # the inherited environment object is freed
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    for _ in range(3):
        assert c[3].trajectory[0].meta["pe"] == expected
        assert c.batch([3, 4])["pe"][0] == expected
