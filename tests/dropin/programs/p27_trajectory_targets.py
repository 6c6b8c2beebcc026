"""Row references in a trajectory: a bonds block whose endpoints target atoms, checked per frame."""
import numpy as np


def run(molrs, out, show):
    def frame(n_atoms, pairs):
        bonds = molrs.Block()
        bonds.insert("i", np.array([p[0] for p in pairs], dtype=np.uint64))
        bonds.insert("j", np.array([p[1] for p in pairs], dtype=np.uint64))
        bonds.set_target("i", "atoms")
        bonds.set_target("j", "atoms")
        return molrs.Frame({"atoms": {"x": np.arange(n_atoms, dtype=np.float64)}, "bonds": bonds})

    frames = [frame(3, [(0, 1), (1, 2)]), frame(3, [(0, 2)]), frame(4, [(0, 1), (2, 3), (1, 3)])]
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    show("pins", schema.target("bonds", "i"), schema.target("bonds", "j"))
    with molrs.io.mrec.MrecWriter(out / "traj_targets.mrec", schema) as w:
        for f in frames:
            w.append(f)
        show.raises("dangling", lambda: w.append(frame(2, [(0, 5)])))
    r = molrs.io.mrec.MrecReader(out / "traj_targets.mrec")
    show("len", len(r))
    for i in range(len(r)):
        b = r[i]["bonds"]
        show(f"[{i}]", b["i"], b["j"], b.target("i"), b.target("j"))
