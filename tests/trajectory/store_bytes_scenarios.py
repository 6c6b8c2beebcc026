"""Fixed inputs whose stores must keep their bytes (issue 11: "the bytes a given input
produces do not change").  Each scenario writes one record (or Zarr hierarchy) through the
public API; ``digest`` hashes every file of it.  ``EXPECTED`` in test_store_bytes.py holds
the digests of the current code (print them by running this module: ``python
store_bytes_scenarios.py``), ``EXPECTED_UNALIGNED`` those of the same code without sector
alignment (test_store_bytes.py keeps the history of deliberate changes).

Only public API calls that exist on both sides; every input is generated from fixed seeds.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Callable, Dict

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecWriter, SequenceSchema, write_mrec_trajectory
from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.zarr import open_array, open_group


def digest(root: Path) -> str:
    """sha256 over every file under ``root``: its relative path, size and bytes, in path order."""
    h = hashlib.sha256()
    files = sorted(p for p in Path(root).rglob("*") if p.is_file())
    for p in files:
        data = p.read_bytes()
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def _walk(atoms: int, frames: int, seed: int, scale: float = 0.01):
    """x, y, z of a smooth random walk around random positions in a 50 Å box, per frame."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 50, size=(3, atoms))
    for i in range(frames):
        step = rng.normal(scale=scale, size=(3, atoms))
        yield {c: base[k] + step[k] + 0.001 * i for k, c in enumerate("xyz")}


def _xyz_schema(atoms: int, precision: float = 1e-3) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, precision)
    return schema


def coords(path: Path, atoms: int, frames: int, flush_every, seed: int, durable: bool = True,
           compression=None) -> None:
    """W1/W5-shaped: x/y/z on the precision grid, one append per frame."""
    with MrecWriter(path, _xyz_schema(atoms), flush_every=flush_every, durable=durable,
                    compression=compression) as w:
        for i, values in enumerate(_walk(atoms, frames, seed)):
            w.append(Frame(blocks={"atoms": Block(values)}), step=10 * i, time=0.5 * i)


def below_grid(path: Path) -> None:
    """Frames whose moves are below half the precision quantum in some frames (their rounded
    content repeats: no update, so the block switches to CSR), a lossless column that also
    repeats, and frames that really move."""
    schema = _xyz_schema(50)
    schema.declare_column("atoms", "charge", "f64")
    rng = np.random.default_rng(7)
    base = {c: np.round(rng.uniform(0, 50, 50) / 2**-10) * 2**-10 for c in "xyz"}
    with MrecWriter(path, schema, flush_every=6) as w:
        for i in range(40):
            wiggle = 1e-5 * ((i % 3) - 1) if i % 5 else 0.01 * i  # tiny most of the time
            values = {c: base[c] + wiggle for c in "xyz"}
            values["charge"] = np.full(50, 0.5 if i < 20 else -0.5)
            w.append(Frame(blocks={"atoms": Block(values)}), step=i)


def mixed(path: Path) -> None:
    """Ragged updates (a CSR switch), a nullable column with masks, strings, integers, a
    changing box, per-step meta with a fill, a time array (no progression)."""
    schema = SequenceSchema().declare_block("atoms").declare_block("bonds")
    schema.declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 1e-2)
    schema.declare_column("atoms", "vx", "f64").declare_nullable("atoms", "vx")
    schema.declare_column("atoms", "element", "string")
    schema.declare_column("atoms", "id", "u64")
    schema.declare_column("bonds", "atomi", "u64").declare_column("bonds", "atomj", "u64")
    schema.declare_meta("pe", "f64").declare_meta_with_fill("label", "none", "string")
    rng = np.random.default_rng(3)
    with MrecWriter(path, schema, flush_every=5) as w:
        for i in range(33):
            n = 8 if i < 12 else 8 + (i % 4)
            mask = np.ones(n, bool)
            mask[i % n] = i % 3 != 0
            atoms = Block({"x": rng.normal(size=n) * 10, "vx": rng.normal(size=n),
                           "element": np.array(["C", "H", "O", "N"] * 3, dtype=object)[:n],
                           "id": np.arange(n, dtype=np.uint64)}, masks={"vx": mask})
            blocks = {"atoms": atoms}
            if i % 7 == 0:
                blocks["bonds"] = Block({"atomi": np.arange(3, dtype=np.uint64),
                                         "atomj": np.arange(1, 4, dtype=np.uint64)})
            box = Box(np.eye(3) * (20.0 + (0.25 * i if i % 4 == 0 else 0)))
            meta = {"pe": float(-100 - i)}
            if i % 5 == 0:
                meta["label"] = f"frame {i}"
            time = 0.5 * i if i < 20 else 0.5 * i + 0.01 * i * i
            w.append(Frame(meta, blocks, box), step=3 * i, time=time)


def reopened(path: Path) -> None:
    """30 frames, closed; reopened, 17 more (partial chunks on both sides of the reopen)."""
    coords(path, 300, 30, 8, seed=11)
    w = MrecWriter.open(path, flush_every=5)
    for i, values in enumerate(_walk(300, 17, 12)):
        w.append(Frame(blocks={"atoms": Block(values)}), step=10 * (30 + i), time=0.5 * (30 + i))
    w.close()


def one_shot(path: Path) -> None:
    """``write_mrec_trajectory``: one commit of every frame."""
    frames = [Frame({"pe": mr.MetaValue("f64", float(i))}, {"atoms": Block(v, precision={c: 1e-3 for c in "xyz"})})
              for i, v in enumerate(_walk(120, 25, 5))]
    write_mrec_trajectory(path, frames, steps=[2 * i for i in range(25)])


def frame_record(path: Path) -> None:
    """``write_mrec_frame``: a single frame (bulk Zarr-layer writes of the record layer)."""
    rng = np.random.default_rng(9)
    atoms = Block({"x": rng.normal(size=5000), "y": rng.normal(size=5000),
                   "element": np.array(["C"] * 5000, dtype=object), "id": np.arange(5000, dtype=np.uint64)},
                  precision={"x": 1e-3})
    mr.write_mrec_frame(path, Frame({"title": "bytes"}, {"atoms": atoms}, Box(np.eye(3) * 9.0)))


def zarr_layer(path: Path) -> None:
    """Zarr-layer writes: shuffle + zstd, zstd alone, gzip, nested shards, transpose,
    unsharded multi-chunk, all-fill chunks (deleted), a partial overwrite, positional land."""
    rng = np.random.default_rng(13)
    root = open_group(path, mode="w")
    walk = np.round(np.cumsum(rng.normal(scale=0.01, size=3 * 2**16)) / 2**-10) * 2**-10
    chains = {
        "shuffle": [{"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                    {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}],
        "plain": [{"name": "bytes", "configuration": {"endian": "little"}},
                  {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}],
        "gzip": [{"name": "bytes", "configuration": {"endian": "little"}},
                 {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}],
    }
    for name, chain in chains.items():
        a = root.create_array(name, shape=walk.shape, dtype="float64", chunks=(2**13,), shards=(2**15,), codecs=chain)
        a[...] = walk
        a[1000:1100] = 0.0  # a partial rewrite
        a[2**15:2**15 + 2**13] = 0.0  # an inner chunk of fill values: not stored
    nested = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [64, 4], "codecs": chains["shuffle"]}}]
    b = root.create_array("nested", shape=(512, 12), dtype="float64", chunks=(128, 12), shards=(256, 12),
                          codecs=nested)
    b[...] = walk[:512 * 12].reshape(512, 12)
    t = root.create_array("transposed", shape=(40, 30), dtype="int32", chunks=(16, 8),
                          codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}},
                                  {"name": "bytes", "configuration": {"endian": "big"}},
                                  {"name": "zstd", "configuration": {"level": 1, "checksum": True}}])
    t[...] = rng.integers(-1000, 1000, size=(40, 30))
    u = root.create_array("unsharded", shape=(1000, 3), dtype="float64", chunks=(100, 3), codecs=chains["shuffle"])
    u[...] = walk[:3000].reshape(1000, 3)
    p = root.create_array("positional", shape=(0, 2), dtype="float64", chunks=(50, 2), shards=(500, 2),
                          codecs=chains["shuffle"], shard_index_location="start")
    rows = 0
    for n in (30, 70, 125, 400, 17):
        values = walk[2 * rows:2 * (rows + n)].reshape(n, 2)
        p.land(slice(rows, rows + n), values, shape=(rows + n, 2), positional=True)
        rows += n
        p.publish((rows, 2))


SCENARIOS: Dict[str, Callable[[Path], None]] = {
    "w1_coords_flush7": lambda p: coords(p, 2000, 40, 7, seed=1),
    "w1_coords_auto": lambda p: coords(p, 2000, 40, None, seed=2),
    "w5_small_auto": lambda p: coords(p, 64, 400, None, seed=3),
    "w5_small_flush50": lambda p: coords(p, 64, 400, 50, seed=4),
    "w5_small_flush1_nondurable": lambda p: coords(p, 64, 60, 1, seed=5, durable=False),
    "coords_gzip": lambda p: coords(p, 500, 20, 6, seed=6, compression="gzip"),
    "coords_zstd5": lambda p: coords(p, 500, 20, 6, seed=6, compression="zstd:5"),
    "coords_none": lambda p: coords(p, 500, 20, 6, seed=6, compression="none"),
    "below_grid": below_grid,
    "mixed": mixed,
    "reopened": reopened,
    "one_shot": one_shot,
    "frame_record": frame_record,
    "zarr_layer": zarr_layer,
}


def digests(work: Path) -> Dict[str, str]:
    out = {}
    for name, build in SCENARIOS.items():
        target = work / f"{name}.mrec"
        build(target)
        out[name] = digest(target)
    return out


if __name__ == "__main__":  # print the digests of the code on sys.path (for EXPECTED)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, value in digests(Path(tmp)).items():
            print(f'    "{name}": "{value}",')
    sys.exit(0)
