"""Reader doors: negative indices, frame_columns, block_update_at with irregular updates, has_block."""
import numpy as np


def run(molrs, out, show):
    frames = []
    for i in range(6):
        f = molrs.Frame({"atoms": {"x": np.array([0.0, 1.0]) + i, "q": np.array([-1.0, 1.0])}})
        if i in (1, 4):
            f["bonds"] = molrs.Block({"i": np.array([0], dtype=np.uint64), "j": np.array([1], dtype=np.uint64)})
        f.meta["E"] = float(i) / 3.0
        frames.append(f)
    schema = molrs.io.mrec.SequenceSchema.from_frames(frames)
    with molrs.io.mrec.MrecWriter(out / "irregular.mrec", schema) as w:
        for i, f in enumerate(frames):
            w.append(f, step=i)
    r = molrs.io.mrec.MrecReader(out / "irregular.mrec")
    show("blocks", r.block_names(), r.has_block("bonds"), r.has_block("nope"))
    show("updates", [r.block_update_at("bonds", i) for i in range(6)], [r.block_update_at("atoms", i) for i in range(6)],
         r.block_update_at("nope", 0))
    show.frame("[-1]", r[-1])
    show.frame("[0]", r[0])
    show.frame("columns", r.frame_columns(2, [("atoms", "x")]))
    show.raises("index", lambda: r[6])
    show.raises("negative index", lambda: r[-7])
    show.raises("undeclared column", lambda: r.frame_columns(0, [("atoms", "nope")]))
    show.raises("update index", lambda: r.block_update_at("atoms", 6))
    show.raises("box index", lambda: r.box_at(6))
    show("box", r.box_at(0))
