"""Iterating a reader twice, next(), frame_columns over two blocks, a reader on packed bytes."""
import numpy as np


def run(molrs, out, show):
    frames = [molrs.Frame({"atoms": {"x": np.array([float(i)]), "v": np.array([-float(i)])},
                           "probe": {"p": np.array([i * 1.5, i * 2.5])}}) for i in range(4)]
    molrs.io.write_mrec(out / "iterate.mrec", trajectory=molrs.Trajectory(frames, step=np.array([1, 2, 4, 8], dtype=np.int64)))
    r = molrs.io.mrec.MrecReader(out / "iterate.mrec")
    show("twice", [f["atoms"]["x"][0] for f in r], [f["probe"]["p"][1] for f in r])
    it = iter(r)
    show("next", next(it)["atoms"]["v"], next(it)["atoms"]["v"])
    c = r.frame_columns(-1, [("atoms", "v"), ("probe", "p")])
    show("columns", sorted(c.keys()), c["atoms"].keys(), c["atoms"]["v"], c["probe"]["p"])
    molrs.io.mrec.pack_mrec_zip(out / "iterate.mrec")
    data = (out / "iterate.mrec.zip").read_bytes()
    with molrs.io.mrec.MrecReader(data) as z:
        show("zip bytes", len(z), z.step, [f["atoms"]["x"][0] for f in z])
