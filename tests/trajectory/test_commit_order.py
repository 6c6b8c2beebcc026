"""The commit protocol is observable (trajectory §10, ``trajectory#I7``): every array's
zarr.json is published after the bytes it points at, and ``trajectory/zarr.json`` (the
``nstep`` marker) is the last write of every commit."""
import json

import numpy as np

from molrec_raw.record.model import Block, Box
from molrec_raw.record.trajectory import MrecReader, MrecWriter
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import DirectoryStore, open_array

from traj_helpers import ragged


def frames():
    out = []
    for i in range(23):
        bonds = Block({"atomi": np.arange(i % 4, dtype=np.uint64)})
        f = ragged(i, 2 + (i % 5))
        if i % 3 == 0:
            f.blocks["bonds"] = bonds
        if i >= 1:  # first cell at ordinal 1 (arrays), changes every 5 frames, origin moves at 12
            f.box = Box(np.eye(3) * (5.0 + i // 5), np.zeros(3) if i < 12 else np.ones(3))
        f.meta = {"pe": float(i)}
        out.append(f)
    return out


def test_trajectory_I7_nstep_last_and_no_metadata_ahead_of_bytes(tmp_path, monkeypatch):
    path = tmp_path / "o.mrec"
    log = []
    published = []  # (key, values read right after the publish)
    real_replace, real_write_at = DirectoryStore.replace_atomic, DirectoryStore.write_at

    def replace(self, key, value):
        real_replace(self, key, value)
        if not key.endswith("zarr.json"):  # a whole chunk file: data
            log.append(("write_at", key))
            return
        log.append(("replace", key))
        doc = json.loads(value)
        if doc.get("node_type") == "array" and key.startswith("trajectory/"):
            node = key[: -len("/zarr.json")]
            published.append((node, open_array(DirectoryStore(self.root), node)[...].copy()))

    def write_at(self, key, offset, value):
        size = self.size(key)
        real_write_at(self, key, offset, value)
        pad = offset == size and (offset + len(value)) % 4096 == 0 and not any(value)
        log.append(("pad" if pad else "write_at", key))

    monkeypatch.setattr(DirectoryStore, "replace_atomic", replace)
    monkeypatch.setattr(DirectoryStore, "set", replace)
    monkeypatch.setattr(DirectoryStore, "write_at", write_at)
    fs = frames()
    steps = [i * 2 if i < 11 else i * 3 for i in range(len(fs))]  # numbering breaks: step array materializes
    w = MrecWriter(path, SequenceSchema.from_frames(fs), flush_every=4)
    commits = []
    for i, f in enumerate(fs):
        mark = len(log)
        w.append(f, step=steps[i], time=0.25 * i)
        if len(log) > mark:
            commits.append(log[mark:])
        if i % 7 == 6:
            mark = len(log)
            w.flush()
            commits.append(log[mark:])
    mark = len(log)
    w.close()
    commits.append(log[mark:])
    commits = [c for c in commits if c]
    assert len(commits) >= 6
    padded = [n for n, c in enumerate(commits) if any(verb == "pad" for verb, _ in c)]
    assert padded and padded[-1] == len(commits) - 1  # close() ends its shards at a sector boundary
    for c in commits:
        # a durable point ends each shard it landed in at a 4096-byte boundary, after the data
        # and its zarr.json (spec-notes/trajectory.md "Power cuts"), before the marker
        pads = [n for n, (verb, _) in enumerate(c) if verb == "pad"]
        assert all(c[n + 1:] == [("replace", "trajectory/zarr.json")] or c[n + 1][0] == "pad" for n in pads)
        assert c[-1] == ("replace", "trajectory/zarr.json")
        assert c.count(("replace", "trajectory/zarr.json")) == 1
        # within a commit, each array's last byte write precedes the zarr.json publishing it
        for n, (verb, key) in enumerate(c):
            if verb == "write_at":
                node = key.rsplit("/c/", 1)[0]
                assert ("replace", f"{node}/zarr.json") in c[n + 1:]
    # what every zarr.json advertised was already readable, and never changed afterwards
    monkeypatch.undo()
    for node, values in published:
        final = open_array(DirectoryStore(path), node)[...]
        assert final.shape[0] >= values.shape[0]
        if values.dtype == object:
            assert final[: values.shape[0]].tolist() == values.tolist()
        else:
            assert final[: values.shape[0]].tobytes() == values.tobytes()
    r = MrecReader(path)
    assert len(r) == len(fs) and r.step == steps
    assert r[22].box == fs[22].box and r[22].meta == {"pe": 22.0}
    assert any("box/origin" in node for node, _ in published) and any(n == "trajectory/step" for n, _ in published)
