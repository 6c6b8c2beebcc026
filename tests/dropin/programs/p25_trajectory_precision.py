"""Precision in a trajectory: pinned by the schema and declared on a frame's block."""
import numpy as np


def run(molrs, out, show):
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=5) * 10.0 for _ in range(3)]
    frames = []
    for x in xs:
        b = molrs.Block({"x": x.copy(), "y": x * 3.0})
        b.set_precision("y", 0.01)
        frames.append(molrs.Frame({"atoms": b}))
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames).declare_precision("atoms", "x", 0.001)
    show("pinned", schema.precision("atoms", "x"), schema.precision("atoms", "y"))
    with molrs.io.mrec.MrecWriter(out / "traj_precision.mrec", schema) as w:
        for f in frames:
            w.append(f)
    r = molrs.io.mrec.MrecReader(out / "traj_precision.mrec")
    for i in range(len(r)):
        a = r[i]["atoms"]
        show(f"[{i}]", a["x"], a["y"], a.precision("x"), a.precision("y"))
    show("memory untouched", frames[0]["atoms"]["x"] is not None and bool(np.all(frames[0]["atoms"]["x"] == xs[0])))
