#!/usr/bin/env python
"""Benchmark the record layer: a 1,000,000-atom frame, molrec_raw vs zarr-python.

The frame: ``atoms`` (x, y, z f64; element strings) and ``bonds`` (atomi, atomj u64).
molrec_raw writes it with ``write_mrec_frame`` and reads it with ``read_mrec_frame``
(typed meta, checks, the reference extents and codecs). zarr-python writes the *same
arrays* — same hierarchy, shapes, chunk/shard geometry, codecs and attributes, taken
from the record molrec_raw wrote — and reads every array back. Medians of --repeats;
ratio = zarr-python time / molrec_raw time (> 1: molrec_raw faster). Warm cache.

    python bench/record.py [--atoms N] [--repeats R]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import warnings
from typing import Any, Dict, List, Tuple

import numpy as np

from molrec_raw.record.doors import read_mrec_frame, write_mrec_frame
from molrec_raw.record.model import Block, Box, Frame

warnings.simplefilter("ignore")


def make_frame(n: int) -> Frame:
    rng = np.random.default_rng(0)
    xyz = rng.uniform(0, 100, size=(3, n))
    elements = np.array(["C", "H", "O", "N", "S"], dtype=object)[rng.integers(0, 5, n)]
    atomi = np.arange(n - 1, dtype=np.uint64)
    atoms = Block({"x": xyz[0], "y": xyz[1], "z": xyz[2], "element": elements})
    bonds = Block({"atomi": atomi, "atomj": atomi + np.uint64(1)})
    return Frame({"title": "bench", "n_atoms": n}, {"atoms": atoms, "bonds": bonds}, Box(np.eye(3) * 100))


def arrays_of(record: str) -> List[Tuple[str, Dict[str, Any]]]:
    """(path, zarr.json) of every node of a record, parents first."""
    nodes = []
    for dirpath, _, files in sorted(os.walk(record)):
        if "zarr.json" in files:
            rel = os.path.relpath(dirpath, record)
            with open(os.path.join(dirpath, "zarr.json"), "rb") as fh:
                nodes.append(("" if rel == "." else rel, json.load(fh)))
    return nodes


def zp_write(path: str, nodes: List[Tuple[str, Dict[str, Any]]], frame: Frame) -> None:
    import zarr

    values = {f"frame/{b}/{c}": v for b, block in frame.blocks.items() for c, v in block.columns.items()}
    values["frame/box/vectors"] = frame.box.vectors
    store = zarr.storage.LocalStore(path)
    root = zarr.open_group(store=store, mode="w")
    for rel, doc in nodes[1:]:
        if doc["node_type"] == "group":
            root.create_group(rel, attributes=doc.get("attributes", {}))
            continue
        codecs = doc["codecs"]
        sharding = codecs[0] if codecs[0]["name"] == "sharding_indexed" else None
        inner = sharding["configuration"]["codecs"] if sharding else codecs
        chunk = sharding["configuration"]["chunk_shape"] if sharding else doc["chunk_grid"]["configuration"]["chunk_shape"]
        shard = doc["chunk_grid"]["configuration"]["chunk_shape"] if sharding else None
        serializer = inner[0]["name"] == "vlen-utf8" and "auto" or zarr.codecs.BytesCodec(endian="little")
        compressors = [zarr.registry.get_codec_class(c["name"]).from_dict(c) for c in inner[1:]]
        array = root.create_array(rel, shape=doc["shape"], dtype=str if doc["data_type"] == "string" else doc["data_type"],
                                  chunks=chunk, shards=shard, compressors=compressors, serializer=serializer,
                                  fill_value=doc["fill_value"], attributes=doc.get("attributes", {}))
        data = values.get(rel)
        if data is not None and data.size:
            array[...] = data


def zp_read(path: str) -> Dict[str, np.ndarray]:
    import zarr

    out = {}
    root = zarr.open_group(path, mode="r")
    for name in ("frame/atoms/x", "frame/atoms/y", "frame/atoms/z", "frame/atoms/element",
                 "frame/bonds/atomi", "frame/bonds/atomj", "frame/box/vectors"):
        out[name] = root[name][...]
    dict(root["frame"].attrs)
    return out


def median(xs: List[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    frame = make_frame(args.atoms)
    work = tempfile.mkdtemp(prefix="molrec-record-bench-")
    times: Dict[str, List[float]] = {k: [] for k in ("ours write", "ours write durable", "ours read", "zp write", "zp read")}
    try:
        for rep in range(args.repeats):
            ours = os.path.join(work, f"r{rep}.mrec")
            t0 = time.perf_counter()
            write_mrec_frame(ours + ".durable", frame)  # the default: fsync before the swap
            times["ours write durable"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            write_mrec_frame(ours, frame, durable=False)  # like zarr-python: no fsync
            times["ours write"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            back = read_mrec_frame(ours)
            times["ours read"].append(time.perf_counter() - t0)
            assert np.array_equal(back.blocks["atoms"].columns["x"], frame.blocks["atoms"].columns["x"])
            assert back.blocks["atoms"].columns["element"].tolist() == frame.blocks["atoms"].columns["element"].tolist()
            nodes = arrays_of(ours)
            theirs = os.path.join(work, f"z{rep}.zarr")
            t0 = time.perf_counter()
            zp_write(theirs, nodes, frame)
            times["zp write"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = zp_read(theirs)
            times["zp read"].append(time.perf_counter() - t0)
            assert np.array_equal(got["frame/bonds/atomj"], frame.blocks["bonds"].columns["atomj"])
            print(f"rep {rep + 1}: " + "  ".join(f"{k} {v[-1]:.3f}s" for k, v in times.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.atoms} atoms; medians of {args.repeats} (warm cache)")
    print("| step | molrec_raw | zarr-python | ratio zp/ours |\n|---|---:|---:|---:|")
    for step, label in (("write", "write (durable=False, as zarr-python)"), ("write durable", "write (durable, default)"),
                        ("read", "read")):
        ours, zp = median(times[f"ours {step}"]), median(times[f"zp {step.split()[0]}"])
        print(f"| {label} | {ours * 1e3:.1f} ms | {zp * 1e3:.1f} ms | {zp / ours:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
