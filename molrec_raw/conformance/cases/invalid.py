"""Invalid cases: each breaks exactly one rule, named in its expected.json.

Every case starts from a valid record written by this package and changes the one thing
its rule forbids (a document edited, an array re-laid, bytes flipped), so a reader that
refuses it refuses it for that reason.  Zip cases break the packed archive itself.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.conformance.cases.base import edit_attrs, edit_json, group_at, invalid, remove, store_of, strings, write_json
from molrec_raw.conformance.cases.layouts import relay
from molrec_raw.conformance.cases.trajectories import run, x_schema, xs
from molrec_raw.record.doors import write_mrec_frame
from molrec_raw.record.metrics import MetricsWriter
from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.molrec import MolRec, write_mrec
from molrec_raw.record.observables import Observable
from molrec_raw.record.trajectory import SequenceSchema

_FT = "frame-and-types"


def frame_base(rec: Path) -> None:
    """A small valid frame: atoms (x, a masked mol_id), bonds (atomi, atomj), members with a
    target, a cubic cell."""
    write_mrec_frame(rec, Frame({"title": "base"}, {
        "atoms": Block({"x": np.array([0.0, 1.0, 2.0]), "mol_id": np.array([0, 0, 1], dtype=np.uint64)},
                       masks={"mol_id": np.array([True, False, True])}),
        "bonds": Block({"atomi": np.array([0, 1], dtype=np.uint64), "atomj": np.array([1, 2], dtype=np.uint64)}),
        "members": Block({"ibead": np.array([0, 2], dtype=np.uint64)}, targets={"ibead": "atoms"})},
        Box(np.eye(3) * 10.0)), durable=False)


def _meta_version(value: str) -> Callable[[Path], None]:
    def build(rec: Path) -> None:
        frame_base(rec)
        write_json(rec, "meta/zarr.json", '{"zarr_format": 3, "node_type": "group", "attributes": '
                   f'{{"molrec_version": {value}}}}}\n')
    return build


for _name, _value, _what in (("version-newer", "3", "3, newer than the newest supported (2)"),
                             ("version-string", '"1"', 'the string "1"'), ("version-real", "1.0", "the real 1.0"),
                             ("version-null", "null", "null"), ("version-zero", "0", "0")):
    invalid(_name, f"{_FT}#14.23", f"molrec_version is {_what}: not a JSON integer in 1..2 "
            "(README#decision-1)")(_meta_version(_value))


def _edited(node: str, change: Callable[[Dict[str, Any]], object]) -> Callable[[Path], None]:
    def build(rec: Path) -> None:
        frame_base(rec)
        edit_attrs(rec, node, change)
    return build


def _relaid(node: str, values: np.ndarray) -> Callable[[Path], None]:
    def build(rec: Path) -> None:
        frame_base(rec)
        relay(rec, node, values)
    return build


# (name, rule, about, node, how its attributes change), each on the base frame
_ATTRIBUTE_EDITS: List[Tuple[str, str, str, str, Callable[[Dict[str, Any]], object]]] = [
    ("block-no-count", f"{_FT}#14.4", "a block group without its count attribute",
     "frame/bonds", lambda a: a.pop("count")),
    ("block-count-negative", f"{_FT}#14.5", "count -1 is not a non-negative integer",
     "frame/bonds", lambda a: a.update({"count": -1})),
    ("block-count-real", f"{_FT}#14.5", "count 2.0 is a real, not a JSON integer",
     "frame/bonds", lambda a: a.update({"count": 2.0})),
    ("structural-shape-mismatch", f"{_FT}#14.7", "structural_shape [2, 2] over a block of 3 rows",
     "frame/atoms", lambda a: a.update({"structural_shape": [2, 2]})),
    ("target-block-missing", f"{_FT}#14.11", "a row reference into a block the section does not have",
     "frame/members", lambda a: a.update({"targets": {"ibead": "beads"}})),
    ("target-into-trajectory", f"{_FT}#14.13", "a row reference pointing into /trajectory/",
     "frame/members", lambda a: a.update({"targets": {"ibead": "/trajectory/atoms"}})),
    ("target-not-u64", f"{_FT}#14.14", "a row reference held by an f64 column",
     "frame/atoms", lambda a: a.update({"targets": {"x": "bonds"}})),
    ("meta-types-not-object", f"{_FT}#14.15", "_meta_types is a list, not an object",
     "frame", lambda a: a.update({"_meta_types": ["string"]})),
    ("meta-unknown-tag", f"{_FT}#14.15", "a meta key tagged f32, which is not one of the 16 tags",
     "frame", lambda a: (a.update({"e": 1.5}), a["_meta_types"].update({"e": "f32"}))),
    ("meta-wrong-form", f"{_FT}#14.16", "a meta value 1.5 under the tag i32 (a real for an integer tag)",
     "frame", lambda a: (a.update({"n": 1.5}), a["_meta_types"].update({"n": "i32"}))),
    ("meta-vector-length", f"{_FT}#14.16", "an f64x3 meta value with two elements",
     "frame", lambda a: (a.update({"com": [0.0, 1.0]}), a["_meta_types"].update({"com": "f64x3"}))),
    ("cell-defined-not-bool", f"{_FT}#14.17", "cell_defined is the string \"no\", not a JSON boolean",
     "frame/box", lambda a: a.update({"cell_defined": "no"})),
    ("precision-on-integer", f"{_FT}#14.20", "a precision attribute on a u64 column",
     "frame/bonds/atomi", lambda a: a.update({"precision": 0.001})),
    ("precision-zero", f"{_FT}#14.20", "a declared precision of 0 (below 2^-1000)",
     "frame/atoms/x", lambda a: a.update({"precision": 0.0})),
]
# (name, rule, about, array node, the values it is re-laid with), each on the base frame
_RELAID: List[Tuple[str, str, str, str, np.ndarray]] = [
    ("column-length-mismatch", f"{_FT}#14.6", "a column of 3 rows in a block whose count is 2",
     "frame/bonds/atomj", np.array([1, 2, 2], dtype=np.uint64)),
    ("mask-not-bool", f"{_FT}#14.8", "a validity mask stored as uint8, not bool",
     "frame/atoms/_validity/mol_id", np.array([1, 0, 1], dtype=np.uint8)),
    ("mask-wrong-length", f"{_FT}#14.9", "a validity mask of 2 flags for a block of 3 rows",
     "frame/atoms/_validity/mol_id", np.array([True, False])),
    ("target-out-of-range", f"{_FT}#14.12", "a row reference 3 into a block of 3 rows",
     "frame/members/ibead", np.array([0, 3], dtype=np.uint64)),
    ("box-vectors-shape", f"{_FT}#14.19", "box vectors stored as 2 x 2", "frame/box/vectors", np.eye(2)),
    ("narrow-float-column", f"{_FT}#14.1", "a column stored as float32: never widened",
     "frame/atoms/x", np.array([0.0, 1.0, 2.0], dtype=np.float32)),
    ("float16-column", f"{_FT}#14.1", "a column stored as float16",
     "frame/atoms/x", np.array([0.0, 1.0, 2.0], dtype=np.float16)),
    ("canonical-key-narrow", f"{_FT}#14.3", "the endpoint atomi stored as uint32 (canonical u64)",
     "frame/bonds/atomi", np.array([0, 1], dtype=np.uint32)),
]
for _name, _rule, _about, _node, _change in _ATTRIBUTE_EDITS:
    invalid(_name, _rule, _about)(_edited(_node, _change))
for _name, _rule, _about, _node, _values in _RELAID:
    invalid(_name, _rule, _about)(_relaid(_node, _values))


@invalid("mask-without-column", f"{_FT}#14.10", "a validity mask named for a column the block does not have")
def _mask_orphan(rec: Path) -> None:
    frame_base(rec)
    relay(rec, "frame/atoms/_validity/mol_id", np.array([True, False, True]))
    group_at(rec, "frame/atoms/_validity").create_array("charge", shape=(3,), dtype="bool", chunks=(3,))[...] = \
        np.array([True, False, False])


@invalid("undefined-cell-periodic", f"{_FT}#14.18", "an undefined cell with a periodic direction")
def _undefined_periodic(rec: Path) -> None:
    frame_base(rec)
    edit_attrs(rec, "frame/box", lambda a: a.update({"cell_defined": False}))
    group_at(rec, "frame/box").create_array("boundary", shape=(3,), dtype="bool", chunks=(3,))[...] = \
        np.array([True, False, False])


@invalid("fixed-length-string-column", f"{_FT}#14.2", "a column of Zarr type fixed_length_utf32, which is not a "
         "column dtype")
def _fixed_string(rec: Path) -> None:
    frame_base(rec)
    edit_json(rec, "frame/atoms/x/zarr.json", lambda d: d.update({"data_type": "fixed_length_utf32",
                                                                  "fill_value": ""}))


@invalid("status-without-state", "documents#9.5", "a status document without its required state")
def _no_state(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running", "stage": "train"}), durable=False)
    edit_attrs(rec, "status", lambda a: a.pop("state"))


@invalid("status-bad-timestamp", "documents#9.7", "started_at without a time-zone offset")
def _bad_time(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}), durable=False)
    edit_attrs(rec, "status", lambda a: a.update({"started_at": "2026-08-04T00:00:00"}))


@invalid("method-without-engine", "documents#9.9", "a method document without engine")
def _no_engine(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}, method={"type": "ml", "description": "fit",
                                                               "engine": {"name": "x"}}), durable=False)
    edit_attrs(rec, "method", lambda a: a.pop("engine"))


@invalid("observable-without-meta", "documents#9.18", "an observable data array without observables/meta/<name>")
def _observable(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}, observables={"e": Observable(
        np.array([1.0]), {"kind": "scalar", "description": "e", "time_dependent": False})}), durable=False)
    remove(rec, "observables/meta/e")


@invalid("observable-without-kind", "documents#9.20", "observable metadata without its kind")
def _observable_kind(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}, observables={"e": Observable(
        np.array([1.0]), {"kind": "scalar", "description": "e", "time_dependent": False})}), durable=False)
    edit_attrs(rec, "observables/meta/e", lambda a: a.pop("kind"))


# -- trajectories (trajectory §18, reader refuses) ------------------------------------------------
def traj_base(rec: Path, steps: Optional[Sequence[int]] = None) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(float(i), float(i) + 0.5)}) for i in range(3)], steps=steps)


@invalid("legacy-frames-layout", "trajectory#R2", "a trajectory/frames/ group: the legacy layout")
def _legacy(rec: Path) -> None:
    traj_base(rec)
    store_of(rec).create_group("trajectory/frames")


@invalid("nstep-negative", "trajectory#R3", "nstep -1")
def _nstep(rec: Path) -> None:
    traj_base(rec)
    edit_attrs(rec, "trajectory", lambda a: a.update({"nstep": -1}))


@invalid("nstep-real", "trajectory#R3", "nstep 3.0 is not a JSON integer")
def _nstep_real(rec: Path) -> None:
    traj_base(rec)
    edit_attrs(rec, "trajectory", lambda a: a.update({"nstep": 3.0}))


@invalid("progression-without-nstep", "trajectory#R4", "a step_progression with no nstep marker")
def _no_marker(rec: Path) -> None:
    traj_base(rec)
    edit_attrs(rec, "trajectory", lambda a: a.pop("nstep"))


@invalid("progression-malformed", "trajectory#R5", "a step_progression without start")
def _progression(rec: Path) -> None:
    traj_base(rec)
    edit_attrs(rec, "trajectory", lambda a: a.update({"step_progression": {"stride": 1}}))


@invalid("step-array-short", "trajectory#R6", "a step array of 2 values for 3 committed frames")
def _step_short(rec: Path) -> None:
    traj_base(rec, steps=[0, 5, 7])
    relay(rec, "trajectory/step", np.array([0, 5], dtype=np.int64))


def _indexed(rec: Path) -> None:
    sizes = [2, 3, 1]
    run(rec, x_schema(), [Frame({}, {"atoms": xs(*(float(k) for k in range(n)))}) for n in sizes])


@invalid("step-index-decreasing", "trajectory#R7", "a block's step_index 0, 2, 1: not strictly increasing")
def _step_index(rec: Path) -> None:
    _indexed(rec)
    relay(rec, "trajectory/atoms/step_index", np.array([0, 2, 1], dtype=np.uint64))


@invalid("offset-decreasing", "trajectory#R8", "CSR offsets 0, 2, 1, 6: not monotonic")
def _offset(rec: Path) -> None:
    _indexed(rec)
    relay(rec, "trajectory/atoms/offset", np.array([0, 2, 1, 6], dtype=np.uint64))


@invalid("offset-not-from-zero", "trajectory#R8", "CSR offsets starting at 1")
def _offset_start(rec: Path) -> None:
    _indexed(rec)
    relay(rec, "trajectory/atoms/offset", np.array([1, 2, 5, 6], dtype=np.uint64))


@invalid("marker-without-pair", "trajectory#R9", "uniform_rows without dense_updates")
def _marker(rec: Path) -> None:
    traj_base(rec)
    edit_attrs(rec, "trajectory/atoms", lambda a: a.pop("dense_updates"))


@invalid("meta-array-without-tag", "trajectory#R10", "a per-step meta array without meta_dtype")
def _meta_tag(rec: Path) -> None:
    schema = x_schema().declare_meta("pe", "f64")
    run(rec, schema, [Frame({"pe": -1.0}, {"atoms": xs(0.0)}), Frame({"pe": -2.0}, {"atoms": xs(1.0)})])
    edit_attrs(rec, "trajectory/meta/pe", lambda a: a.pop("meta_dtype"))


@invalid("pinned-fill-null", "trajectory#R11", "a pinned fill null for an f64 key (a NaN some writer lost)")
def _fill_null(rec: Path) -> None:
    schema = x_schema().declare_meta_with_fill("temp", 300.0, "f64")
    run(rec, schema, [Frame({}, {"atoms": xs(0.0)})])
    edit_attrs(rec, "trajectory", lambda a: a["sequence_schema"]["meta"]["temp"].update({"fill": None}))


@invalid("traj-narrow-float-column", "trajectory#R12", "a trajectory column stored as float32")
def _traj_float32(rec: Path) -> None:
    traj_base(rec)
    edit_json(rec, "trajectory/atoms/x/zarr.json", lambda d: d.update({"data_type": "float32"}))


@invalid("traj-canonical-narrow", "trajectory#R13", "a trajectory atomi column stored as uint32")
def _traj_atomi(rec: Path) -> None:
    schema = SequenceSchema().declare_column("bonds", "atomi", "u64")
    run(rec, schema, [Frame({}, {"bonds": Block({"atomi": np.array([0, 1], dtype=np.uint64)})})])
    edit_json(rec, "trajectory/bonds/atomi/zarr.json", lambda d: d.update({"data_type": "uint32"}))
    edit_attrs(rec, "trajectory", lambda a: a["sequence_schema"]["blocks"]["bonds"]["columns"]["atomi"].update(
        {"dtype": "u32"}))


@invalid("traj-mask-not-bool", "trajectory#R14", "a trajectory validity mask stored as uint8")
def _traj_mask(rec: Path) -> None:
    schema = x_schema().declare_nullable("atoms", "x")
    run(rec, schema, [Frame({}, {"atoms": Block({"x": np.array([1.0, 2.0])}, masks={"x": np.array([True, False])})})])
    edit_json(rec, "trajectory/atoms/_validity/x/zarr.json", lambda d: d.update({"data_type": "uint8", "fill_value": 0}))


@invalid("traj-box-vectors-malformed", "trajectory#R15", "a fixed-cell vectors attribute of 2 x 3 values")
def _traj_box(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(0.0)}, Box(np.eye(3) * 5.0))])
    edit_attrs(rec, "trajectory/box", lambda a: a.update({"vectors": [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]}))


@invalid("traj-aligned-count", "trajectory#R16", "an aligned block whose update has another row count than its "
         "target")
def _traj_aligned(rec: Path) -> None:
    schema = x_schema().declare_column("atom_types", "type", "string").declare_aligned("atom_types", "atoms")
    run(rec, schema, [Frame({}, {"atoms": xs(0.0, 1.0), "atom_types": Block({"type": strings("O", "H")})})])
    relay(rec, "trajectory/atoms/x", np.array([0.0, 1.0, 2.0]))
    edit_attrs(rec, "trajectory/atoms", lambda a: a.update({"uniform_rows": 3}))


@invalid("traj-reference-broken", "trajectory#R17", "a pinned row reference 5 into an atoms block of 2 rows")
def _traj_reference(rec: Path) -> None:
    schema = x_schema().declare_column("members", "ibead", "u64").declare_target("members", "ibead", "atoms")
    run(rec, schema, [Frame({}, {"atoms": xs(0.0, 1.0), "members": Block({"ibead": np.array([1], dtype=np.uint64)})})])
    relay(rec, "trajectory/members/ibead", np.array([5], dtype=np.uint64))


# -- metrics --------------------------------------------------------------------------------------
@invalid("wal-corrupt-line", "documents#9.15", "a complete WAL line that is not a JSON object (README#decision-9)")
def _wal(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}), durable=False)
    store_of(rec).create_group("metrics")
    (rec / "metrics" / "metrics.jsonl").write_bytes(b'{"t":"scalar","k":"a","s":1,"w":"2026-08-04T00:00:01Z","v":1}\n'
                                                    b'not json\n')


@invalid("safe-name-malformed", "documents#9.10", "a dense series named with a lowercase escape (train%2floss), "
         "found by listing (a catalog without a watermark)")
def _safe_name(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}), durable=False)
    with MetricsWriter(rec) as m:
        m.log("train/loss", 0.5, step=1, wall_time="2026-08-04T00:00:01Z")
    for part in ("series", "steps", "wall_time"):
        (rec / "metrics" / part / "train%2Floss").rename(rec / "metrics" / part / "train%2floss")
    edit_attrs(rec, "metrics", lambda a: a.clear())
    remove(rec, "metrics/metrics.jsonl")


# -- Zarr bytes -----------------------------------------------------------------------------------
def _shard_of(rec: Path) -> Path:
    return rec / "trajectory" / "atoms" / "x" / "c" / "0"


@invalid("shard-index-torn", "zarr-v3-subset#5.5", "a shard index whose bytes changed after its crc32c was "
         "written (a torn index page)")
def _torn(rec: Path) -> None:
    traj_base(rec)
    shard = bytearray(_shard_of(rec).read_bytes())
    shard[17] ^= 0xFF  # inside entry 1 of the index
    _shard_of(rec).write_bytes(bytes(shard))


@invalid("shard-index-past-end", "zarr-v3-subset#7", "a shard index entry pointing past the end of the shard "
         "(its crc32c recomputed, so only the entry lies)")
def _past_end(rec: Path) -> None:
    from molrec_raw.zarr.codecs.crc32c_codec import crc32c_of
    traj_base(rec)
    shard = bytearray(_shard_of(rec).read_bytes())
    offset = struct.unpack_from("<Q", shard, 0)[0]
    struct.pack_into("<Q", shard, 8, len(shard) - offset + 1000)  # past the sector padding too
    struct.pack_into("<I", shard, 4080, crc32c_of(bytes(shard[:4080])))
    _shard_of(rec).write_bytes(bytes(shard))


@invalid("chunk-crc-mismatch", "zarr-v3-subset#5.5", "a chunk whose bytes no longer match its crc32c")
def _chunk_crc(rec: Path) -> None:
    frame_base(rec)
    chunk = rec / "frame" / "atoms" / "x" / "c" / "0"
    data = bytearray(chunk.read_bytes())
    data[3] ^= 0x01
    chunk.write_bytes(bytes(data))


@invalid("zstd-lying-size", "zarr-v3-subset#5.4", "a zstd frame declaring more bytes than the chunk can hold")
def _zstd(rec: Path) -> None:
    import zstandard
    frame_base(rec)
    relay(rec, "frame/atoms/x", np.array([0.0, 1.0, 2.0]), codecs=[
        {"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}])
    frame = zstandard.ZstdCompressor(level=1).compress(np.arange(6.0).tobytes())
    (rec / "frame" / "atoms" / "x" / "c" / "0").write_bytes(frame)


@invalid("gzip-truncated", "zarr-v3-subset#5.3", "a gzip member cut short")
def _gzip(rec: Path) -> None:
    frame_base(rec)
    chunk = rec / "frame" / "bonds" / "atomi" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-10])
    edit_json(rec, "frame/bonds/atomi/zarr.json", lambda d: d.update({"codecs": d["codecs"][:2]}))


@invalid("zarr-json-syntax", "zarr-v3-subset#2", "a zarr.json that is not JSON")
def _syntax(rec: Path) -> None:
    frame_base(rec)
    write_json(rec, "frame/atoms/x/zarr.json", '{"zarr_format": 3, "node_type": "array", "shape": [3,\n')


@invalid("zarr-format-2", "zarr-v3-subset#2", "zarr_format 2 in a node of the record")
def _format2(rec: Path) -> None:
    frame_base(rec)
    edit_json(rec, "frame/zarr.json", lambda d: d.update({"zarr_format": 2}))


@invalid("unknown-codec", "zarr-v3-subset#5", "a codec outside the supported set (lz4)")
def _codec(rec: Path) -> None:
    frame_base(rec)
    edit_json(rec, "frame/atoms/x/zarr.json", lambda d: d["codecs"].insert(1, {"name": "lz4", "configuration": {}}))


@invalid("unknown-required-field", "zarr-v3-subset#2.3", "an unknown zarr.json key not marked must_understand: "
         "false")
def _required(rec: Path) -> None:
    frame_base(rec)
    edit_json(rec, "frame/atoms/x/zarr.json", lambda d: d.update({"x_vendor": 1}))


@invalid("bytes-without-endian", "zarr-v3-subset#5.1", "a bytes codec without endian for a multi-byte type")
def _endian(rec: Path) -> None:
    frame_base(rec)
    edit_json(rec, "frame/atoms/x/zarr.json", lambda d: d["codecs"][0].update({"configuration": {}}))


# -- zip archives (zarr-v3-subset §9.2) -----------------------------------------------------------
_CEN = struct.Struct("<IHHHHHHIIIHHHHHII")


def _central(data: bytearray, name: bytes) -> int:
    """Offset of the central directory record of entry ``name``."""
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        fields = _CEN.unpack_from(data, at)
        if data[at + 46:at + 46 + fields[10]] == name:
            return at
        at = data.find(b"PK\x01\x02", at + 46)
    raise KeyError(name)


def _patch(path: Path, change: Callable[[bytearray], None]) -> None:
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))


def _rename(old: bytes, new: bytes) -> Callable[[Path], None]:
    assert len(old) == len(new)
    return lambda path: _patch(path, lambda d: d.__setitem__(slice(None), bytes(d).replace(old, new)))


def _lying_size(path: Path) -> None:
    def change(data: bytearray) -> None:
        at = _central(data, b"frame/atoms/x/c/0")
        struct.pack_into("<II", data, at + 20, 0x7FFFFFF0, 0x7FFFFFF0)
    _patch(path, change)


def _deflated(path: Path) -> None:
    _patch(path, lambda data: struct.pack_into("<H", data, _central(data, b"meta/zarr.json") + 10, 8))


def _crc(path: Path) -> None:
    def change(data: bytearray) -> None:
        at = data.find(b'"molrec_version"')
        data[at - 1:at] = b"\t"  # whitespace stays JSON, the CRC-32 does not match
    _patch(path, change)


def _no_eocd(path: Path) -> None:
    _patch(path, lambda data: data.__delitem__(slice(len(data) - 22, None)))


def _cd_outside(path: Path) -> None:
    _patch(path, lambda data: struct.pack_into("<I", data, len(data) - 6, len(data) + 100))


for _name, _about, _edit in (
        ("zip-lying-size", "a central directory entry claiming more bytes than the archive holds", _lying_size),
        ("zip-dotdot-name", "an entry named ../a/zarr.json, outside the record", _rename(b"meta/zarr.json",
                                                                                          b"../a/zarr.json")),
        ("zip-absolute-name", "an entry named /eta/zarr.json (absolute)", _rename(b"meta/zarr.json",
                                                                                b"/eta/zarr.json")),
        ("zip-crc-mismatch", "an entry whose bytes no longer match its CRC-32", _crc),
        ("zip-no-end-record", "an archive cut before its end-of-central-directory record", _no_eocd),
        ("zip-central-directory-outside", "an end record placing the central directory past the end", _cd_outside),
        ("zip-compressed-entry", "an entry marked deflate (method 8): only STORED entries are read", _deflated)):
    invalid(_name, "zarr-v3-subset#9.2", _about, zip_edit=_edit)(frame_base)
