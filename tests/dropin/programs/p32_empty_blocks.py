"""Zero-row blocks in a frame and in a trajectory."""
import numpy as np


def run(molrs, out, show):
    empty = molrs.Block()
    empty.insert("x", np.zeros(0))
    empty.insert("i", np.zeros(0, dtype=np.uint64))
    show("empty", empty.n_rows, empty.shape, empty.keys())
    f = molrs.Frame({"atoms": {"x": np.array([1.0, 2.0])}, "ghosts": empty})
    molrs.io.write_mrec(out / "empty.mrec", frame=f)
    show.frame("read", molrs.io.mrec.MrecFile(out / "empty.mrec").frame())
    frames = [molrs.Frame({"atoms": {"x": np.arange(n, dtype=np.float64)}}) for n in (2, 0, 1)]
    with molrs.io.mrec.MrecWriter(out / "empty_traj.mrec", molrs.io.mrec.SequenceSchema.from_frames(frames)) as w:
        for fr in frames:
            w.append(fr)
    r = molrs.io.mrec.MrecReader(out / "empty_traj.mrec")
    show("rows", [fr["atoms"].n_rows for fr in r], [fr["atoms"]["x"].tolist() for fr in r])
