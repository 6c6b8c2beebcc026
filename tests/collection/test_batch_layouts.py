"""``c.batch`` reads records grouped by layout (the payloads of records that share a pair of
system/frame layouts joined, each column one copy): it gives exactly what reading the
records one by one gives, in the order asked, and refuses every hostile value a single read
refuses, with the same rule (lmdb#L9–#L17, collection#C2/#C9)."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Callable, Dict, List

import lmdb
import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import UNITS, XYZF, hand_frame, u64be
from molrec_raw.collection.batch import _Batch
from molrec_raw.collection.transaction import _Reading
from molrec_raw.errors import MolrecError


def write_mixed(path: Path, n: int = 30) -> None:
    """Records of 1–5 atoms (five layouts), some without a system, interleaved."""
    rng = np.random.default_rng(11)
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(n):
            atoms = 1 + r % 5
            system = None if r % 7 == 3 else mr.Frame({"smiles": "C"}, {"atoms": mr.Block(
                {"element": np.array(["C", "H", "O"] * atoms, dtype=object)[:atoms], "mass": rng.normal(size=atoms)})})
            frame = mr.Frame({"pe": float(r)}, {"atoms": mr.Block({c: rng.normal(size=atoms) for c in XYZF})},
                             mr.Box(np.eye(3) * (r + 1)) if r % 2 else None)
            w.add_record(system=system, frames=[frame])


def one_by_one(c: Any, records: List[int], frame: Any) -> Dict[str, np.ndarray]:
    reading = _Reading(c._env(), False)
    try:
        return _Batch(c, records, frame)._one_by_one(reading)
    finally:
        reading.close()


@pytest.mark.parametrize("frame", [0, None])
def test_batch_by_layout_equals_reading_record_by_record(path: Path, frame: Any) -> None:
    write_mixed(path)
    c = mr.read_collection(path)
    order = [r for r in np.random.default_rng(2).permutation(len(c)).tolist() if r % 7 != 3]
    for records in (order, order[:7], [4, 4, 9], [3, 10]):  # 3 and 10 have no system
        fast, slow = c.batch(records, frame=frame), one_by_one(c, records, frame)
        assert list(fast) == list(slow) or set(fast) == set(slow)
        for name in slow:
            assert fast[name].dtype == slow[name].dtype and fast[name].shape == slow[name].shape, name
            assert np.array_equal(fast[name], slow[name]), name
    if frame is not None:  # a record without a system lacks 'element' in its atoms: both paths refuse
        for read in (c.batch, lambda records: one_by_one(c, records, 0)):
            with pytest.raises(MolrecError) as caught:
                read([4, 3])
            assert caught.value.rule == "collection#C2"
    b = c.batch([8, 1], frame=frame)
    x8 = c[8].system["atoms"]["mass"]
    assert np.array_equal(b["atoms/mass"][:len(x8)], x8) and b["n_atoms"].tolist() == [4, 2]


def _rewrite(value: bytes, change: Callable[[Dict[str, Any], bytes], Any]) -> bytes:
    """A frame-bytes value with its header changed by ``change(header, payload)`` (which may
    return other payload bytes)."""
    length = struct.unpack_from("<I", value, 4)[0]
    header = json.loads(value[8:8 + length])
    payload = value[(8 + length + 7) & ~7:]
    new = change(header, payload)
    return hand_frame(header, [(0, new if isinstance(new, bytes) else payload)])


def _cols(h: Dict[str, Any]) -> Dict[str, Any]:
    cols: Dict[str, Any] = h["blocks"]["atoms"]["columns"]
    return cols


SYSTEM_MUTATIONS = {
    "a string value short": lambda h, p: _cols(h)["element"]["values"].pop(),
    "a string value not a string": lambda h, p: _cols(h)["element"]["values"].__setitem__(0, 7),
    "a step on a system": lambda h, p: h.__setitem__("step", 3),
    "a buffer past the value": lambda h, p: p[:8],
    "an unaligned offset": lambda h, p: _cols(h)["mass"].__setitem__("offset", 4),
    "a dtype outside the set": lambda h, p: _cols(h)["mass"].__setitem__("dtype", "f16"),
}
FRAME_MUTATIONS = {
    "no step": lambda h, p: h.pop("step"),
    "a meta key missing": lambda h, p: h["meta"].pop("pe"),
    "an undeclared meta key": lambda h, p: h["meta"].__setitem__("ke", 1.0),
    "a shape that lies": lambda h, p: _cols(h)["x"].__setitem__("shape", [2]),
    "a buffer past the value": lambda h, p: p[:16],
    "a column not declared": lambda h, p: _cols(h).__setitem__("q", dict(_cols(h)["x"])),
    "meta_types on an update": lambda h, p: h.__setitem__("meta_types", {"pe": "f64"}),
}


@pytest.mark.parametrize("side,mutation", [("s", m) for m in SYSTEM_MUTATIONS] + [("f", m) for m in FRAME_MUTATIONS])
def test_batch_refuses_what_a_single_read_refuses(path: Path, side: str, mutation: str) -> None:
    write_mixed(path, n=12)
    victim = 7  # three atoms; record 2 shares its layout and is read before it in the batch
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    k = u64be(side.encode(), victim)
    with env.begin(write=True) as txn:
        change = (SYSTEM_MUTATIONS if side == "s" else FRAME_MUTATIONS)[mutation]
        txn.put(k, _rewrite(bytes(txn.get(k)), change))
    env.close()
    c = mr.read_collection(path)
    with pytest.raises(MolrecError) as single:
        c[victim].system if side == "s" else c[victim].trajectory[0]
    with pytest.raises(MolrecError) as batched:
        c.batch([2, 11, victim, 0])
    assert batched.value.rule == single.value.rule, (batched.value, single.value)
    assert isinstance(batched.value, type(single.value))
    assert str(victim) in str(batched.value)


def test_batch_and_single_reads_agree_on_randomly_mutated_values(path: Path) -> None:
    """Random byte changes, cuts and insertions in one record's system or frame value: the
    batch by layout and the record-by-record batch both refuse with a MolrecError, or both
    read the same arrays — never another exception (seeded, 60 values)."""
    import random
    write_mixed(path, n=8)
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin() as txn:
        original = {k: bytes(v) for k, v in txn.cursor() if k[:1] in (b"s", b"f")}
    env.close()
    rand = random.Random(5)
    outcomes = {"refused": 0, "read": 0}
    for _ in range(60):
        victim = rand.choice(sorted(original))
        value = bytearray(original[victim])
        for _ in range(rand.randint(1, 3)):
            at, op = rand.randrange(len(value)), rand.random()
            if op < 0.6:
                value[at] = rand.randrange(256)
            elif op < 0.8:
                del value[at:at + rand.randint(1, 16)]
            else:
                value[at:at] = bytes(rand.randrange(256) for _ in range(rand.randint(1, 8)))
        env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
        with env.begin(write=True) as txn:
            txn.put(victim, bytes(value))
        env.close()
        c = mr.read_collection(path)
        records = [r for r in range(8) if r % 7 != 3]
        rand.shuffle(records)
        got = []
        for read in (lambda: c.batch(records), lambda: one_by_one(c, records, 0)):
            try:
                got.append(read())
            except MolrecError:
                got.append(None)
        c.close()
        fast, slow = got
        assert (fast is None) == (slow is None), victim
        if fast is None:
            outcomes["refused"] += 1
        else:
            assert fast.keys() == slow.keys() and all(np.array_equal(fast[k], slow[k]) for k in fast), victim
            outcomes["read"] += 1
        env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
        with env.begin(write=True) as txn:
            txn.put(victim, original[victim])
        env.close()
    assert outcomes["refused"] > 0
