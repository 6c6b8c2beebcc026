"""A collection whose file has random bytes changed (lmdb#L1): every failure of a read —
opening, ``c[r]`` (meta, system, every frame), ``c.batch``, a view, and the inspection doors
(``validate_collection``, ``explain_key``, ``describe``) — is a MolrecError naming
the file, never py-lmdb's own ``CorruptedError``/``PageNotFoundError`` (issue 28).  Seeded
and bounded: the same mutations every run."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Dict

import pytest

import molrec_raw as mr
from molrec_raw.errors import CorruptDataError, MolrecError

from collection_helpers import UNITS, molecule, xyzf_schema

MUTATIONS = 240  # files, each with 1 to 8 bytes changed: the default run reads the first
SUITE_MUTATIONS = 80  # of them, the campaign (-m campaign) the rest (issue 36: the suite's time)
SEED = 0


def _read_all(path: Path) -> None:
    from molrec_raw.collection.inspection import describe, explain_key, validate_collection

    validate_collection(path)  # the inspection doors read the file by keys too
    explain_key(path)
    describe(path)
    with mr.read_collection(path) as c:
        for r in range(len(c)):
            rec = c[r]
            rec.meta
            rec.system
            for k in range(rec.n_frames):
                rec.frame(k)
            if rec.trajectory is not None:
                list(rec.trajectory)
        c.batch(list(range(len(c))))
        with c.view() as v:
            v.batch(list(range(len(v))), frame=-1)


@pytest.mark.parametrize("share", ["suite", pytest.param("campaign", marks=pytest.mark.campaign)])
def test_lmdb_L1_random_byte_damage_is_a_molrec_error_naming_the_file(tmp_path: Path, share: str) -> None:
    import lmdb

    base = tmp_path / "base.mrec.lmdb"
    with mr.CollectionWriter(base, units=UNITS, schema=xyzf_schema()) as w:
        for r in range(60):
            w.add_record(**molecule(r, n=4, frames=2))
    _read_all(base)  # intact: reads whole
    pristine = base.read_bytes()
    rng = random.Random(SEED)
    edits = [[(rng.randrange(len(pristine)), rng.randrange(256)) for _ in range(rng.randint(1, 8))]
             for _ in range(MUTATIONS)]  # drawn alike in both shares: each reads its own part
    trials = range(SUITE_MUTATIONS) if share == "suite" else range(SUITE_MUTATIONS, MUTATIONS)
    outcome: Dict[str, int] = {"read": 0, "refused": 0}
    for trial in trials:
        data = bytearray(pristine)
        for at, value in edits[trial]:
            data[at] = value
        path = tmp_path / f"t{trial}.mrec.lmdb"
        path.write_bytes(bytes(data))
        try:
            _read_all(path)
        except MolrecError as exc:
            assert str(path) in str(exc), f"trial {trial}: {exc}"
            outcome["refused"] += 1
        except lmdb.Error as exc:  # pragma: no cover - what the test exists to catch
            pytest.fail(f"trial {trial}: py-lmdb's own {type(exc).__name__} escaped: {exc}")
        else:
            outcome["read"] += 1
        path.unlink()
        Path(f"{path}-lock").unlink(missing_ok=True)
    assert outcome["refused"] > len(trials) // 2 and outcome["read"] > 0, outcome


def test_lmdb_L1_read_failure_names_the_file_and_the_damage() -> None:
    import lmdb

    from molrec_raw.collection.binding import read_failure

    damaged = read_failure(lmdb.CorruptedError("mdb_get: MDB_CORRUPTED: Located page was wrong type"), "/d/c.mrec.lmdb")
    assert isinstance(damaged, CorruptDataError) and damaged.store == "/d/c.mrec.lmdb"
    assert damaged.rule == "lmdb#L1" and "MDB_CORRUPTED" in damaged.message
    other = read_failure(lmdb.ReadersFullError("mdb_txn_begin: MDB_READERS_FULL"), "/d/c.mrec.lmdb")
    assert isinstance(other, MolrecError) and not isinstance(other, CorruptDataError) and "/d/c.mrec.lmdb" in str(other)
