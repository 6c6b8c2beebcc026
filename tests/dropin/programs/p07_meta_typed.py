"""MetaValue for every one of the 16 tags: dtype, value, round trip through a record."""


def run(molrs, out, show):
    MetaValue = molrs.core.MetaValue
    typed = {
        "b": MetaValue("bool", False), "i32": MetaValue("i32", -5), "i64": MetaValue("i64", 2**40),
        "u32": MetaValue("u32", 7), "u64": MetaValue("u64", 2**64 - 1), "f64": MetaValue("f64", 0.1),
        "s": MetaValue("string", "ünï"), "j": MetaValue("json", {"a": [1, 2.5]}),
        "b3": MetaValue("bool3", (True, False, True)), "i32x3": MetaValue("i32x3", (1, -2, 3)),
        "i64x3": MetaValue("i64x3", (2**40, 0, -1)), "u32x3": MetaValue("u32x3", (1, 2, 3)),
        "u64x3": MetaValue("u64x3", (2**63, 1, 0)), "f64x3": MetaValue("f64x3", (0.5, 1.5, 2.5)),
        "f64x6": MetaValue("f64x6", (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)),
        "f64x9": MetaValue("f64x9", (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)),
        "nan": MetaValue("f64", float("nan")),
        # full-precision doubles: a value rounded anywhere on its way prints otherwise
        "pi": MetaValue("f64", 3.141592653589793), "third": MetaValue("f64", 1 / 3),
        "tiny": MetaValue("f64", 1.2345678901234567e-300), "f64x3_full": MetaValue("f64x3", (0.1 + 0.2, 2 / 3, 1e-9)), "inf": MetaValue("f64", float("-inf")),
    }
    show("values", [(k, v.dtype, v.value) for k, v in typed.items()])
    f = molrs.Frame({"atoms": {"x": [0.0]}})
    for key, value in typed.items():
        f.meta[key] = value
    show("dtypes", [(k, f.meta.dtype(k)) for k in f.meta])
    molrs.io.write_mrec(out / "meta_typed.mrec", frame=f, system=f)
    g = molrs.io.mrec.MrecFile(out / "meta_typed.mrec").system()
    show.frame("read", g)
    show("typed", [(k, v.dtype, v.value) for k, v in g.meta.typed().items()])
