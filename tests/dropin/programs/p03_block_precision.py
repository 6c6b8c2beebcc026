"""Declared precision: memory untouched, the record holds the values on the binary grid."""
import numpy as np


def run(molrs, out, show):
    x = np.array([0.123456789, -1.987654321, 10.0000001, 3.14159265358979, 1e-9, -0.0])
    b = molrs.Block()
    b.insert("x", x.copy())
    b.insert("y", x * 7.0)
    b.set_precision("x", 0.001)
    b.set_precision("y", 1e-6)
    show("declared", b.precision("x"), b.precision("y"), b["x"])
    b.set_precision("y", None)
    show("withdrawn", b.precision("y"))
    b.set_precision("y", 0.3)
    molrs.io.write_mrec(out / "precision.mrec", frame=molrs.Frame({"atoms": b}))
    g = molrs.io.mrec.MrecFile(out / "precision.mrec").frame()["atoms"]
    show("read x", g.precision("x"), g["x"])
    show("read y", g.precision("y"), g["y"])
    show("within half", bool(np.all(np.abs(g["x"] - x) <= 0.0005)))
