"""frame.meta as a mapping: get, pop, popitem, setdefault, update, |, |=, del, copy, equality."""


def run(molrs, out, show):
    f = molrs.Frame(meta={"a": 1, "b": "two"})
    m = f.meta
    show("init", len(m), list(m), "a" in m, "z" in m, m.get("z", "dflt"), m.dtype("z"))
    m.update({"c": 3.5}, d=[1, 2])
    show("update", list(m.items()))
    show("pop", m.pop("a"), m.pop("zz", None), list(m.keys()))
    show("popitem", m.popitem(), list(m.keys()))
    show("setdefault", m.setdefault("e", 9), m.setdefault("e", 10), m["e"])
    show("or", m | {"x": 1}, {"y": 2} | m)
    m |= {"f": False}
    show("ior", list(f.meta.keys()), f.meta.dtype("f"))
    del m["b"]
    show("del", m.copy(), m == {"c": 3.5, "e": 9, "f": False})
    f.meta = {"only": "this"}
    show("replaced", f.meta.copy())
    f.meta.clear()
    show("cleared", len(f.meta))
    show.raises("int key", lambda: f.meta.__setitem__(1, 2))
    show.raises("missing", lambda: f.meta["nope"])
    f.meta["d"] = {"k": [1, 2]}
    show.raises("frozen", lambda: f.meta["d"].__setitem__("k", 3))
