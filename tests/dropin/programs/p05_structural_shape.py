"""A block with a structural shape (a grid): set_shape, shape, written and read back."""
import numpy as np


def run(molrs, out, show):
    grid = molrs.Block()
    grid.insert("rho", np.arange(12, dtype=np.float64) / 4.0)
    grid.insert("flag", np.arange(12) % 2 == 0)
    show("before", grid.shape, grid.structural_shape)
    grid.set_shape([3, 4])
    show("after", grid.shape, grid.structural_shape, grid.n_rows)
    show.raises("bad shape", lambda: grid.set_shape([5, 5]))
    atoms = molrs.Block({"x": np.array([1.0])})
    molrs.io.write_mrec(out / "grid.mrec", frame=molrs.Frame({"grid": grid, "atoms": atoms}))
    g = molrs.io.mrec.MrecFile(out / "grid.mrec").frame()
    show("read", g["grid"].structural_shape, g["grid"].shape, g["atoms"].structural_shape, g["grid"]["rho"])
