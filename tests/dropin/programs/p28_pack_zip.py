"""pack_mrec_zip: the directory becomes one *.mrec.zip (source removed); both readers open it."""
import os

import numpy as np


def run(molrs, out, show):
    frames = [molrs.Frame({"atoms": {"x": np.array([float(i), 2.0 * i])}}) for i in range(3)]
    molrs.io.write_mrec(out / "packed.mrec", meta={"packed": True}, frame=frames[0],
                        trajectory=molrs.Trajectory(frames))
    zipped = molrs.io.mrec.pack_mrec_zip(out / "packed.mrec")
    show("zip", type(zipped).__name__, os.path.basename(zipped), os.path.exists(out / "packed.mrec"))
    f = molrs.io.mrec.MrecFile(out / "packed.mrec.zip")
    show("sections", f.sections())
    show.frame("frame", f.frame())
    r = molrs.io.mrec.MrecReader(out / "packed.mrec.zip")
    show("trajectory", len(r), r.step, [fr["atoms"]["x"].tolist() for fr in r])
    molrs.io.write_mrec(out / "second.mrec", frame=frames[1])
    (out / "second.mrec.zip").write_bytes(b"not a zip")
    show("replaced", os.path.basename(molrs.io.mrec.pack_mrec_zip(str(out / "second.mrec"))))
    show("reads", molrs.io.mrec.MrecFile(out / "second.mrec.zip").frame()["atoms"]["x"])
    data = (out / "second.mrec.zip").read_bytes()
    show("bytes of zip", molrs.io.mrec.MrecFile(data).sections())
