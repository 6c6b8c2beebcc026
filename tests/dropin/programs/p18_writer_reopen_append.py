"""MrecWriter.open: continue a closed trajectory, numbering and all."""
import numpy as np


def run(molrs, out, show):
    mk = lambda i: molrs.Frame({"atoms": {"x": np.array([i, i + 0.5])}}, meta={"i": i})
    schema = molrs.io.mrec.SequenceSchema.from_frames([mk(0)])
    with molrs.io.mrec.MrecWriter(out / "reopen.mrec", schema, flush_every=2) as w:
        for i in range(3):
            w.append(mk(i), step=100 + i, time=1.0 + i)
    w = molrs.io.mrec.MrecWriter.open(out / "reopen.mrec", flush_every=1)
    show("reopened", w.committed)
    w.append(mk(3), step=103, time=4.0)
    show("after append", w.committed)
    w.flush()
    w.append(mk(4), step=104, time=5.0)
    w.close()
    r = molrs.io.mrec.MrecReader(out / "reopen.mrec")
    show("read", len(r), r.step, r.time)
    show("x", [fr["atoms"]["x"].tolist() for fr in r], [fr.meta["i"] for fr in r])
