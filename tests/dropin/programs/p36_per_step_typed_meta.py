"""Per-step meta of several tags in a trajectory: vectors, bools, integers, strings."""
import numpy as np


def run(molrs, out, show):
    MetaValue = molrs.core.MetaValue
    frames = []
    for i in range(3):
        f = molrs.Frame({"atoms": {"x": np.array([float(i)])}})
        f.meta["T"] = 300.0 + i / 3.0
        f.meta["pressure"] = (1.0 * i, 2.0, 3.5)
        f.meta["converged"] = i % 2 == 0
        f.meta["n"] = MetaValue("i32", -i)
        f.meta["ensemble"] = "npt" if i else "nvt"
        frames.append(f)
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    show("meta keys", schema.meta_keys())
    with molrs.io.mrec.MrecWriter(out / "step_meta.mrec", schema) as w:
        for f in frames:
            w.append(f)
    r = molrs.io.mrec.MrecReader(out / "step_meta.mrec")
    for i in range(len(r)):
        m = r[i].meta
        show(f"[{i}]", [(k, m.dtype(k), m[k]) for k in m.keys()])
