"""Validity masks in trajectory frames, and a nullable column across frames."""
import numpy as np


def run(molrs, out, show):
    frames = []
    for i in range(3):
        b = molrs.Block()
        b.insert("x", np.array([1.0, 2.0, 3.0]) + i)
        b.insert("charge", np.array([0.5, -0.5, 0.25]) * (i + 1), validity=[True, i != 1, i != 2])
        b.insert("label", ["a", "b", "c"], validity=[i == 0, True, True])
        frames.append(molrs.Frame({"atoms": b}))
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    with molrs.io.mrec.MrecWriter(out / "traj_masks.mrec", schema, flush_every=2) as w:
        for f in frames:
            w.append(f)
    r = molrs.io.mrec.MrecReader(out / "traj_masks.mrec")
    for i in range(len(r)):
        a = r[i]["atoms"]
        for key in ("charge", "label"):
            mask = a.validity(key)
            show(f"[{i}] {key}", mask, a[key] if mask is None else a[key][mask])
