"""The main job for now: write a small sharded record-like hierarchy and read it back.

``python -m molrec_raw.zarr_example PATH``
"""
from __future__ import annotations

import sys
from typing import List

import numpy as np

from molrec_raw.zarr import open_array, open_group


def main(argv: List[str]) -> int:
    path = argv[0] if argv else "example.zarr"
    root = open_group(path, mode="w", attributes={"created_by": "molrec_raw example"})
    frames = root.create_group("frames", attributes={"units": "angstrom"})
    rng = np.random.default_rng(0)
    coords = np.cumsum(rng.normal(scale=0.01, size=(2000, 3)), axis=0)
    xyz = frames.create_array("xyz", shape=coords.shape, dtype="float64", chunks=(250, 3),
                              shards=(1000, 3), dimension_names=["atom", "axis"])
    xyz[...] = coords
    names = frames.create_array("names", shape=(4,), dtype=str, chunks=(4,))
    names[...] = np.array(["C", "H", "héllo", ""], dtype=object)
    for name, node in open_group(path, path="frames").arrays():
        print(f"{name}: shape={node.shape} dtype={node.metadata.dtype.name} "
              f"chunks={node.chunks} shards={node.shards}")
    assert np.array_equal(open_array(path, "frames/xyz")[...], coords)
    print("round trip ok:", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
