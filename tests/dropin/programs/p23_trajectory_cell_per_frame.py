"""A cell that changes every frame, and one that changes at some frames: box_at and frames."""
import numpy as np


def run(molrs, out, show):
    frames = []
    for i in range(4):
        m = np.array([[10.0 + i, 0.1 * i, 0.0], [0.0, 11.0, 0.0], [0.0, 0.0, 12.0 - 0.5 * i]])
        frames.append(molrs.Frame({"atoms": {"x": np.array([float(i)])}}, box=molrs.Box(m, origin=[0.0, 0.0, -i])))
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    with molrs.io.mrec.MrecWriter(out / "cells.mrec", schema) as w:
        for f in frames:
            w.append(f)
    r = molrs.io.mrec.MrecReader(out / "cells.mrec")
    for i in range(len(r)):
        show(f"box_at({i})", r.box_at(i))
    show("frame box", r[2].box)
    fixed = [molrs.Frame({"atoms": {"x": np.array([float(i)])}}, box=molrs.Box.cube(5.0 if i < 2 else 6.0))
             for i in range(4)]
    with molrs.io.mrec.MrecWriter(out / "cells_some.mrec", molrs.io.mrec.SequenceSchema.from_frames(fixed)) as w:
        for f in fixed:
            w.append(f)
    r = molrs.io.mrec.MrecReader(out / "cells_some.mrec")
    show("some", [r.box_at(i).matrix[0, 0] for i in range(4)])
