"""MrecWriter with flush_every: committed after each append, flush, close, then read."""
import numpy as np


def frame(i):
    f = molrs_module.Frame({"atoms": {"x": np.array([0.0, 1.0, 2.0]) + i, "type": ["A", "B", "A"]}},
                           box=molrs_module.Box.cube(10.0))
    f.meta["T"] = 300.0 + i
    return f


def run(molrs, out, show):
    global molrs_module
    molrs_module = molrs
    frames = [frame(i) for i in range(7)]
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    w = molrs.io.mrec.MrecWriter(out / "stream.mrec", schema, flush_every=3, meta={"producer": "test"})
    for i, f in enumerate(frames):
        w.append(f, step=i * 2, time=i * 0.002)
        show("appended", i, w.committed, w.flush_every)
    w.flush()
    show("flushed", w.committed)
    w.close()
    w.close()
    show.raises("committed after close", lambda: w.committed)
    show.raises("append after close", lambda: w.append(frames[0]))
    r = molrs.io.mrec.MrecReader(out / "stream.mrec")
    show("read", len(r), r.step, r.time)
    show.frame("[3]", r[3])
    show.record_meta("meta", molrs.io.mrec.MrecFile(out / "stream.mrec").meta())
