"""Where molrs refuses a value: cells, targets, precision, masks, dtypes, meta, writer arguments."""
import numpy as np


def run(molrs, out, show):
    Box, Block = molrs.Box, molrs.Block
    show.raises("singular", lambda: Box(np.zeros((3, 3))))
    show.raises("singular rank 2", lambda: Box(np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 0]])))
    show.raises("cube 0", lambda: Box.cube(0.0))
    show.raises("cube -1", lambda: Box.cube(-1.0))
    show.raises("cube nan", lambda: Box.cube(float("nan")))
    show.raises("ortho zero", lambda: Box.ortho([1.0, 0.0, 1.0]))
    b = Block()
    b.insert("x", np.array([1.0, 2.0]))
    b.insert("i", np.array([0, 1], dtype=np.uint64))
    b.insert("n", np.array([0, 1], dtype=np.int64))
    for target in ["", "/", "a/b", "/frame", "/frame/", "//x", "/frame/a/b", "/trajectory/atoms"]:
        show.raises(f"target {target!r}", lambda: b.set_target("i", target))
    for target in ["/frame/atoms", "/system/atoms", "/foo/atoms", "atoms"]:
        show.raises(f"target {target!r}", lambda: b.set_target("i", target))
    show.raises("target on f64", lambda: b.set_target("x", "atoms"))
    show.raises("target missing column", lambda: b.set_target("zz", "atoms"))
    show.raises("precision on i64", lambda: b.set_precision("n", 0.1))
    show.raises("precision negative", lambda: b.set_precision("x", -1.0))
    show.raises("precision nan", lambda: b.set_precision("x", float("nan")))
    show.raises("precision huge", lambda: b.set_precision("x", 2.0**1001))
    show.raises("precision missing column", lambda: b.precision("zz"))
    show.raises("rows", lambda: b.insert("y", np.zeros(3)))
    show.raises("mask length", lambda: b.insert("y", np.zeros(2), validity=[True]))
    show.raises("mask type", lambda: b.insert("y", np.zeros(2), validity=np.array([1, 0])))
    show.raises("object column", lambda: b.insert("o", np.array([1, None], dtype=object)))
    show.raises("object is TypeError", lambda: isinstance(_catch(lambda: b.insert("o", np.array([None, 1], dtype=object))), TypeError))
    show.raises("missing column", lambda: b["zz"])
    show.raises("validity missing", lambda: b.validity("zz"))
    show.raises("dtype missing", lambda: b.dtype("zz"))
    show.raises("Block(block)", lambda: Block(b))
    show.raises("Frame(frame)", lambda: molrs.Frame(molrs.Frame()))
    MetaValue = molrs.core.MetaValue
    show.raises("unknown tag", lambda: MetaValue("zz", 1))
    show.raises("i32 overflow", lambda: MetaValue("i32", 2**40))
    f = molrs.Frame()
    show.raises("meta int key", lambda: f.meta.__setitem__(1, 2))
    show.raises("meta huge int", lambda: f.meta.__setitem__("k", 2**64))
    show.raises("meta object", lambda: f.meta.__setitem__("k", object()))
    show.raises("meta numpy int", lambda: f.meta.__setitem__("k", np.int64(3)))
    show.raises("step list", lambda: molrs.Trajectory([f], step=[1]))
    show.raises("step length", lambda: molrs.Trajectory([f, f], step=np.array([1], dtype=np.int64)))
    fr = molrs.Frame({"atoms": {"x": np.array([1.0])}})
    schema = molrs.io.mrec.SequenceSchema.from_frames([fr])
    (out / "refused").mkdir()  # molrs leaves a record behind a refused writer; the drop-in does not
    show.raises("flush_every 0", lambda: molrs.io.mrec.MrecWriter(out / "refused" / "fe.mrec", schema, flush_every=0))
    show.raises("compression", lambda: molrs.io.mrec.MrecWriter(out / "refused" / "cz.mrec", schema, compression="lz4"))
    show.raises("schema precision on u64", lambda: schema.declare_column("atoms", "k", "u64").declare_precision("atoms", "k", 0.1))
    show.raises("schema target on f64", lambda: schema.declare_target("atoms", "x", "atoms"))
    show.raises("schema trajectory target", lambda: schema.declare_target("atoms", "k", "/trajectory/atoms"))
    show.raises("schema unknown dtype", lambda: schema.declare_column("atoms", "z", "float"))
    show.raises("schema meta dtype", lambda: schema.declare_meta("q", "zz"))
    canonical(molrs, show)


def _catch(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def canonical(molrs, show):
    b = molrs.Block()
    show.raises("canonical id f64", lambda: b.insert("id", np.array([1.0, 2.0])))
    show.raises("canonical x i64", lambda: b.insert("x", np.array([1, 2])))
    show.raises("canonical element i64", lambda: b.insert("element", np.array([1, 2])))
    show.raises("canonical charge bool", lambda: b.insert("charge", np.array([True, False])))
    b["id"] = np.array([1, 2])
    b["x"] = np.array([1, 2])
    show("adopted", b.dtype("id"), b["id"], b.dtype("x"), b["x"])
    show.raises("adopt element", lambda: b.__setitem__("element", np.array([1, 2])))
