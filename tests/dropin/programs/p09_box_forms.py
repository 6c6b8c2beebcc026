"""Cells: cube, ortho with origin and pbc, a triclinic matrix, lengths and tilts; read back."""
import numpy as np


def run(molrs, out, show):
    Box = molrs.Box
    boxes = {
        "cube": Box.cube(12.5),
        "ortho": Box.ortho([1.0, 2.0, 3.0], origin=[0.5, -0.5, 1.0], pbc=[True, False, True]),
        "tric": Box(np.array([[10.0, 2.5, 0.1], [0.0, 9.0, 0.3], [0.0, 0.0, 8.0]])),
        "tilts": Box.from_lengths_tilts([5.0, 6.0, 7.0], [0.5, 0.25, 0.125]),
        "free": Box.ortho([4.0, 4.0, 4.0], pbc=[False, False, False]),
    }
    for name, box in boxes.items():
        show(name, box, box.volume(), box.lengths, box.is_free)
        f = molrs.Frame({"atoms": {"x": [0.0]}}, box=box)
        molrs.io.write_mrec(out / f"box_{name}.mrec", frame=f)
        g = molrs.io.mrec.MrecFile(out / f"box_{name}.mrec").frame()
        show(name + " read", g.box)
    f = molrs.Frame({"atoms": {"x": [0.0]}})
    show("no box", f.box)
    f.box = boxes["cube"]
    f.box = None
    show("unset", f.box)
