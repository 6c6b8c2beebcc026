"""write_mrec with meta, frame and system; MrecFile's sections, meta and each section."""
import numpy as np


def run(molrs, out, show):
    system = molrs.Frame({"atoms": {"element": ["O", "H", "H"], "mass": np.array([15.999, 1.008, 1.008])}},
                         meta={"name": "water"})
    frame = molrs.Frame({"atoms": {"x": np.array([0.0, 0.757, -0.757]), "y": np.array([0.0, 0.586, 0.586]),
                                   "z": np.zeros(3)}}, box=molrs.Box.cube(20.0))
    frame["atoms"].insert("id", np.array([1, 2, 3], dtype=np.uint64))
    frame["atoms"]["mol_id"] = np.array([7, 7, 7])
    show("coords", frame.coords, frame["atoms"].coords)
    molrs.io.write_mrec(out / "sections.mrec", meta={"title": "one water", "tags": ["a", 1]}, frame=frame,
                        system=system)
    f = molrs.io.mrec.MrecFile(out / "sections.mrec")
    show("sections", f.sections())
    show.record_meta("meta", f.meta())
    show.frame("frame", f.frame())
    show.frame("system", f.system())
    show("forcefield", f.forcefield())
    molrs.io.write_mrec(out / "system_only.mrec", system=system)
    g = molrs.io.mrec.MrecFile(out / "system_only.mrec")
    show("system only", g.sections(), g.frame(), g.system().keys())
