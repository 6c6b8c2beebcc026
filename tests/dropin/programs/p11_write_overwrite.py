"""write_mrec over an existing record replaces it whole."""
import numpy as np


def run(molrs, out, show):
    path = out / "replace.mrec"
    molrs.io.write_mrec(path, meta={"v": 1}, frame=molrs.Frame({"atoms": {"x": np.array([1.0, 2.0])}}),
                        system=molrs.Frame({"atoms": {"x": np.array([0.0])}}))
    molrs.io.write_mrec(path, meta={"v": 2}, frame=molrs.Frame({"atoms": {"x": np.array([9.0])}}))
    f = molrs.io.mrec.MrecFile(path)
    show("sections", f.sections())
    show.record_meta("meta", f.meta())
    show("x", f.frame()["atoms"]["x"], f.system())
