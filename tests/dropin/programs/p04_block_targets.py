"""Row-reference targets: relative and absolute, declared, withdrawn, read back."""
import numpy as np


def run(molrs, out, show):
    atoms = molrs.Block({"x": np.array([0.0, 1.0, 2.0])})
    bonds = molrs.Block()
    bonds.insert("i", np.array([0, 1], dtype=np.uint64))
    bonds.insert("j", np.array([1, 2], dtype=np.uint64))
    bonds.insert("sys", np.array([0, 2], dtype=np.uint64))
    bonds.set_target("i", "atoms")
    bonds.set_target("j", "atoms")
    bonds.set_target("sys", "/system/atoms")
    show("targets", bonds.targets(), bonds.target("i"), bonds.target("sys"))
    bonds.set_target("j", None)
    show("withdrawn", bonds.target("j"), bonds.targets())
    bonds.set_target("j", "atoms")
    frame = molrs.Frame({"atoms": atoms, "bonds": bonds})
    system = molrs.Frame({"atoms": molrs.Block({"x": np.array([5.0, 6.0, 7.0])})})
    molrs.io.write_mrec(out / "targets.mrec", frame=frame, system=system)
    g = molrs.io.mrec.MrecFile(out / "targets.mrec").frame()
    show("read", g["bonds"].targets() == {"i": "atoms", "j": "atoms", "sys": "/system/atoms"},
         g["bonds"].target("sys"), g["bonds"]["i"])
