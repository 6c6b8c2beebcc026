"""Block columns of every dtype molrs holds: names, dtype names, values, shape."""
import numpy as np


def run(molrs, out, show):
    b = molrs.Block()
    for dt in ["float64", "float32", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8",
               "bool", "complex128"]:
        b.insert("c_" + dt, np.arange(3).astype(dt) * (1 if dt == "bool" else 3) + (0.1 if "float" in dt else 0))
    b.insert("name", ["C", "O", "H"])
    b["v"] = np.array([[1.5, 2.5], [3.5, 4.5], [0.1, 0.2]])
    show("keys", b.keys(), len(b), b.n_rows, b.shape, b.structural_shape, "name" in b, "zz" in b)
    show.block("b", b, sort=False)
    del b["c_int8"]
    show("after del", b.keys())
    c = b.copy()
    c["c_float64"][0] = 42.0
    show("copy is deep", b["c_float64"][0], c["c_float64"][0])
    b.rename("c_uint8", "u8")
    show("renamed", b.keys(), b.dtype("u8"))
    f = molrs.Frame({"atoms": b})
    molrs.io.write_mrec(out / "columns.mrec", frame=f)
    show.frame("read", molrs.io.mrec.MrecFile(out / "columns.mrec").frame())
