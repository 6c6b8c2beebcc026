"""A trajectory in memory: write_mrec(bytearray, trajectory=), MrecReader from bytes."""
import numpy as np


def run(molrs, out, show):
    frames = []
    for i in range(4):
        f = molrs.Frame({"atoms": {"x": np.array([0.1, 0.2]) * (i + 1)}}, box=molrs.Box.cube(5.0 + i))
        f.meta["E"] = -1.5 * i
        frames.append(f)
    traj = molrs.Trajectory(frames, step=np.array([0, 5, 10, 15], dtype=np.int64),
                            time=np.array([0.0, 0.25, 0.5, 0.75]))
    sink = bytearray()
    molrs.io.write_mrec(sink, trajectory=traj)
    with molrs.io.mrec.MrecReader(bytes(sink)) as r:
        show("len", len(r), r.step, r.time, r.block_names())
        for i, frame in enumerate(r):
            show.frame(f"[{i}]", frame)
    (out / "memory_traj.mrec.zip").write_bytes(bytes(sink))
