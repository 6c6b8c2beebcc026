"""MrecWriter and MrecReader as context managers; an exception inside keeps what was committed."""
import numpy as np


def run(molrs, out, show):
    mk = lambda i: molrs.Frame({"atoms": {"x": np.array([float(i)])}})
    schema = molrs.io.mrec.SequenceSchema.from_frames([mk(0)])
    with molrs.io.mrec.MrecWriter(out / "ctx.mrec", schema, flush_every=1) as w:
        w.append(mk(0))
        w.append(mk(1))
    try:
        with molrs.io.mrec.MrecWriter.open(out / "ctx.mrec", flush_every=1) as w:
            w.append(mk(2))
            raise RuntimeError("simulation failed")
    except RuntimeError as exc:
        show("raised", str(exc))
    with molrs.io.mrec.MrecReader(out / "ctx.mrec") as r:
        show("kept", len(r), r.step, [fr["atoms"]["x"][0] for fr in r])
