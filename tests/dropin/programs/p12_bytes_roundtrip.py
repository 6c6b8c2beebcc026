"""A record in memory: write_mrec into a bytearray, MrecFile from bytes."""
import numpy as np


def run(molrs, out, show):
    frame = molrs.Frame({"atoms": {"x": np.array([0.25, 0.5]), "name": ["A", "B"]}}, meta={"T": 310.5},
                        box=molrs.Box.ortho([3.0, 4.0, 5.0]))
    sink = bytearray(b"left over")
    molrs.io.write_mrec(sink, meta={"kind": "memory"}, frame=frame, system=frame)
    show("packed", bytes(sink[:4]), len(sink) > 100)
    f = molrs.io.mrec.MrecFile(bytes(sink))
    show("sections", f.sections())
    show.record_meta("meta", f.meta())
    show.frame("frame", f.frame())
    (out / "memory.mrec.zip").write_bytes(bytes(sink))
    show("from file", molrs.io.mrec.MrecFile(out / "memory.mrec.zip").sections())
