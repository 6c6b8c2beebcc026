"""A Trajectory without step or time labels: what the record and the reader give."""
import numpy as np


def run(molrs, out, show):
    frames = [molrs.Frame({"atoms": {"x": np.array([float(i)])}}) for i in range(3)]
    traj = molrs.Trajectory(frames)
    show("labels", traj.step, traj.time)
    molrs.io.write_mrec(out / "unlabelled.mrec", trajectory=traj)
    r = molrs.io.mrec.MrecReader(out / "unlabelled.mrec")
    show("reader", len(r), r.step, r.time)
    t = r.to_trajectory()
    show("to_trajectory", t.step, t.time)
    mapped = t.map(lambda fr: fr)
    show("map", len(mapped), mapped.step)
    r.__exit__(None, None, None)
