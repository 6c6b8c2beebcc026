"""write_mrec(trajectory=Trajectory(frames, step, time)) with frame and system beside it."""
import numpy as np


def run(molrs, out, show):
    system = molrs.Frame({"atoms": {"element": ["C", "O"]}})
    frames = [molrs.Frame({"atoms": {"x": np.array([0.0, 1.1 + 0.01 * i]), "v": np.array([0.5, -0.5]) * i}})
              for i in range(5)]
    traj = molrs.Trajectory(frames, step=np.arange(0, 50, 10, dtype=np.int64), time=np.linspace(0.0, 2.0, 5))
    show("traj", len(traj), traj.step, traj.time, len(traj.frames), len(traj[1:3]), traj[1:3].step)
    molrs.io.write_mrec(out / "whole.mrec", meta={"run": "nve"}, frame=frames[-1], system=system,
                        trajectory=traj)
    f = molrs.io.mrec.MrecFile(out / "whole.mrec")
    show("sections", f.sections())
    with molrs.io.mrec.MrecReader(out / "whole.mrec") as r:
        show("reader", len(r), r.step, r.time, r.block_names(), r.has_block("atoms"))
        show.frame("last", r[-1])
        t = r.to_trajectory()
        show("to_trajectory", len(t), t.step, t.time, [fr["atoms"]["x"][1] for fr in t.frames])
