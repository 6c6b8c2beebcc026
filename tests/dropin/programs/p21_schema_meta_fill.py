"""Per-step meta: a key declared with a fill, frames that omit it, typed meta per step."""
import numpy as np


def run(molrs, out, show):
    S = molrs.io.mrec.SequenceSchema
    s = (S.from_frames([]).declare_block("atoms").declare_column("atoms", "x", "f64")
         .declare_meta("T", "f64", fill=float("nan")).declare_meta("count", "i64", fill=-1)
         .declare_meta("tag", "string"))
    show("meta keys", s.meta_keys())
    with molrs.io.mrec.MrecWriter(out / "fills.mrec", s, flush_every=2) as w:
        for i in range(4):
            f = molrs.Frame({"atoms": {"x": np.array([float(i)])}})
            f.meta["tag"] = f"frame{i}"
            if i % 2 == 0:
                f.meta["T"] = 250.0 + i
                f.meta["count"] = i * 10
            w.append(f, step=i)
    r = molrs.io.mrec.MrecReader(out / "fills.mrec")
    for i in range(len(r)):
        fr = r[i]
        show(f"[{i}]", [(k, fr.meta.dtype(k), fr.meta[k]) for k in sorted(fr.meta.keys())])
    show.raises("missing required", lambda: _missing(molrs, out, s))


def _missing(molrs, out, s):
    with molrs.io.mrec.MrecWriter(out / "missing_meta.mrec", s) as w:
        w.append(molrs.Frame({"atoms": {"x": np.array([0.0])}}))
