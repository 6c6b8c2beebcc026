"""Atoms added and removed between frames: row counts per frame, values, strings."""
import numpy as np


def run(molrs, out, show):
    counts = [2, 2, 3, 1, 0, 4]
    frames = []
    for i, n in enumerate(counts):
        b = molrs.Block()
        b.insert("x", np.arange(n, dtype=np.float64) * 0.5 + i)
        b.insert("element", [["H", "C", "N", "O"][k % 4] for k in range(n)] if n else np.array([], dtype=str))
        b.insert("id", np.arange(n, dtype=np.uint64) + np.uint64(100 * i))
        frames.append(molrs.Frame({"atoms": b}))
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    with molrs.io.mrec.MrecWriter(out / "topology.mrec", schema, flush_every=4) as w:
        for i, f in enumerate(frames):
            w.append(f, step=i)
    r = molrs.io.mrec.MrecReader(out / "topology.mrec")
    for i in range(len(r)):
        a = r[i]["atoms"]
        show(f"[{i}]", a.n_rows, a["x"], a["element"], a["id"])
