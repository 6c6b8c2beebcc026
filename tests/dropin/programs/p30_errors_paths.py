"""Where molrs refuses a source or sink: a str path, a bytearray or memoryview source, no record."""
import pathlib

import numpy as np


def run(molrs, out, show):
    f = molrs.Frame({"atoms": {"x": np.array([1.0])}})
    mrec = molrs.io.mrec
    show.raises("write_mrec str", lambda: molrs.io.write_mrec(str(out / "s.mrec"), frame=f))
    show.raises("write_mrec int", lambda: molrs.io.write_mrec(3, frame=f))
    molrs.io.write_mrec(out / "p.mrec", frame=f)
    show.raises("MrecFile str", lambda: mrec.MrecFile(str(out / "p.mrec")))
    show.raises("MrecReader str", lambda: mrec.MrecReader(str(out / "p.mrec")))
    data = bytearray()
    molrs.io.write_mrec(data, frame=f)
    show.raises("MrecFile bytearray", lambda: mrec.MrecFile(data))
    show.raises("MrecFile memoryview", lambda: mrec.MrecFile(memoryview(bytes(data))))
    show.raises("MrecFile missing", lambda: mrec.MrecFile(pathlib.Path("nope.mrec")))
    show.raises("MrecReader missing", lambda: mrec.MrecReader(pathlib.Path("nope.mrec")))
    show.raises("MrecReader no trajectory", lambda: mrec.MrecReader(out / "p.mrec"))
    show.raises("pack missing", lambda: mrec.pack_mrec_zip(out / "nope.mrec"))
    show.raises("open no trajectory", lambda: mrec.MrecWriter.open(out / "p.mrec"))
    show.raises("meta only", lambda: molrs.io.write_mrec(out / "m.mrec", meta={"a": 1}))
    show.raises("nothing", lambda: molrs.io.write_mrec(out / "n.mrec"))
    show.raises("meta NaN", lambda: molrs.io.write_mrec(out / "nan.mrec", meta={"x": float("nan")}, frame=f))
    show.raises("meta MetaValue", lambda: molrs.io.write_mrec(out / "mv.mrec", meta={"x": molrs.core.MetaValue("i32", 1)},
                                                              frame=f))
    show("str writer path", _writer_str(molrs, out, f))


def _writer_str(molrs, out, f):
    schema = molrs.io.mrec.SequenceSchema.from_frames([f])
    with molrs.io.mrec.MrecWriter(str(out / "str_writer.mrec"), schema) as w:
        w.append(f)
    return len(molrs.io.mrec.MrecReader(out / "str_writer.mrec"))
