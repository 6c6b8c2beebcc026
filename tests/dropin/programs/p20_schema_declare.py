"""SequenceSchema's declare_* family and its getters, then frames written under it."""
import numpy as np


def run(molrs, out, show):
    S = molrs.io.mrec.SequenceSchema
    s = S.from_frames([])
    show("empty", s.block_names(), s.meta_keys())
    same = (s.declare_block("atoms", rows=3).declare_column("atoms", "x", "f64")
            .declare_column("atoms", "vel", "f64", [3]).declare_column("atoms", "kind", "string")
            .declare_column("atoms", "idx", "u64").declare_precision("atoms", "x", 0.01)
            .declare_target("atoms", "idx", "atoms").declare_block("grid")
            .declare_column("grid", "rho", "f32" if False else "f64").declare_structural_shape("grid", [2, 2])
            .declare_block("bonds").declare_column("bonds", "order", "i32").declare_aligned("bonds", "atoms")
            .declare_meta("T", "f64").declare_meta("phase", "string", fill="liquid"))
    show("chained", same is s)
    show("blocks", s.block_names(), s.column_names("atoms"), s.column_names("nope"), s.meta_keys())
    show("pins", s.precision("atoms", "x"), s.precision("atoms", "kind"), s.precision("zz", "x"),
         s.target("atoms", "idx"), s.target("atoms", "x"), s.aligned_with("bonds"), s.aligned_with("atoms"))
    f = molrs.Frame()
    a = molrs.Block()
    a.insert("x", np.array([0.123, 1.456, 2.789]))
    a.insert("vel", np.arange(9, dtype=np.float64).reshape(3, 3))
    a.insert("kind", ["a", "b", "c"])
    a.insert("idx", np.array([2, 0, 1], dtype=np.uint64))
    f["atoms"] = a
    g = molrs.Block({"rho": np.array([0.5, 1.5, 2.5, 3.5])})
    g.set_shape([2, 2])
    f["grid"] = g
    f["bonds"] = molrs.Block({"order": np.array([1, 2, 1], dtype=np.int32)})
    f.meta["T"] = 1.0
    with molrs.io.mrec.MrecWriter(out / "declared.mrec", s) as w:
        w.append(f)
        f.meta["phase"] = "gas"
        w.append(f)
    r = molrs.io.mrec.MrecReader(out / "declared.mrec")
    show.frame("[0]", r[0])
    show("phase", [fr.meta["phase"] for fr in r])
