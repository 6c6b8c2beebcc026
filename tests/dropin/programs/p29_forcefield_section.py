"""ForceFieldSection: document, tables, table(), block_name(), validate(); written and read."""
import numpy as np


def run(molrs, out, show):
    FF = molrs.io.mrec.ForceFieldSection
    show("block names", FF.block_name("pair", "lj/cut/coul/long"), FF.block_name("atom", "full"))
    atoms = molrs.Block()
    atoms.insert("name", ["OW", "HW"])
    atoms.insert("mass", np.array([15.999, 1.008]))
    atoms.insert("charge", np.array([-0.834, 0.417]))
    pair = molrs.Block()
    pair.insert("name", ["OW", "HW"])
    pair.insert("itom", ["OW", "HW"])
    pair.insert("jtom", ["OW", "HW"])
    pair.insert("epsilon", np.array([0.1521, 0.0]))
    pair.insert("sigma", np.array([3.1507, 0.4]))
    document = {"name": "tip3p", "units": {"preset": "real"},
                "styles": [{"category": "atom", "style": "full"},
                           {"category": "pair", "style": "lj/cut/coul/long", "params": {"cutoff": 10.0}}]}
    ff = FF(document, {FF.block_name("atom", "full"): atoms, FF.block_name("pair", "lj/cut/coul/long"): pair})
    ff.validate()
    show("section", ff.name, sorted(ff.tables), ff.table("pair", "zz"))
    show.block("pair", ff.table("pair", "lj/cut/coul/long"))
    molrs.io.write_mrec(out / "ff.mrec", meta={"ff": True}, forcefield=ff)
    g = molrs.io.mrec.MrecFile(out / "ff.mrec")
    show("sections", g.sections(), g.frame(), g.system())
    read = g.forcefield()
    show("document", read.document, read.name, sorted(read.tables))
    show.block("atom", read.table("atom", "full"))
    read.validate()
    bad = FF({"name": "broken", "styles": [{"category": "atom", "style": "full"}]}, {})
    show.raises("validate", bad.validate)
