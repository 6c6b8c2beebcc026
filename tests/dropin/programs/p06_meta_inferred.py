"""frame.meta with plain values: the tag each gets, the frozen value handed back, a round trip."""


def run(molrs, out, show):
    f = molrs.Frame({"atoms": {"x": [1.0]}})
    values = {
        "flag": True, "n": 5, "neg": -7, "big": 2**63 + 1, "T": 300.25, "name": "water",
        "vec3": (1.0, 2.0, 3.0), "ivec3": [1, 2, 3], "six": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
        "nine": tuple(float(i) for i in range(9)), "pair": (1.0, 2.0), "words": ("a", "b", "c"),
        "doc": {"run": {"steps": [1, 2], "ok": True}}, "none": None, "nested": [1, [2, {"k": "v"}]],
    }
    for key, value in values.items():
        f.meta[key] = value
    show.frame("memory", f, sort=False)
    molrs.io.write_mrec(out / "meta_inferred.mrec", frame=f)
    g = molrs.io.mrec.MrecFile(out / "meta_inferred.mrec").frame()
    show.frame("read", g)
    show("doc copy", g.meta["doc"].copy(), g.meta["doc"]["run"]["steps"])
