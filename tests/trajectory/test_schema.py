"""SequenceSchema, the pinned declaration (trajectory §4, §5.1–§5.3, §8.4–§8.7; checklist §18:
W1–W11 declaration refusals, R11/R13/R16 pin reading; README decisions 17)."""
import json
import math

import numpy as np
import orjson
import pytest

from molrec_raw.errors import InvalidValueError, SpecViolationError
from molrec_raw.record.model import Block, Frame, MetaValue
from molrec_raw.record.typed_json import TAGS
from molrec_raw.record.trajectory import ColumnSpec, MetaSpec, SequenceSchema

W = {n: f"trajectory#W{n}" for n in range(1, 12)}
R11, R13, R16 = "trajectory#R11", "trajectory#R13", "trajectory#R16"
NAME = "trajectory#4"

# trajectory §4, verbatim (key order included)
EXAMPLE = """{"blocks": {
   "atoms": {"columns": {
       "x":      {"dtype": "f64", "trailing": [], "precision": 0.001},
       "pos":    {"dtype": "f64", "trailing": [3]},
       "charge": {"dtype": "f64", "trailing": [], "nullable": true}},
     "structural_shape": [4, 4, 4]},
   "members":    {"columns": {"ibead": {"dtype": "u64", "trailing": []}},
                  "targets": {"ibead": "atoms"}},
   "atom_types": {"columns": {"type": {"dtype": "string", "trailing": []}},
                  "aligned_with": "atoms"}},
 "meta": {"pe":    {"dtype": "f64"},
          "temp":  {"dtype": "f64", "fill": "NaN"},
          "note":  {"dtype": "json", "fill": null},
          "count": {"dtype": "u64", "fill": "18446744073709551615"}}}"""


def refused(rule, *fragments):
    """Context: a SpecViolationError with ``rule`` whose text holds every fragment."""

    class _Ctx:
        def __enter__(self):
            self.raises = pytest.raises(SpecViolationError)
            self.info = self.raises.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.raises.__exit__(*exc)
            err = self.info.value
            assert err.rule == rule, f"rule {err.rule} != {rule}: {err}"
            for fragment in fragments:
                assert fragment in str(err), f"{fragment!r} not in {err}"
            return suppressed

    return _Ctx()


def atoms_schema():
    return (SequenceSchema()
            .declare_block("atoms", rows=3)
            .declare_column("atoms", "x", "f64")
            .declare_column("atoms", "pos", "f64", (3,)))


def via_json(doc):
    return orjson.loads(orjson.dumps(doc))


def frame(meta=None, **blocks):
    return Frame(meta=dict(meta or {}), blocks=dict(blocks))


# ---------------------------------------------------------------- the pinned JSON form (§4)

def test_trajectory_4_example_round_trips_exactly_key_order_too():
    doc = json.loads(EXAMPLE)
    schema = SequenceSchema.from_json(doc)
    assert json.dumps(schema.to_json()) == json.dumps(doc)
    assert orjson.dumps(schema.to_json()) == orjson.dumps(doc)
    again = SequenceSchema.from_json(via_json(schema.to_json()))
    assert again == schema and json.dumps(again.to_json()) == json.dumps(doc)


def test_trajectory_4_example_accessors():
    s = SequenceSchema.from_json(json.loads(EXAMPLE))
    assert s.block_names() == ["atoms", "members", "atom_types"]
    assert s.has_block("atoms") and not s.has_block("bonds")
    assert list(s.columns("atoms")) == ["x", "pos", "charge"]
    assert s.column_names("atoms") == ["x", "pos", "charge"]
    assert s.columns("atoms")["x"] == ColumnSpec("f64", (), False, 0.001)
    assert s.columns("atoms")["pos"] == ColumnSpec("f64", (3,))
    assert s.columns("atoms")["charge"].nullable is True
    assert s.structural_shape("atoms") == (4, 4, 4) and s.structural_shape("members") is None
    assert s.rows("atoms") == 64 and s.rows("members") == 0
    assert s.targets("members") == {"ibead": "atoms"} and s.targets("atoms") == {}
    assert s.target("members", "ibead") == "atoms" and s.target("members", "nope") is None
    assert s.aligned_with("atom_types") == "atoms" and s.aligned_with("atoms") is None
    assert s.precision("atoms", "x") == 0.001 and s.precision("atoms", "pos") is None
    assert s.meta_keys() == [("pe", "f64"), ("temp", "f64"), ("note", "json"), ("count", "u64")]
    tag, has_fill, fill = s.meta_spec("temp")
    assert (tag, has_fill) == ("f64", True) and math.isnan(fill)
    assert tuple(s.meta_spec("pe")) == ("f64", False, None)
    assert tuple(s.meta_spec("note")) == ("json", True, None)
    assert s.meta_spec("count").fill == 2**64 - 1
    assert s.meta_spec("count").fill_json == "18446744073709551615"
    with pytest.raises(KeyError, match="bonds"):
        s.columns("bonds")
    with pytest.raises(KeyError, match="nope"):
        s.meta_spec("nope")


def test_trajectory_4_optional_keys_only_when_set_and_meta_always_present():
    s = SequenceSchema().declare_block("empty")
    assert s.to_json() == {"blocks": {"empty": {"columns": {}}}, "meta": {}}
    assert SequenceSchema().to_json() == {"blocks": {}, "meta": {}}
    s = atoms_schema().declare_meta("pe", "f64")
    assert s.to_json() == {
        "blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []},
                                         "pos": {"dtype": "f64", "trailing": [3]}}}},
        "meta": {"pe": {"dtype": "f64"}},
    }


def test_trajectory_4_declaration_order_kept():
    s = SequenceSchema()
    for block in ("zeta", "alpha", "mu"):
        s.declare_column(block, "c", "i32").declare_column(block, "b", "i32").declare_column(block, "a", "i32")
    for key in ("zeta", "alpha", "mu"):
        s.declare_meta(key, "i64")
    doc = s.to_json()
    assert list(doc["blocks"]) == ["zeta", "alpha", "mu"]
    assert list(doc["blocks"]["alpha"]["columns"]) == ["c", "b", "a"]
    assert list(doc["meta"]) == ["zeta", "alpha", "mu"]
    assert [k for k, _ in SequenceSchema.from_json(via_json(doc)).meta_keys()] == ["zeta", "alpha", "mu"]


def test_trajectory_4_to_json_is_a_fresh_document():
    s = SequenceSchema().declare_meta_with_fill("cfg", {"a": [1]}, "json")
    doc = s.to_json()
    doc["meta"]["cfg"]["fill"]["a"].append(2)
    assert s.to_json()["meta"]["cfg"]["fill"] == {"a": [1]}


def test_trajectory_4_declare_calls_chain_and_declare_column_declares_the_block():
    s = SequenceSchema()
    assert s.declare_column("bonds", "atomi", "u64") is s
    assert s.block_names() == ["bonds"]
    assert s.declare_block("bonds", rows=5).declare_block("bonds", rows=2).rows("bonds") == 5
    assert s.declare_column("bonds", "atomi", "u64").column_names("bonds") == ["atomi"]  # no-op
    with pytest.raises(InvalidValueError):
        s.declare_block("bonds", rows=-1)


def test_trajectory_4_equality_ignores_row_hints_and_order_not_content():
    a = SequenceSchema().declare_block("atoms", rows=10).declare_column("atoms", "x", "f64")
    b = SequenceSchema().declare_column("atoms", "x", "f64")
    assert a == b and a.rows("atoms") != b.rows("atoms")
    c = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("bonds", "atomi", "u64")
    d = SequenceSchema().declare_column("bonds", "atomi", "u64").declare_column("atoms", "x", "f64")
    assert c == d
    assert a != c
    assert a != SequenceSchema().declare_column("atoms", "x", "f64").declare_nullable("atoms", "x")
    assert a != SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 0.5)
    assert SequenceSchema().declare_meta("k", "f64") != SequenceSchema().declare_meta_with_fill("k", 0.0)
    # typed JSON compared as JSON: 1 vs 1.0 inside a json fill, -0.0 vs 0.0 in an f64 fill
    assert (SequenceSchema().declare_meta_with_fill("k", {"a": 1}, "json")
            != SequenceSchema().declare_meta_with_fill("k", {"a": 1.0}, "json"))
    assert SequenceSchema().declare_meta_with_fill("k", -0.0) != SequenceSchema().declare_meta_with_fill("k", 0.0)
    assert (SequenceSchema().declare_meta_with_fill("k", math.nan)
            == SequenceSchema().declare_meta_with_fill("k", float("nan")))
    assert a != "not a schema"


def test_trajectory_4_copy_is_independent():
    a = atoms_schema().declare_meta_with_fill("t", 1.5)
    b = a.copy()
    assert a == b and b.rows("atoms") == 3
    b.declare_column("atoms", "y", "f64")
    assert a != b and a.column_names("atoms") == ["x", "pos"]


# ---------------------------------------------------------------- W1, W2: reserved names

@pytest.mark.parametrize("name", ["step", "time", "meta", "box"])
def test_trajectory_W1_reserved_block_name_refused(name):
    with refused(W[1], name, "reserved"):
        SequenceSchema().declare_block(name)
    with refused(W[1], name):
        SequenceSchema().declare_column(name, "x", "f64")
    with refused(W[1], name):
        SequenceSchema.from_frame(Frame(blocks={name: Block({"x": np.zeros(2)})}))


@pytest.mark.parametrize("name", ["offset", "step_index", "_validity"])
def test_trajectory_W2_reserved_column_name_refused(name):
    with refused(W[2], name, "reserved"):
        SequenceSchema().declare_column("atoms", name, "u64")
    with refused(W[2], name):
        SequenceSchema.from_frame(frame(atoms=Block({name: np.zeros(2, np.uint64)})))


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", "__x", "zarr.json", 3])
def test_trajectory_4_invalid_node_names_refused(name):
    with refused(NAME):
        SequenceSchema().declare_block(name)
    with refused(NAME):
        SequenceSchema().declare_column("atoms", name, "f64")
    with refused(NAME):
        SequenceSchema().declare_meta(name, "f64")


# ---------------------------------------------------------------- W3, W4: declared twice

def test_trajectory_W3_column_redeclared_with_other_dtype_or_trailing_refused():
    s = atoms_schema()
    with refused(W[3], "'pos'", "f64", "i32"):
        s.declare_column("atoms", "pos", "i32", (3,))
    with refused(W[3], "'pos'", "[3]", "[9]"):
        s.declare_column("atoms", "pos", "f64", [9])
    with refused(W[3], "'pos'", "[3]", "[]"):
        s.declare_column("atoms", "pos", "f64")
    assert s == atoms_schema()  # nothing changed


def test_trajectory_W3_from_frames_dtype_and_trailing_conflicts_name_both():
    f1 = frame(atoms=Block({"probe": np.zeros(2)}))
    f2 = frame(atoms=Block({"probe": np.zeros(2, np.uint64)}))
    with refused(W[3], "'probe'", "f64", "u64"):
        SequenceSchema.from_frames([f1, f2])
    g1 = frame(atoms=Block({"v": np.zeros((2, 3))}))
    g2 = frame(atoms=Block({"v": np.zeros((2, 9))}))
    with refused(W[3], "'v'", "[3]", "[9]"):
        SequenceSchema.from_frames([g1, g2])


def test_trajectory_W4_second_structural_shape_refused():
    s = SequenceSchema().declare_block("grid").declare_structural_shape("grid", (2, 2))
    assert s.declare_structural_shape("grid", [2, 2]) is s  # same shape: no-op
    with refused(W[4], "grid", "[2, 2]", "[4]"):
        s.declare_structural_shape("grid", (4,))


def test_trajectory_W4_second_precision_refused():
    s = atoms_schema().declare_precision("atoms", "x", 1e-3)
    assert s.declare_precision("atoms", "x", 1e-3).precision("atoms", "x") == 1e-3  # idempotent
    with refused(W[4], "'x'", "0.001", "0.01"):
        s.declare_precision("atoms", "x", 1e-2)


def test_trajectory_W4_meta_key_with_two_tags_refused():
    s = SequenceSchema().declare_meta("pe", "f64")
    assert s.declare_meta("pe", "f64").meta_keys() == [("pe", "f64")]
    with refused(W[4], "'pe'", "f64", "i64"):
        s.declare_meta("pe", "i64")
    with refused(W[4], "'pe'", "f64", "i64"):
        s.declare_meta_with_fill("pe", 3)


def test_trajectory_W4_meta_key_with_two_fills_refused():
    s = SequenceSchema().declare_meta_with_fill("t", 300.0)
    assert s.declare_meta_with_fill("t", 300.0).meta_spec("t").fill == 300.0
    s.declare_meta("t", "f64")  # a plain re-declaration keeps the fill
    assert s.meta_spec("t").has_fill
    with refused(W[4], "'t'", "300.0", "NaN"):
        s.declare_meta_with_fill("t", math.nan)
    plain = SequenceSchema().declare_meta("u", "u64").declare_meta_with_fill("u", 7, "u64")
    assert tuple(plain.meta_spec("u")) == ("u64", True, 7)


def test_trajectory_W4_second_target_refused():
    s = SequenceSchema().declare_column("members", "ibead", "u64").declare_target("members", "ibead", "atoms")
    assert s.declare_target("members", "ibead", "atoms").target("members", "ibead") == "atoms"
    with refused(W[4], "'ibead'", "'atoms'", "'/system/atoms'"):
        s.declare_target("members", "ibead", "/system/atoms")


def test_trajectory_W4_from_frames_conflicts_name_both_values():
    p1 = frame(atoms=Block({"x": np.zeros(2)}, precision={"x": 1e-3}))
    p2 = frame(atoms=Block({"x": np.zeros(2)}, precision={"x": 1e-2}))
    with refused(W[4], "'x'", "0.001", "0.01"):
        SequenceSchema.from_frames([p1, p2])
    s1 = frame(grid=Block({"rho": np.zeros(4)}, structural_shape=(2, 2)))
    s2 = frame(grid=Block({"rho": np.zeros(4)}, structural_shape=(4, 1)))
    with refused(W[4], "grid", "[2, 2]", "[4, 1]"):
        SequenceSchema.from_frames([s1, s2])
    with refused(W[4], "grid", "[2, 2]", "None"):
        SequenceSchema.from_frames([s1, frame(grid=Block({"rho": np.zeros(4)}))])
    with refused(W[4], "'pe'", "f64", "i64"):
        SequenceSchema.from_frames([frame({"pe": 1.0}), frame({"pe": 1})])
    t1 = frame(m=Block({"ibead": np.zeros(1, np.uint64)}, targets={"ibead": "atoms"}))
    t2 = frame(m=Block({"ibead": np.zeros(1, np.uint64)}, targets={"ibead": "beads"}))
    with refused(W[4], "'ibead'", "'atoms'", "'beads'"):
        SequenceSchema.from_frames([t1, t2])


# ---------------------------------------------------------------- W5: unknown dtypes and tags

@pytest.mark.parametrize("dtype", ["f128", "float", "int", "uint", "json", "f32", "float64", "U", None, np.float64])
def test_trajectory_W5_unknown_column_dtype_refused(dtype):
    with refused(W[5], "dtype", repr(dtype) if isinstance(dtype, str) else ""):
        SequenceSchema().declare_column("atoms", "probe", dtype)


@pytest.mark.parametrize("dtype", sorted(["f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                          "bool", "string", "c64", "c128"]))
def test_trajectory_4_every_column_dtype_declares_and_round_trips(dtype):
    s = SequenceSchema().declare_column("b", "probe", dtype, (2,))
    assert SequenceSchema.from_json(via_json(s.to_json())) == s
    assert s.columns("b")["probe"] == ColumnSpec(dtype, (2,))


@pytest.mark.parametrize("trailing", [(0,), (3, 0), (-1,), (True,), (1.0,), "3", 3, [[3]]])
def test_trajectory_W5_malformed_trailing_refused(trailing):
    with refused(W[5], "trailing"):
        SequenceSchema().declare_column("atoms", "probe", "f64", trailing)


@pytest.mark.parametrize("tag", ["f16", "f32", "f128", "i64x6", "i8x3", "c64", "float", "int", "uint", "", None])
def test_trajectory_W5_unknown_meta_tag_refused(tag):
    with refused(W[5], "unknown dtype"):
        SequenceSchema().declare_meta("k", tag)
    with refused(W[5]):
        SequenceSchema.from_frame(frame({"k": MetaValue(tag, 1.0)}))


def test_trajectory_W5_from_frames_column_outside_the_13_refused():
    with refused(W[5], "float32"):
        SequenceSchema.from_frame(frame(atoms=Block({"probe": np.zeros(2, np.float32)})))
    with refused(W[5], "trailing"):
        SequenceSchema.from_frame(frame(atoms=Block({"probe": np.zeros((2, 0))})))


# ---------------------------------------------------------------- W6: precision

@pytest.mark.parametrize("p", [0, 0.0, -1e-3, math.nan, math.inf, -math.inf, 2.0**-1001, 2.0**1001, True, "0.1", None])
def test_trajectory_W6_precision_value_refused(p):
    with refused(W[6], "'x'"):
        atoms_schema().declare_precision("atoms", "x", p)


def test_trajectory_W6_precision_on_non_f64_or_undeclared_column_refused():
    s = atoms_schema().declare_column("atoms", "id", "u64")
    with refused(W[6], "'id'", "u64", "f64"):
        s.declare_precision("atoms", "id", 1e-3)
    with refused(W[6], "'y'", "not declared"):
        s.declare_precision("atoms", "y", 1e-3)
    with refused(W[6], "'ghost'", "not declared"):
        s.declare_precision("ghost", "x", 1e-3)
    with refused(W[6]):
        SequenceSchema.from_frame(frame(atoms=Block({"id": np.zeros(2, np.uint64)}, precision={"id": 0.1})))


def test_trajectory_W6_precision_bounds_inclusive():
    s = atoms_schema().declare_column("atoms", "y", "f64")
    s.declare_precision("atoms", "x", 2.0**-1000).declare_precision("atoms", "y", 2.0**1000)
    assert s.to_json()["blocks"]["atoms"]["columns"]["x"]["precision"] == 2.0**-1000
    assert s.precision("atoms", "y") == 2.0**1000
    assert SequenceSchema().declare_column("a", "x", "f64").declare_precision("a", "x", 1).precision("a", "x") == 1.0


# ---------------------------------------------------------------- W7: targets

def test_trajectory_W7_target_accepts_block_and_absolute_section_block():
    s = (SequenceSchema().declare_column("members", "ibead", "u64").declare_column("members", "atom", "u64")
         .declare_target("members", "ibead", "atoms").declare_target("members", "atom", "/system/atoms"))
    assert s.to_json()["blocks"]["members"]["targets"] == {"ibead": "atoms", "atom": "/system/atoms"}


@pytest.mark.parametrize("target", ["/trajectory/atoms", "a/b", "/frame/atoms/x", "", "/atoms", "atoms/", 3, None, ["atoms"]])
def test_trajectory_W7_malformed_target_refused(target):
    s = SequenceSchema().declare_column("members", "ibead", "u64")
    with refused(W[7], "'ibead'", "target"):
        s.declare_target("members", "ibead", target)
    assert s.targets("members") == {}


def test_trajectory_W7_target_on_non_u64_or_undeclared_column_refused():
    s = SequenceSchema().declare_column("m", "w", "f64").declare_column("m", "i", "u32").declare_column("m", "v", "u64", (2,))
    for column, dtype in (("w", "f64"), ("i", "u32"), ("v", "u64")):
        with refused(W[7], repr(column), dtype, "u64"):
            s.declare_target("m", column, "atoms")
    with refused(W[7], "'nope'", "not declared"):
        s.declare_target("m", "nope", "atoms")
    with refused(W[7], "'ghost'", "block is not declared"):
        s.declare_target("ghost", "nope", "atoms")
    with refused(W[7]):
        SequenceSchema.from_frame(frame(m=Block({"w": np.zeros(1)}, targets={"w": "atoms"})))


# ---------------------------------------------------------------- W8: aligned blocks

def aligned_base():
    return (SequenceSchema().declare_column("atoms", "x", "f64")
            .declare_column("atom_types", "type", "string")
            .declare_column("charges", "q", "f64"))


def test_trajectory_W8_aligned_declared_and_pinned():
    s = aligned_base().declare_aligned("atom_types", "atoms")
    assert s.declare_aligned("atom_types", "atoms") is s  # same pair again: no-op
    assert s.to_json()["blocks"]["atom_types"]["aligned_with"] == "atoms"
    assert "aligned_with" not in s.to_json()["blocks"]["atoms"]
    # a target with a structural shape is fine; two blocks aligned with one target too
    s.declare_aligned("charges", "atoms")
    assert s.aligned_with("charges") == "atoms"


def test_trajectory_W8_aligned_refusals():
    with refused(W[8], "declared"):
        aligned_base().declare_aligned("atom_types", "ghost")
    with refused(W[8], "declared"):
        aligned_base().declare_aligned("ghost", "atoms")
    with refused(W[8], "itself"):
        aligned_base().declare_aligned("atoms", "atoms")
    s = aligned_base().declare_aligned("atom_types", "atoms")
    with refused(W[8], "already aligned with 'atoms'"):
        s.declare_aligned("atom_types", "charges")
    with refused(W[8], "chain"):
        s.declare_aligned("charges", "atom_types")  # target itself aligned
    with refused(W[8], "chain"):
        s.declare_aligned("atoms", "charges")  # block is a target
    shaped = aligned_base().declare_structural_shape("atom_types", (1,))
    with refused(W[8], "structural shape"):
        shaped.declare_aligned("atom_types", "atoms")


def test_trajectory_W8_aligned_pair_shares_no_column_name():
    s = aligned_base().declare_column("atom_types", "x", "f64")
    with refused(W[8], "'x'", "disjoint"):
        s.declare_aligned("atom_types", "atoms")
    s = aligned_base().declare_aligned("atom_types", "atoms")
    with refused(W[8], "'x'", "disjoint"):
        s.declare_column("atom_types", "x", "f64")
    with refused(W[8], "'type'", "disjoint"):
        s.declare_column("atoms", "type", "string")
    assert s.column_names("atoms") == ["x"] and s.column_names("atom_types") == ["type"]


# ---------------------------------------------------------------- W9: nullable, structural_shape

def test_trajectory_W9_nullable_declared_and_on_undeclared_refused():
    s = atoms_schema().declare_nullable("atoms", "x").declare_nullable("atoms", "x")
    assert s.columns("atoms")["x"].nullable and not s.columns("atoms")["pos"].nullable
    assert s.to_json()["blocks"]["atoms"]["columns"]["x"] == {"dtype": "f64", "trailing": [], "nullable": True}
    with refused(W[9], "'probe'", "'atoms'"):
        s.declare_nullable("atoms", "probe")
    with refused(W[9], "'ghost'"):
        s.declare_nullable("ghost", "x")


def test_trajectory_W9_structural_shape_refusals():
    with refused(W[9], "'grid'", "not declared"):
        SequenceSchema().declare_structural_shape("grid", (2, 2))
    s = aligned_base().declare_aligned("atom_types", "atoms")
    with refused(W[9], "aligned"):
        s.declare_structural_shape("atom_types", (1,))
    for bad in ((-1,), (2.0,), (True,), "22", 4, None):
        with refused(W[9], "structural shape"):
            SequenceSchema().declare_block("g").declare_structural_shape("g", bad)


def test_trajectory_W9_structural_shape_sets_representative_rows():
    s = SequenceSchema().declare_block("grid", rows=5).declare_structural_shape("grid", [2, 3, 4])
    assert s.rows("grid") == 24 and s.structural_shape("grid") == (2, 3, 4)
    assert s.to_json()["blocks"]["grid"] == {"columns": {}, "structural_shape": [2, 3, 4]}
    assert SequenceSchema().declare_block("z").declare_structural_shape("z", (0, 3)).rows("z") == 0


# ---------------------------------------------------------------- W10: fills

# one valid value per tag, its typed JSON form, and the value read back
FILLS = {
    "bool": (True, True, True),
    "i32": (-(2**31), -(2**31), -(2**31)),
    "i64": (-(2**63), str(-(2**63)), -(2**63)),
    "u32": (2**32 - 1, 2**32 - 1, 2**32 - 1),
    "u64": (2**64 - 1, "18446744073709551615", 2**64 - 1),
    "f64": (math.nan, "NaN", math.nan),
    "string": ("é", "é", "é"),
    "json": (None, None, None),
    "bool3": ((True, False, True), [True, False, True], (True, False, True)),
    "i32x3": ((1, -2, 3), [1, -2, 3], (1, -2, 3)),
    "i64x3": ((2**53 + 1, 0, -1), [str(2**53 + 1), 0, -1], (2**53 + 1, 0, -1)),
    "u32x3": ((0, 1, 2**32 - 1), [0, 1, 2**32 - 1], (0, 1, 2**32 - 1)),
    "u64x3": ((2**64 - 1, 0, 1), ["18446744073709551615", 0, 1], (2**64 - 1, 0, 1)),
    "f64x3": ([1, 2.5, -math.inf], [1.0, 2.5, "-Infinity"], (1.0, 2.5, -math.inf)),
    "f64x6": ((1.0,) * 6, [1.0] * 6, (1.0,) * 6),
    "f64x9": (np.eye(3), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)),
}


def same(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_trajectory_5_3_fill_table_covers_all_16_tags():
    assert sorted(FILLS) == sorted(TAGS)


@pytest.mark.parametrize("tag", list(FILLS))
def test_trajectory_W10_fill_of_every_tag_pinned_in_typed_json_form(tag):
    value, typed, back = FILLS[tag]
    s = SequenceSchema().declare_meta_with_fill("k", value, tag)
    doc = s.to_json()
    assert doc["meta"]["k"] == {"dtype": tag, "fill": typed}
    spec = s.meta_spec("k")
    assert spec.tag == tag and spec.has_fill and same(spec.fill, back)
    read = SequenceSchema.from_json(via_json(doc))
    assert read == s and read.to_json() == doc and same(read.meta_spec("k").fill, back)


def test_trajectory_W10_fill_special_values_pinned_exactly():
    s = (SequenceSchema().declare_meta_with_fill("temp", math.nan)
         .declare_meta_with_fill("count", 2**64 - 1, "u64")
         .declare_meta_with_fill("note", None))
    assert orjson.dumps(s.to_json()["meta"]) == (
        b'{"temp":{"dtype":"f64","fill":"NaN"},"count":{"dtype":"u64","fill":"18446744073709551615"},'
        b'"note":{"dtype":"json","fill":null}}')


@pytest.mark.parametrize("fill,tag", [
    (300.0, "f64"), (math.nan, "f64"), (np.float64(1.5), "f64"), (None, "json"), (True, "bool"),
    ("s", "string"), (3, "i64"), (2**64 - 1, "u64"), ([1, 2], "json"), ({"a": 1}, "json"),
    (MetaValue("f64x3", (1.0, 2.0, 3.0)), "f64x3"), (MetaValue("i32", 5), "i32"),
])
def test_trajectory_W10_fill_tag_inferred_like_typed_meta(fill, tag):
    s = SequenceSchema().declare_meta_with_fill("k", fill)
    assert s.meta_keys() == [("k", tag)]


@pytest.mark.parametrize("fill,tag", [
    (None, "f64"), (None, "i64"), (None, "string"), (None, "f64x3"),  # null fill only for json
    (0.5, "i64"), ("1", "i64"), (True, "f64"), (2**64, "u64"), (-1, "u32"), (2**31, "i32"),
    ("x", "f64"), (1, "bool"), (1, "string"), ([1.0, 2.0], "f64x3"), ((1, 2, 3, 4), "i32x3"),
    ({"a": math.nan}, "json"), (2**53 + 1, "f64"),
])
def test_trajectory_W10_fill_not_valid_for_its_tag_refused(fill, tag):
    s = SequenceSchema()
    with refused(W[10], "'k'", tag):
        s.declare_meta_with_fill("k", fill, tag)
    assert s.meta_keys() == []  # a refused declaration changes nothing


def test_trajectory_W10_fill_refusals_leave_declared_key_unchanged():
    s = SequenceSchema().declare_meta("k", "f64")
    with refused(W[10]):
        s.declare_meta_with_fill("k", None, "f64")
    assert tuple(s.meta_spec("k")) == ("f64", False, None)
    with refused(W[10], "tagged"):
        s.declare_meta_with_fill("k", MetaValue("i32", 1), "f64")
    with refused(W[10]):
        s.declare_meta_with_fill("big", 2**70)  # no tag can hold it untagged
    with refused(W[5], "f16"):
        s.declare_meta_with_fill("h", 1.0, "f16")


# ---------------------------------------------------------------- W11: canonical keys

def test_trajectory_W11_canonical_key_at_non_canonical_dtype_refused():
    with refused(W[11], "'atomi'", "u64", "u32"):
        SequenceSchema().declare_column("bonds", "atomi", "u32")
    with refused(W[11], "'x'", "canonical", "f64", "i32"):
        SequenceSchema().declare_column("atoms", "x", "i32")
    with refused(W[11], "'x'", "trailing"):
        SequenceSchema().declare_column("atoms", "x", "f64", (3,))
    assert SequenceSchema().declare_column("bonds", "atomi", "u64").column_names("bonds") == ["atomi"]
    assert SequenceSchema().declare_column("bonds", "label", "u32").columns("bonds")["label"].dtype == "u32"


def test_trajectory_W11_from_frames_pins_canonical_keys_at_their_dtype():
    f = frame(bonds=Block({"atomi": np.arange(3), "atomj": np.arange(3, dtype=np.uint32),
                           "label": np.arange(3, dtype=np.uint32)}),
              atoms=Block({"x": np.arange(2, dtype=np.int32), "ix": np.zeros(2, np.int64)}))
    s = SequenceSchema.from_frame(f)
    assert {c: spec.dtype for c, spec in s.columns("bonds").items()} == {"atomi": "u64", "atomj": "u64", "label": "u32"}
    assert {c: spec.dtype for c, spec in s.columns("atoms").items()} == {"x": "f64", "ix": "i32"}
    with refused(W[11], "atomi"):
        SequenceSchema.from_frame(frame(bonds=Block({"atomi": np.zeros(3)})))
    with refused(W[11], "'x'"):
        SequenceSchema.from_frame(frame(atoms=Block({"x": np.zeros((2, 3))})))


# ---------------------------------------------------------------- from_frames (§4)

def test_trajectory_4_from_frames_union_rows_nullable_precision_targets_meta():
    f0 = frame({"step": 7, "time": 0.5, "pe": -1.0, "flag": MetaValue("i32", 3)},
               atoms=Block({"x": np.zeros(3), "id": np.arange(3, dtype=np.uint64)}, precision={"x": 1e-3}))
    f1 = frame({"pe": 2.0, "com": MetaValue("f64x3", (0.0, 0.0, 0.0)), "note": {"a": 1}},
               atoms=Block({"x": np.zeros(5), "q": np.zeros(5)}, masks={"q": np.ones(5, bool)}),
               bonds=Block({"atomi": np.zeros(0, np.uint64), "atomj": np.zeros(0, np.uint64)},
                           targets={"atomi": "atoms"}))
    f2 = frame(grid=Block({"rho": np.zeros(8)}, structural_shape=(2, 2, 2)),
               bonds=Block({"atomi": np.zeros(2, np.uint64), "atomj": np.zeros(2, np.uint64)},
                           masks={"atomj": np.array([True, False])}))
    s = SequenceSchema.from_frames(iter([f0, f1, f2]))
    assert s.block_names() == ["atoms", "bonds", "grid"]
    assert s.column_names("atoms") == ["x", "id", "q"]
    assert s.rows("atoms") == 5 and s.rows("bonds") == 2 and s.rows("grid") == 8
    assert s.precision("atoms", "x") == 1e-3
    assert s.columns("atoms")["q"].nullable and not s.columns("atoms")["x"].nullable
    assert s.columns("bonds")["atomj"].nullable and not s.columns("bonds")["atomi"].nullable
    assert s.targets("bonds") == {"atomi": "atoms"}
    assert s.structural_shape("grid") == (2, 2, 2)
    assert s.meta_keys() == [("pe", "f64"), ("flag", "i32"), ("com", "f64x3"), ("note", "json")]
    assert all(not spec.has_fill for spec in (s.meta_spec(k) for k, _ in s.meta_keys()))
    declared = (SequenceSchema()
                .declare_column("atoms", "x", "f64").declare_column("atoms", "id", "u64")
                .declare_column("atoms", "q", "f64").declare_precision("atoms", "x", 1e-3)
                .declare_nullable("atoms", "q")
                .declare_column("bonds", "atomi", "u64").declare_column("bonds", "atomj", "u64")
                .declare_nullable("bonds", "atomj").declare_target("bonds", "atomi", "atoms")
                .declare_column("grid", "rho", "f64").declare_structural_shape("grid", (2, 2, 2))
                .declare_meta("pe", "f64").declare_meta("flag", "i32").declare_meta("com", "f64x3")
                .declare_meta("note", "json"))
    assert s == declared
    assert SequenceSchema.from_frame(f0) == SequenceSchema.from_frames([f0])


def test_trajectory_4_from_frames_empty_block_declares_late_block_and_step_time_skipped():
    s = SequenceSchema.from_frames([frame({"step": 1, "time": 2.0}), frame(bonds=Block())])
    assert s.block_names() == ["bonds"] and s.columns("bonds") == {} and s.meta_keys() == []
    assert s.to_json() == {"blocks": {"bonds": {"columns": {}}}, "meta": {}}
    assert SequenceSchema.from_frames([]) == SequenceSchema()
    with pytest.raises(InvalidValueError):
        SequenceSchema.from_frames([{"atoms": {}}])


def test_trajectory_4_from_frames_string_bool_complex_columns():
    f = frame(atoms=Block({"element": np.array(["O", "H"]), "free": np.array([True, False]),
                           "psi": np.zeros((2, 4), np.complex64), "tag": np.array(["a", "b"], dtype=object)}))
    cols = SequenceSchema.from_frame(f).columns("atoms")
    assert [(c.dtype, c.trailing) for c in cols.values()] == [("string", ()), ("bool", ()), ("c64", (4,)), ("string", ())]


def test_trajectory_W5_from_frames_untaggable_meta_refused():
    with refused(W[5], "'big'"):
        SequenceSchema.from_frame(frame({"big": 2**70}))


# ---------------------------------------------------------------- reading a pin (R11, R13, R16)

def test_trajectory_R11_legacy_tags_read_only_decision_17():
    doc = {"blocks": {"atoms": {"columns": {"x": {"dtype": "float", "trailing": []},
                                            "ix": {"dtype": "int"}, "id": {"dtype": "uint"}}}},
           "meta": {"pe": {"dtype": "float", "fill": "NaN"}, "n": {"dtype": "int"}, "c": {"dtype": "uint", "fill": 1}}}
    s = SequenceSchema.from_json(doc)
    assert [c.dtype for c in s.columns("atoms").values()] == ["f64", "i32", "u64"]
    assert s.meta_keys() == [("pe", "f64"), ("n", "i32"), ("c", "u64")]
    out = s.to_json()
    assert out["blocks"]["atoms"]["columns"]["ix"] == {"dtype": "i32", "trailing": []}
    assert out["meta"] == {"pe": {"dtype": "f64", "fill": "NaN"}, "n": {"dtype": "i32"}, "c": {"dtype": "u64", "fill": 1}}
    assert "float" not in json.dumps(out) and "uint" not in json.dumps(out)
    with refused(R11, "float"):
        SequenceSchema.from_json(doc, allow_legacy=False)
    with refused(R11, "uint"):
        SequenceSchema.from_json({"blocks": {}, "meta": {"c": {"dtype": "uint"}}}, allow_legacy=False)
    with refused(W[5], "float"):  # never written
        SequenceSchema().declare_column("atoms", "x", "float")


def test_trajectory_R11_missing_trailing_and_meta_and_false_nullable_read():
    s = SequenceSchema.from_json({"blocks": {"atoms": {"columns": {"v": {"dtype": "f64", "nullable": False}}}}})
    assert s.columns("atoms")["v"] == ColumnSpec("f64", ())
    assert s.to_json() == {"blocks": {"atoms": {"columns": {"v": {"dtype": "f64", "trailing": []}}}}, "meta": {}}
    old = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []}}}}, "meta": {}}
    assert SequenceSchema.from_json(old) == SequenceSchema().declare_column("atoms", "x", "f64")  # pin without nullable


def test_trajectory_R11_fixtures_valid():
    valid_atoms = {"blocks": {"atoms": {"columns": {"mol_id": {"dtype": "u64", "trailing": [], "nullable": True},
                                                    "x": {"dtype": "f64", "trailing": []}}}},
                   "meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}
    valid_targets = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []}}},
                                "members": {"columns": {"atom": {"dtype": "u64", "trailing": []},
                                                        "ibead": {"dtype": "u64", "trailing": []}},
                                            "targets": {"atom": "/system/atoms", "ibead": "atoms"}}},
                     "meta": {}}
    for doc in (valid_atoms, valid_targets):
        assert SequenceSchema.from_json(doc).to_json() == doc


def pin(column=None, block=None, meta=None, extra_blocks=None):
    blk = {"columns": {"x": column if column is not None else {"dtype": "f64", "trailing": []}}}
    blk.update(block or {})
    return {"blocks": {"atoms": blk, **(extra_blocks or {})}, "meta": meta or {}}


@pytest.mark.parametrize("doc,fragment", [
    ("not a schema", "JSON object"),
    (None, "JSON object"),
    ({}, "blocks"),
    ({"blocks": [], "meta": {}}, "blocks"),
    ({"blocks": {}, "meta": []}, "meta"),
    ({"blocks": {}, "meta": {}, "extra": 1}, "extra"),
    ({"blocks": {"atoms": {}}}, "columns"),
    ({"blocks": {"atoms": {"columns": []}}}, "columns"),
    ({"blocks": {"atoms": []}}, "JSON object"),
    (pin(block={"rows": 3}), "rows"),
    (pin(column={"trailing": []}), "dtype"),
    (pin(column={"dtype": "f128", "trailing": []}), "f128"),
    (pin(column={"dtype": "float32", "trailing": []}), "float32"),
    (pin(column={"dtype": 7, "trailing": []}), "dtype"),
    (pin(column={"dtype": "f64", "trailing": [0]}), "trailing"),
    (pin(column={"dtype": "f64", "trailing": [-1]}), "trailing"),
    (pin(column={"dtype": "f64", "trailing": [3.0]}), "trailing"),
    (pin(column={"dtype": "f64", "trailing": [True]}), "trailing"),
    (pin(column={"dtype": "f64", "trailing": None}), "trailing"),
    (pin(column={"dtype": "f64", "trailing": [], "nullable": 1}), "nullable"),
    (pin(column={"dtype": "f64", "trailing": [], "nullable": None}), "nullable"),
    (pin(column={"dtype": "f64", "trailing": [], "precision": None}), "precision"),
    (pin(column={"dtype": "f64", "trailing": [], "precision": "0.1"}), "precision"),
    (pin(column={"dtype": "f64", "trailing": [], "precision": True}), "precision"),
    (pin(column={"dtype": "f64", "trailing": [], "precision": 0}), "precision"),
    (pin(column={"dtype": "f64", "trailing": [], "precision": 1e-310}), "precision"),
    (pin(column={"dtype": "f64", "trailing": [], "units": "nm"}), "units"),
    (pin(block={"structural_shape": [2.0]}), "structural_shape"),
    (pin(block={"structural_shape": "4"}), "structural_shape"),
    (pin(block={"structural_shape": None}), "structural_shape"),
    (pin(block={"targets": []}), "targets"),
    (pin(block={"targets": {"ghost": "atoms"}}), "ghost"),
    (pin(block={"targets": {"x": "atoms"}}), "u64"),
    ({"blocks": {"box": {"columns": {}}}}, "reserved"),
    ({"blocks": {"a/b": {"columns": {}}}}, "node name"),
    (pin(column={"dtype": "f64"}, extra_blocks={"b": {"columns": {"offset": {"dtype": "u64"}}}}), "reserved"),
    ({"blocks": {}, "meta": {"k": "f64"}}, "JSON object"),
    ({"blocks": {}, "meta": {"k": {}}}, "dtype"),
    ({"blocks": {}, "meta": {"k": {"dtype": "f64", "extra": 1}}}, "extra"),
    ({"blocks": {}, "meta": {"k": {"dtype": "i64x6"}}}, "i64x6"),
    ({"blocks": {}, "meta": {"k": {"dtype": "f32"}}}, "f32"),
])
def test_trajectory_R11_malformed_pin_refused(doc, fragment):
    with refused(R11, fragment):
        SequenceSchema.from_json(doc)


def test_trajectory_R11_fixture_invalid_precision_on_u64():
    doc = {"blocks": {"atoms": {"columns": {"id": {"dtype": "u64", "trailing": [], "precision": 0.001}}}}, "meta": {}}
    with refused(R11, "'id'", "f64"):
        SequenceSchema.from_json(doc)


def test_trajectory_R11_fixture_invalid_target_path():
    doc = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []}}},
                      "members": {"columns": {"atom": {"dtype": "u64", "trailing": []}},
                                  "targets": {"atom": "/frame/atoms/x"}}}, "meta": {}}
    with refused(R11, "/frame/atoms/x"):
        SequenceSchema.from_json(doc)
    doc["blocks"]["members"]["targets"]["atom"] = "/trajectory/atoms"
    with refused(R11, "/trajectory/atoms"):
        SequenceSchema.from_json(doc)


def test_trajectory_R11_fixture_invalid_width_abstract_dtype_without_legacy():
    doc = {"blocks": {"atoms": {"columns": {"x": {"dtype": "float"}}}}, "meta": {}}
    with refused(R11, "float"):
        SequenceSchema.from_json(doc, allow_legacy=False)


@pytest.mark.parametrize("entry,fragment", [
    ({"dtype": "f64", "fill": None}, "'temp'"),  # a NaN lost to null must not pass
    ({"dtype": "i64", "fill": None}, "'temp'"),
    ({"dtype": "f64", "fill": "nan"}, "f64"),
    ({"dtype": "f64", "fill": "1.5"}, "f64"),
    ({"dtype": "i64", "fill": 0.5}, "i64"),
    ({"dtype": "i64", "fill": "1e3"}, "i64"),
    ({"dtype": "u64", "fill": "18446744073709551616"}, "u64"),
    ({"dtype": "u32", "fill": -1}, "u32"),
    ({"dtype": "bool", "fill": 0}, "bool"),
    ({"dtype": "string", "fill": None}, "string"),
    ({"dtype": "f64x3", "fill": [1.0, 2.0]}, "f64x3"),
    ({"dtype": "f64x3", "fill": "NaN"}, "f64x3"),
    ({"dtype": "bool3", "fill": [True, False, 1]}, "bool"),
])
def test_trajectory_R11_pinned_fill_invalid_for_its_tag_refused(entry, fragment):
    with refused(R11, fragment):
        SequenceSchema.from_json({"blocks": {}, "meta": {"temp": entry}})


def test_trajectory_R11_pinned_fills_read_in_canonical_form():
    doc = {"blocks": {}, "meta": {"a": {"dtype": "u64", "fill": "5"}, "b": {"dtype": "f64", "fill": 2},
                                  "c": {"dtype": "i64", "fill": "-9007199254740993"},
                                  "d": {"dtype": "json", "fill": {"k": [1, 2.5, None]}}}}
    s = SequenceSchema.from_json(doc)
    assert s.to_json()["meta"] == {"a": {"dtype": "u64", "fill": 5}, "b": {"dtype": "f64", "fill": 2.0},
                                   "c": {"dtype": "i64", "fill": "-9007199254740993"},
                                   "d": {"dtype": "json", "fill": {"k": [1, 2.5, None]}}}
    assert s.meta_spec("c").fill == -(2**53) - 1


def aligned_pin(**overrides):
    blocks = {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []}}},
              "atom_types": {"columns": {"type": {"dtype": "string", "trailing": []}}, "aligned_with": "atoms"}}
    for name, entry in overrides.items():
        blocks[name] = entry
    return {"blocks": blocks, "meta": {}}


def test_trajectory_R16_valid_aligned_fixture_reads():
    doc = aligned_pin()
    assert SequenceSchema.from_json(doc).to_json() == doc
    # the target may be declared after the aligned block
    later = {"blocks": {"atom_types": doc["blocks"]["atom_types"], "atoms": doc["blocks"]["atoms"]}, "meta": {}}
    assert SequenceSchema.from_json(later).aligned_with("atom_types") == "atoms"


@pytest.mark.parametrize("override,fragment", [
    ({"atom_types": {"columns": {}, "aligned_with": ["atoms"]}}, "aligned_with"),  # fixture: not a name
    ({"atom_types": {"columns": {}, "aligned_with": None}}, "aligned_with"),
    ({"atom_types": {"columns": {}, "aligned_with": "ghost"}}, "declared"),
    ({"atom_types": {"columns": {}, "aligned_with": "atom_types"}}, "itself"),
    ({"atom_types": {"columns": {}, "aligned_with": "atoms", "structural_shape": [1]}}, "structural shape"),
    ({"atom_types": {"columns": {"x": {"dtype": "f64", "trailing": []}}, "aligned_with": "atoms"}}, "disjoint"),
    ({"charges": {"columns": {}, "aligned_with": "atom_types"}}, "chain"),
])
def test_trajectory_R16_invalid_pinned_alignment_refused(override, fragment):
    with refused(R16, fragment):
        SequenceSchema.from_json(aligned_pin(**override))


def test_trajectory_R13_canonical_key_pinned_at_other_dtype_refused():
    doc = {"blocks": {"bonds": {"columns": {"atomi": {"dtype": "u32", "trailing": []}}}}, "meta": {}}
    with refused(R13, "'atomi'", "u64"):
        SequenceSchema.from_json(doc)
    doc = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": [3]}}}}, "meta": {}}
    with refused(R13, "'x'"):
        SequenceSchema.from_json(doc)


def test_trajectory_R11_error_carries_node():
    with pytest.raises(SpecViolationError) as info:
        SequenceSchema.from_json({"blocks": {}, "meta": {"temp": {"dtype": "f64", "fill": None}}})
    assert info.value.node == "/trajectory/meta/temp"
    assert str(info.value).startswith("sequence_schema:")


def test_trajectory_4_meta_spec_is_a_dataclass_that_unpacks():
    spec = SequenceSchema().declare_meta_with_fill("com", [1, 2, 3], "f64x3").meta_spec("com")
    assert isinstance(spec, MetaSpec)
    assert tuple(spec) == ("f64x3", True, (1.0, 2.0, 3.0)) and spec.fill_json == [1.0, 2.0, 3.0]
