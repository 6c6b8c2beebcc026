"""Validity masks: insert(validity=), set_validity, an all-True mask dropped, read back."""
import numpy as np


def run(molrs, out, show):
    b = molrs.Block()
    b.insert("q", np.array([1.0, 2.0, 3.0, 4.0]), validity=[True, False, True, False])
    b.insert("n", np.array([5, 6, 7, 8], dtype=np.int64), validity=np.array([True, True, True, True]))
    b.insert("s", ["a", "", "c", "d"], validity=[True, False, True, True])
    b.insert("k", np.array([1, 2, 3, 4], dtype=np.int32))
    show("masks", b.validity("q"), b.validity("n"), b.validity("s"), b.validity("k"))
    b.set_validity("k", [False, True, True, True])
    show("set", b.validity("k"))
    b.set_validity("k", np.ones(4, dtype=bool))
    show("cleared", b.validity("k"))
    f = molrs.Frame({"atoms": b})
    molrs.io.write_mrec(out / "masks.mrec", frame=f, system=f)
    g = molrs.io.mrec.MrecFile(out / "masks.mrec").frame()
    for key in sorted(g["atoms"].keys()):
        mask = g["atoms"].validity(key)
        values = g["atoms"][key]
        show(key, mask, values if mask is None else values[mask])
