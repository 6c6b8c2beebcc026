"""durable=False, no automatic cadence reached: only flush() commits; a reader sees commits."""
import numpy as np


def run(molrs, out, show):
    f0 = molrs.Frame({"atoms": {"x": np.array([1.0, 2.0])}})
    schema = molrs.io.mrec.SequenceSchema.from_frames([f0])
    w = molrs.io.mrec.MrecWriter(out / "manual.mrec", schema, flush_every=100, durable=False, compression="zstd")
    for i in range(4):
        w.append(molrs.Frame({"atoms": {"x": np.array([1.0, 2.0]) * i}}), step=i)
    show("buffered", w.committed)
    w.flush()
    show("after flush", w.committed)
    show("reader sees", len(molrs.io.mrec.MrecReader(out / "manual.mrec")))
    w.append(f0, step=4)
    w.close()
    r = molrs.io.mrec.MrecReader(out / "manual.mrec")
    show("closed", len(r), r.step, r.time, [fr["atoms"]["x"].tolist() for fr in r])
