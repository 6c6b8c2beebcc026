"""Shared builders for the trajectory tests."""
from __future__ import annotations

import numpy as np

from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.trajectory import MrecWriter
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import DirectoryStore, open_group


class CountingStore(DirectoryStore):
    """A read-only directory store that records every read as (key, range or None); a
    ``get_ranges`` batch counts as one read."""

    def __init__(self, root):
        super().__init__(root, read_only=True)
        self.reads = []

    def get(self, key):
        self.reads.append((key, None))
        return super().get(key)

    def get_range(self, key, start, length=None):
        self.reads.append((key, (start, length)))
        return super().get_range(key, start, length)

    def get_ranges(self, key, ranges):
        """One recorded read for the whole batch: (key, (first start, total length))."""
        self.reads.append((key, (ranges[0][0], sum(n for _, n in ranges))))
        return [DirectoryStore.get_range(self, key, start, length) for start, length in ranges]


def atoms(x, **extra):
    x = np.asarray(x, dtype=np.float64)
    return Block({"x": x, **extra})


def frame(**blocks):
    return Frame(blocks=dict(blocks))


def ragged(i, rows):
    return frame(atoms=atoms(np.arange(rows, dtype=float) + 100.0 * i))


def same_frame(a: Frame, b: Frame) -> bool:
    """Bitwise equality of blocks, columns and masks (None mask == all-true)."""
    if list(a.blocks) != list(b.blocks):
        return False
    for name, ba in a.blocks.items():
        bb = b.blocks[name]
        if ba.nrows != bb.nrows or list(ba.columns) != list(bb.columns):
            return False
        for c, x in ba.columns.items():
            y = bb.columns[c]
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype != y.dtype or x.shape != y.shape:
                return False
            if x.dtype == object:
                if x.tolist() != y.tolist():
                    return False
            elif x.tobytes() != y.tobytes():
                return False
        for c in set(ba.masks) | set(bb.masks):
            ma = ba.masks.get(c, np.ones(ba.nrows, bool))
            mb = bb.masks.get(c, np.ones(bb.nrows, bool))
            if not np.array_equal(ma, mb):
                return False
    return True


# ---------------------------------------------------------------- crash-test content
def crash_step(i):
    return 3 * i if i < 40 else 3 * i + 7  # the numbering stops being a progression at 40


def crash_time(i):
    return 0.5 * i


def _crash_bonds(i):
    k = i // 3
    n = k % 4
    return Block({"atomi": np.arange(n, dtype=np.uint64) + k,
                  "style": np.array([f"s{k}-{j}" for j in range(n)], dtype=object)})


def crash_frame(i):
    """Frame i as the crash-test child appends it (reproducible, seeded by i)."""
    rng = np.random.default_rng(i)
    rows = (i * 7) % 6
    charge = rng.normal(size=rows)
    masks = {}
    if i % 4 == 1 and rows:
        m = np.ones(rows, bool)
        m[0] = False
        masks["charge"] = m
    blocks = {"atoms": Block({"pos": rng.normal(size=(rows, 3)), "charge": charge}, masks=masks)}
    if i % 2 == 0:
        blocks["bonds"] = _crash_bonds(i)
    # regular (2 rows, every frame) until 30, then 3 rows: the one-way switch to the index
    blocks["grid"] = Block({"g": rng.normal(size=2 if i < 30 else 3)})
    meta = {"pe": float(rng.normal())}
    if i % 3:
        meta["temp"] = 300.0 + i
    box = None
    if i >= 2 and i % 11 != 5:  # first cell at ordinal 2 (arrays), changing every 7 frames, carried otherwise
        box = Box(np.eye(3) * (10.0 + i // 7), np.zeros(3) if i < 20 else np.full(3, 0.5))
    return Frame(meta=meta, blocks=blocks, box=box)


def crash_expected(i):
    """What a reader resolves at ordinal i: omitted bonds carry forward."""
    f = crash_frame(i)
    bonds = f.blocks.get("bonds", _crash_bonds(i - 1) if i > 0 else None)
    f.blocks = {"atoms": f.blocks["atoms"], **({"bonds": bonds} if bonds is not None else {}),
                "grid": f.blocks["grid"]}
    if "temp" not in f.meta:
        f.meta["temp"] = -1.0
    if f.box is None and i >= 2:
        f.box = crash_frame(i - 1).box
    return f


def crash_schema():
    from molrec_raw.record.trajectory.schema import SequenceSchema
    s = SequenceSchema().declare_block("atoms", rows=5).declare_column("atoms", "pos", "f64", [3])
    s.declare_column("atoms", "charge", "f64").declare_nullable("atoms", "charge")
    s.declare_column("bonds", "atomi", "u64").declare_column("bonds", "style", "string")
    s.declare_block("grid", rows=2).declare_column("grid", "g", "f64")
    s.declare_meta("pe", "f64").declare_meta_with_fill("temp", -1.0)
    return s


def rule(n):
    return f"trajectory#{n}"


def write(path, frames, steps=None, times=None, schema=None, **kw):
    """Append ``frames`` through one writer (schema derived from the frames unless given)."""
    schema = schema or SequenceSchema.from_frames(frames)
    with MrecWriter(path, schema, **kw) as w:
        for i, f in enumerate(frames):
            w.append(f, None if steps is None else steps[i], None if times is None else times[i])
    return schema


def patch_attrs(path, node, **changes):
    """Rewrite a group's attributes; a value of ``KeyError`` deletes the key."""
    g = open_group(path, mode="r+")[node]
    attrs = dict(g.attrs)
    for k, v in changes.items():
        if v is KeyError:
            attrs.pop(k, None)
        else:
            attrs[k] = v
    g.attrs.put(attrs)
