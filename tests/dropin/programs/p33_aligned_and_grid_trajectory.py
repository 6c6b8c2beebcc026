"""An aligned block pair and a block with a structural shape, streamed and read back."""
import numpy as np


def run(molrs, out, show):
    S = molrs.io.mrec.SequenceSchema
    s = (S.from_frames([]).declare_block("atoms").declare_column("atoms", "x", "f64")
         .declare_block("extra").declare_column("extra", "w", "f64").declare_aligned("extra", "atoms")
         .declare_block("grid").declare_column("grid", "rho", "f64").declare_structural_shape("grid", [2, 3]))
    show("aligned", s.aligned_with("extra"), s.column_names("grid"))
    frames = []
    for i, n in enumerate([2, 2, 3]):
        grid = molrs.Block({"rho": np.arange(6, dtype=np.float64) * (i + 1)})
        grid.set_shape([2, 3])
        frames.append(molrs.Frame({"atoms": {"x": np.arange(n, dtype=np.float64)},
                                   "extra": {"w": np.full(n, 0.5 * i)}, "grid": grid}))
    with molrs.io.mrec.MrecWriter(out / "aligned.mrec", s, flush_every=2) as w:
        for f in frames:
            w.append(f)
        bad = molrs.Frame({"atoms": {"x": np.zeros(4)}, "extra": {"w": np.zeros(1)}})
        show.raises("misaligned", lambda: w.append(bad))
    r = molrs.io.mrec.MrecReader(out / "aligned.mrec")
    for i in range(len(r)):
        show.frame(f"[{i}]", r[i])
