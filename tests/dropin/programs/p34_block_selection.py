"""Rows and columns out of a block, copies, and validation of a frame."""
import numpy as np


def run(molrs, out, show):
    b = molrs.Block({"x": np.array([0.0, 1.0, 2.0, 3.0]), "y": np.array([4.0, 5.0, 6.0, 7.0])})
    b.insert("q", np.array([1, 2, 3, 4], dtype=np.int64), validity=[True, False, True, True])
    show("columns", b[["x", "y"]], b[("y", "x")])
    show.block("slice", b[1:3], sort=False)
    show.block("mask", b[np.array([True, False, False, True])], sort=False)
    show.block("rows", b[np.array([3, 0])], sort=False)
    b[["u", "v"]] = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    show("spread", b.keys(), b["v"])
    f = molrs.Frame({"atoms": b}, meta={"k": 1}, box=molrs.Box.cube(3.0))
    g = f.copy()
    g["atoms"]["x"][0] = -1.0
    g.meta["k"] = 2
    show("copy", f["atoms"]["x"][0], g["atoms"]["x"][0], f.meta["k"], g.meta["k"], len(f), "atoms" in f)
    f.validate()
    molrs.io.mrec.validation.validate_frame(f)
    bonds = molrs.Block({"i": np.array([0, 9], dtype=np.uint64)})
    bonds.set_target("i", "atoms")
    f["bonds"] = bonds
    show.raises("dangling target", f.validate)
    show.raises("validate_frame", lambda: molrs.io.mrec.validation.validate_frame(f))
    show.raises("write dangling", lambda: molrs.io.write_mrec(out / "dangling.mrec", frame=f))
    del f["bonds"]
    show("keys", f.keys())
