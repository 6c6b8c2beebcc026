"""Valid cases: frame-shaped sections, documents, force field, observables, unknown sections."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from molrec_raw.conformance.cases.base import array_at, edit_attrs, remove, store_of, strings, valid
from molrec_raw.record.doors import write_mrec_frame, write_mrec_system
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import MolRec, write_mrec
from molrec_raw.record.observables import Observable


def _one_block(rec: Path, block: Block, name: str = "atoms", **meta: object) -> None:
    write_mrec_frame(rec, Frame(dict(meta), {name: block}), durable=False)


# -- every column dtype (frame-and-types §2) ---------------------------------------------------
_DTYPES = {
    "f64": np.array([0.0, -0.0, 0.1, 1e-300, 5e-324, np.finfo(np.float64).max, np.nan, np.inf, -np.inf]),
    "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
    "i16": np.array([-32768, 0, 32767], dtype=np.int16),
    "i32": np.array([-2**31, 0, 2**31 - 1], dtype=np.int32),
    "i64": np.array([-2**63, -2**53 - 1, 0, 2**53, 2**63 - 1], dtype=np.int64),
    "u8": np.array([0, 1, 255], dtype=np.uint8),
    "u16": np.array([0, 65535], dtype=np.uint16),
    "u32": np.array([0, 3_000_000_000, 2**32 - 1], dtype=np.uint32),
    "u64": np.array([0, 2**53, 2**53 + 1, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "string": strings("", "O", "Ω", "tab\there", "line\nbreak", "😀"),
    "c64": np.array([1 + 2j, -0.5 - 0.25j, complex(np.nan, np.inf)], dtype=np.complex64),
    "c128": np.array([0.1 + 0.2j, complex(-0.0, 1e-300), complex(np.inf, -np.inf)], dtype=np.complex128),
}


def _dtype_case(dtype: str) -> None:
    values = _DTYPES[dtype]

    @valid(f"dtype-{dtype}", f"a {dtype} column: extremes and edge values at their exact width (frame-and-types#2)")
    def build(rec: Path) -> None:
        _one_block(rec, Block({"v": values}))


for _name in _DTYPES:
    _dtype_case(_name)


@valid("column-trailing-axes", "columns with trailing axes: f64[N][3] and i32[N][2][2] (frame-and-types#5)")
def _trailing(rec: Path) -> None:
    _one_block(rec, Block({"pos": np.arange(6.0).reshape(2, 3) / 4, "pairs": np.arange(8, dtype=np.int32).reshape(2, 2, 2)}))


@valid("nullable-columns", "masked columns: a u64 and an f64 with validity masks; the value under a null is kept "
       "as stored (frame-and-types#7)")
def _nullable(rec: Path) -> None:
    _one_block(rec, Block({"mol_id": np.array([1, 0, 2], dtype=np.uint64), "charge": np.array([-0.8, np.nan, 0.4])},
                          masks={"mol_id": np.array([True, False, True]), "charge": np.array([True, False, True])}))


@valid("mask-all-true-stored", "a foreign writer stored an all-true mask: the same as no mask (frame-and-types#14.28)")
def _all_true(rec: Path) -> None:
    _one_block(rec, Block({"q": np.array([1.0, 2.0])}, masks={"q": np.array([True, False])}))
    array_at(rec, "frame/atoms/_validity/q")[...] = np.array([True, True])


@valid("precision-column", "a declared precision: values stored on the 2^-10 grid, the attribute read back, "
       "values returned exactly as stored (frame-and-types#8)")
def _precision(rec: Path) -> None:
    _one_block(rec, Block({"x": np.array([0.123456, -1.0, 2.71828, 1e-9])}, precision={"x": 1e-3}))


@valid("structural-shape", "a volumetric block: structural_shape [2, 2, 2] over 8 rows (frame-and-types#5)")
def _structural(rec: Path) -> None:
    _one_block(rec, Block({"rho": np.linspace(0.0, 1.0, 8)}, structural_shape=(2, 2, 2)), "grid")


@valid("targets-same-container", "row references into a block of the same section (frame-and-types#9)")
def _targets(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {
        "atoms": Block({"x": np.array([0.0, 1.0, 2.0])}),
        "members": Block({"ibead": np.array([0, 2], dtype=np.uint64)}, targets={"ibead": "atoms"})}), durable=False)


@valid("targets-absolute", "a row reference from frame into /system/atoms, and canonical endpoint keys "
       "atomi/atomj (frame-and-types#9, #13)")
def _targets_absolute(rec: Path) -> None:
    system = Frame({}, {"atoms": Block({"element": strings("O", "H", "H")})})
    frame = Frame({}, {"bonds": Block({"atomi": np.array([0, 0], dtype=np.uint64),
                                       "atomj": np.array([1, 2], dtype=np.uint64)}),
                       "sites": Block({"atom": np.array([2], dtype=np.uint64)}, targets={"atom": "/system/atoms"})})
    write_mrec_frame(rec, frame, system=system, durable=False)


@valid("block-without-columns", "a block with a count and no column (frame-and-types#14.43)")
def _no_columns(rec: Path) -> None:
    _one_block(rec, Block({}, count=5), "placeholders")


@valid("zero-row-block", "a block of 0 rows whose columns hold 0 rows (frame-and-types#3)")
def _zero_rows(rec: Path) -> None:
    _one_block(rec, Block({"x": np.zeros(0), "name": strings()}))


@valid("producer-attributes", "unknown block and column attributes (a null-valued one too) are preserved "
       "(root-layout#5)")
def _producer(rec: Path) -> None:
    _one_block(rec, Block({"x": np.array([1.0])}, attrs={"x_vendor": {"run": 7}, "note": None},
                          column_attrs={"x": {"unit": "angstrom"}}))


@valid("meta-scalar-tags", "typed frame meta with every scalar tag: bool, i32, i64, u32, u64, f64 (NaN, "
       "-Infinity), string, json (frame-and-types#4)")
def _meta_scalars(rec: Path) -> None:
    meta = {"flag": True, "n": MetaValue("i32", -7), "big": -2**63, "u": MetaValue("u32", 4_000_000_000),
            "id": 2**64 - 1, "e": 1.5, "missing": float("nan"), "floor": MetaValue("f64", float("-inf")),
            "title": "water Ω", "doc": {"a": [1, 2.5, None], "b": {"c": "d"}}}
    write_mrec_frame(rec, Frame(meta, {}), durable=False)


@valid("meta-vector-tags", "typed frame meta with every vector tag: bool3, i32x3, i64x3, u32x3, u64x3, "
       "f64x3, f64x6, f64x9 (frame-and-types#4)")
def _meta_vectors(rec: Path) -> None:
    meta = {"pbc": MetaValue("bool3", (True, False, True)), "i3": MetaValue("i32x3", (-1, 0, 2**31 - 1)),
            "l3": MetaValue("i64x3", (-2**63, 0, 2**53 + 1)), "u3": MetaValue("u32x3", (0, 1, 2**32 - 1)),
            "w3": MetaValue("u64x3", (0, 2**53 + 1, 2**64 - 1)), "com": MetaValue("f64x3", (0.0, 0.5, float("inf"))),
            "stress": MetaValue("f64x6", (1.0, 2.0, 3.0, 0.1, 0.2, 0.3)),
            "cellm": MetaValue("f64x9", tuple(float(v) for v in range(9)))}
    write_mrec_frame(rec, Frame(meta, {}), durable=False)


@valid("meta-untagged-inferred", "a foreign writer left _meta_types out: tags are inferred (4 -> i64, "
       "2^64-1 -> u64, 2.5 -> f64, \"NaN\" -> string, [1, 2] -> json, true -> bool) (frame-and-types#14.26)")
def _meta_untagged(rec: Path) -> None:
    write_mrec_frame(rec, Frame({"k": 1}, {}), durable=False)

    def untagged(attrs: Dict[str, Any]) -> None:
        attrs.clear()
        attrs.update({"n": 4, "id": 2**64 - 1, "e": 2.5, "s": "NaN", "list": [1, 2], "ok": True})
    edit_attrs(rec, "frame", untagged)


@valid("meta-stale-tag", "a _meta_types entry for an absent key is ignored; a decimal-string integer under an "
       "integer tag is read (frame-and-types#14.26, README#decision-19)")
def _meta_stale(rec: Path) -> None:
    write_mrec_frame(rec, Frame({"n": MetaValue("i64", 1)}, {}), durable=False)
    edit_attrs(rec, "frame", lambda a: (a.update({"n": "-5", "u": "18446744073709551615"}),
                                        a["_meta_types"].update({"u": "u64", "gone": "f64x3"})))


# -- the cell (frame-and-types §10) -------------------------------------------------------------
_ATOMS = Block({"x": np.array([0.5, 1.5])})


@valid("box-cubic", "a 10 A cubic cell: vectors only, origin and boundary at their defaults (frame-and-types#10)")
def _box_cubic(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}, Box(np.eye(3) * 10.0)), durable=False)


@valid("box-triclinic-origin", "a triclinic cell (lattice vectors are the columns) with a non-zero origin "
       "(frame-and-types#10)")
def _box_triclinic(rec: Path) -> None:
    vectors = np.array([[10.0, 2.0, 1.0], [0.0, 9.0, 0.5], [0.0, 0.0, 8.0]])
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}, Box(vectors, np.array([-1.0, 0.0, 2.5]))), durable=False)


@valid("box-slab", "a slab: periodic in x and y only (frame-and-types#10)")
def _box_slab(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}, Box(np.eye(3) * 5.0, boundary=(True, True, False))),
                     durable=False)


@valid("box-undefined", "an undefined cell: cell_defined false, identity vectors, no periodic direction, an "
       "origin (frame-and-types#10, #14.29)")
def _box_undefined(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}, Box.undefined((1.0, 2.0, 3.0))), durable=False)


# -- sections and documents ---------------------------------------------------------------------
@valid("system-only", "a record whose state is a system section (root-layout, documents#1.1)")
def _system_only(rec: Path) -> None:
    write_mrec_system(rec, Frame({"smiles": "O"}, {"atoms": Block({"element": strings("O", "H", "H"),
                                                                  "mass": np.array([15.999, 1.008, 1.008])})}),
                      durable=False)


@valid("frame-and-system", "frame and system sections side by side (root-layout)")
def _frame_and_system(rec: Path) -> None:
    system = Frame({}, {"atoms": Block({"element": strings("O", "H", "H")})})
    frame = Frame({"step": 10}, {"atoms": Block({"x": np.array([0.0, 0.96, -0.24])})}, Box(np.eye(3) * 12.0))
    write_mrec_frame(rec, frame, system=system, durable=False)


@valid("meta-provenance", "a meta document with creator, created_at and modules (frame-and-types#11)")
def _meta_provenance(rec: Path) -> None:
    meta = {"creator": {"name": "conformance", "version": "1"}, "created_at": "2026-08-04T00:00:00Z",
            "modules": {"qm": {"spec": "https://example.org/qm"}}}
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), meta=meta, durable=False)


@valid("meta-absent", "no meta/ group: read as an empty document (frame-and-types#14.24)")
def _meta_absent(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), durable=False)
    remove(rec, "meta")


@valid("meta-unstamped", "a meta document without molrec_version, as the newest texts and molrs 0.19 write it: "
       "a current store, read as stored (README#decision-1, frame-and-types#14.30)")
def _meta_unstamped(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), meta={"creator": {"name": "another writer"}}, durable=False)
    edit_attrs(rec, "meta", lambda a: a.pop("molrec_version"))


@valid("meta-version-1", "molrec_version 1: an older generation a reader accepts (README#decision-1)")
def _meta_v1(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), durable=False)
    edit_attrs(rec, "meta", lambda a: a.update({"molrec_version": 1}))


@valid("meta-unknown-keys", "unknown meta keys, a null-valued one too, kept verbatim (documents#1.2)")
def _meta_unknown(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), meta={"x_lab": {"bench": 3}, "x_null": None, "big": 2**60},
                     durable=False)


@valid("status-run-shaped", "a run-shaped record: meta + status (state, counters, progress, error, unknown "
       "keys), no frame (documents#2, #1.4)")
def _status(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "failed", "stage": "train", "epoch": 3, "global_step": 1200,
                                   "progress": {"loss": 0.25, "batches": 40}, "message": "out of memory",
                                   "started_at": "2026-08-04T00:00:00Z", "finished_at": "2026-08-04T01:00:00+02:00",
                                   "error": {"message": "OOM", "type": "MemoryError", "x_host": "n1"},
                                   "x_queue": None}), durable=False)


@valid("method-workflow", "a workflow method document with stages and order (documents#3)")
def _method(rec: Path) -> None:
    stage = {"type": "classical", "description": "equilibrate", "engine": {"name": "openmm", "version": "8.1"}}
    write_mrec(rec, MolRec(frame=Frame({}, {"atoms": _ATOMS}), method={
        "type": "workflow", "description": "two stages", "engine": {"name": "molexp"},
        "order": ["eq", "prod"], "stages": {"eq": stage, "prod": dict(stage, description="produce")}}), durable=False)


@valid("unknown-root-section", "an unknown root section (group attributes, a sub-group, an array and a plain "
       "file) is preserved; readers do not interpret it (root-layout#5)")
def _unknown(rec: Path) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": _ATOMS}), durable=False)
    root = store_of(rec)
    future = root.create_group("future", attributes={"kind": "x", "count": 99})
    future.create_group("deeper", attributes={"a": [1, 2]})
    future.create_array("table", shape=(3,), dtype="int16", chunks=(3,))[...] = np.array([1, -2, 3], dtype=np.int16)
    (rec / "future" / "notes.bin").write_bytes(b"\x00\x01\xffMolRec")


# -- force field (documents §7) -----------------------------------------------------------------
def _forcefield() -> ForceFieldSection:
    return ForceFieldSection(
        {"name": "tip3p-like", "units": {"preset": "real"}, "aromaticity_model": "mdl",
         "special_bonds": {"lj": [0.0, 0.0, 0.5], "coul": [0.0, 0.0, 0.8333]},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"},
                    {"category": "dihedral", "style": "periodic"}, {"category": "pair", "style": "lj/cut/coul/long",
                                                                   "params": {"cutoff": 10.0, "mixing": "geometric"}},
                    {"category": "bond", "style": "mmff_bond"}]},
        {block_name("atom", "full"): Block({"name": strings("OW", "HW"), "mass": np.array([15.9994, 1.008]),
                                             "charge": np.array([-0.834, 0.417])}),
         block_name("bond", "harmonic"): Block({"name": strings("OW-HW"), "itom": strings("OW"), "jtom": strings("HW"),
                                                 "k": np.array([450.0]), "r0": np.array([0.9572])}),
         block_name("dihedral", "periodic"): Block({"name": strings("X-OW-HW-X"), "itom": strings(""),
                                                     "jtom": strings("OW"), "ktom": strings("HW"), "ltom": strings(""),
                                                     "k1": np.array([0.5]), "k2": np.array([np.nan])},
                                                    masks={"k2": np.array([False])}),
         block_name("pair", "lj/cut/coul/long"): Block({"name": strings("OW-OW"), "itom": strings("OW"),
                                                         "jtom": strings("OW"), "epsilon": np.array([0.1521]),
                                                         "sigma": np.array([3.1507])}),
         block_name("bond", "mmff_bond"): Block({"name": strings(), "itom": strings(), "jtom": strings()})})


@valid("forcefield-styles", "a force field with several styles: a percent-encoded pair style name, a wildcard "
       "endpoint, a masked parameter, a zero-row table, an unknown document key (documents#7)")
def _ff(rec: Path) -> None:
    write_mrec_system(rec, Frame({}, {"atoms": Block({"type": strings("OW", "HW", "HW")})}), forcefield=_forcefield(),
                      durable=False)


@valid("forcefield-only", "a force-field package: meta + forcefield and nothing else (documents#1.1)")
def _ff_only(rec: Path) -> None:
    from molrec_raw.record.doors import write_mrec_forcefield
    ff = ForceFieldSection({"name": "lj", "units": {"length": "nm", "energy": "kJ/mol"},
                            "styles": [{"category": "atom", "style": "full"}]},
                           {block_name("atom", "full"): Block({"name": strings("Ar"), "mass": np.array([39.948])})})
    write_mrec_forcefield(rec, ff, durable=False)


@valid("observables", "observables: a time series and an unknown kind with extra keys (documents#6)")
def _observables(rec: Path) -> None:
    write_mrec(rec, MolRec(frame=Frame({}, {"atoms": _ATOMS}), observables={
        "energy": Observable(np.array([-1.5, -1.25, -1.0]), {"kind": "time_series", "description": "total energy",
                                                             "time_dependent": True, "unit": "eV"}),
        "ir": Observable(np.array([[400.0, 0.1], [1600.0, 0.8]]),
                         {"kind": "spectrum", "description": "IR", "time_dependent": False, "x_vendor": None})}),
        durable=False)
