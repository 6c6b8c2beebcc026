"""Frame and system sections, the meta document, force fields and packed zips, both ways
against molrs (root-layout, frame-and-types §2–§14, documents §9 forcefield, trajectory §15).

Each case is written by one implementation and read by both; the two readings must be the
same document, value for value and floats bit for bit (tests/reference/reference_helpers.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

molrs = pytest.importorskip("molrs", reason="molrs (molcrafts-molrs) ships wheels for CPython >= 3.12 only")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.conformance import default_corpus  # noqa: E402
from molrec_raw.record.forcefield import ForceFieldSection  # noqa: E402
from molrec_raw.record.model import Block, Box, Frame, MetaValue  # noqa: E402
from molrec_raw.conformance.canonical import first_difference  # noqa: E402
from reference_helpers import (EVERY_TAG, assert_same_frame, assert_same_reading, forcefield_doc,  # noqa: E402
                               from_peer_frame, molrs_peer, to_peer_forcefield, to_peer_frame)

PEER = molrs_peer(molrs)
# NUL is left out of generated strings: molrs's Python hands string columns back as numpy
# fixed-width unicode, which drops a trailing NUL (test_reference_disagreements.py).
TEXT = st.characters(blacklist_characters="\x00")
F64_EDGES = np.array([0.1, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.inf, -np.inf,
                      np.nan, 1e-300, 2e300])

ALL_DTYPES = {
    "f64": F64_EDGES,
    "i8": np.array([-128, 0, 127], dtype=np.int8), "i16": np.array([-32768, 1, 32767], dtype=np.int16),
    "i32": np.array([-2**31, 2, 2**31 - 1], dtype=np.int32), "i64": np.array([-2**63, 3, 2**63 - 1], dtype=np.int64),
    "u8": np.array([0, 1, 255], dtype=np.uint8), "u16": np.array([0, 2, 65535], dtype=np.uint16),
    "u32": np.array([0, 3, 2**32 - 1], dtype=np.uint32), "u64": np.array([0, 2**53 + 1, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "c64": np.array([1 + 2j, -0.0 - 1j, np.inf + 0.1j], dtype=np.complex64),
    "c128": np.array([1e-300 + 2e300j, -0.0 + 0j, complex(np.nan, -np.inf)], dtype=np.complex128),
    "string": np.array(["a", "é ü", ""], dtype=object),
}

def _block_of(columns, **kw):
    return Block(columns={k: np.asarray(v) for k, v in columns.items()}, **kw)


def _every_dtype_frame() -> Frame:
    blocks = {}
    for dtype, values in ALL_DTYPES.items():
        blocks[f"b_{dtype}"] = Block(columns={"v": values})
    return Frame(meta={}, blocks=blocks, box=None)


def _rich_frame() -> Frame:
    n = 4
    atoms = Block(columns={"x": np.array([0.1, 0.2, 0.30000000000000004, -0.0]),
                           "y": np.linspace(0, 1, n), "z": np.array([1e-300, 2e300, 5e-324, 3.0]),
                           "element": np.array(["C", "H", "O", "N"], dtype=object),
                           "charge": np.array([0.5, np.nan, -0.5, 0.0]),
                           "vel": np.arange(n * 3 * 2, dtype=np.float64).reshape(n, 3, 2),
                           "tag": np.array([1, 2, 3, 4], dtype=np.int32)},
                  masks={"charge": np.array([True, False, True, True]), "tag": np.array([False, True, True, True])},
                  precision={"y": 1e-3})
    bonds = Block(columns={"atomi": np.array([0, 1, 2], dtype=np.uint64), "atomj": np.array([1, 2, 3], dtype=np.uint64)},
                  targets={"atomi": "atoms", "atomj": "atoms"})
    grid = Block(columns={"rho": np.arange(6, dtype=np.float64)}, structural_shape=(2, 3))
    empty = Block(columns={"atomi": np.zeros(0, dtype=np.uint64), "w": np.zeros((0, 3))})
    bare = Block(columns={}, count=7)
    meta = {f"k_{tag}": MetaValue(tag, value) for tag, value in EVERY_TAG.items()}
    meta.update({"plain_float": 1.5, "plain_int": -3, "plain_big": 2**63, "plain_str": "s", "plain_bool": False,
                 "plain_nan": float("nan")})
    box = Box(vectors=np.array([[10.0, 1.0, 0.5], [0.0, 11.0, -0.25], [0.0, 0.0, 12.0]]),
              origin=np.array([-1.0, 0.5, 0.0]), boundary=(True, False, True))
    return Frame(meta=meta, blocks={"atoms": atoms, "bonds": bonds, "grid": grid, "empty": empty, "bare": bare},
                 box=box)


BOXES = {
    "none": None,
    "orthogonal": Box(vectors=np.diag([10.0, 20.0, 30.0])),
    "triclinic": Box(vectors=np.array([[10.0, 2.0, 1.0], [0.0, 9.0, 0.5], [0.0, 0.0, 8.0]]), origin=np.array([1.0, 2.0, 3.0])),
    "partly-periodic": Box(vectors=np.diag([10.0, 10.0, 10.0]), boundary=(True, True, False)),
    "undefined": Box.undefined(origin=(1.0, -2.0, 0.5)),
    "undefined-at-zero": Box.undefined(),
}


def _write_ours(path: Path, frame: Frame, system: Frame | None = None, meta=None) -> Path:
    mr.write_mrec_frame(path, frame, system=system, meta=meta)
    return path


def _write_theirs(path: Path, frame: Frame, system: Frame | None = None, meta=None) -> Path:
    molrs.io.write_mrec(path, frame=to_peer_frame(PEER, frame),
                        system=None if system is None else to_peer_frame(PEER, system), meta=meta)
    return path


WRITERS = {"ours": _write_ours, "molrs": _write_theirs}


def _write_sections(writer: str, path: Path, **sections) -> Path:
    """A record of the given sections (``system``, ``forcefield``) written by ``writer``."""
    if writer == "ours":
        mr.write_mrec(path, mr.MolRec(**sections))
    else:
        converted = {"system": lambda s: to_peer_frame(PEER, s), "forcefield": lambda s: to_peer_forcefield(PEER, s)}
        molrs.io.write_mrec(path, **{k: converted[k](v) for k, v in sections.items()})
    return path


@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_2_every_column_dtype_both_ways(tmp_path, writer):
    """frame-and-types §2: the 13 column dtypes, edge values included, read alike by both."""
    path = WRITERS[writer](tmp_path / "dtypes.mrec", _every_dtype_frame())
    assert_same_reading(PEER, path)
    assert_same_frame(_every_dtype_frame(), mr.read_mrec_frame(path), "ours after " + writer)


@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_14_masks_precision_trailing_targets_shapes_meta_both_ways(tmp_path, writer):
    """Masks (§8), precision (§9), trailing axes, zero-row and column-less blocks, targets,
    structural_shape, typed meta of every tag (§4), a triclinic partly periodic cell; as
    frame and as system of one record."""
    frame = _rich_frame()
    path = WRITERS[writer](tmp_path / "rich.mrec", frame, system=_rich_frame(), meta={"creator": {"name": "t"}})
    doc = assert_same_reading(PEER, path)
    assert doc["frame"]["meta"]["k_u64"] == {"tag": "u64", "value": "18446744073709551615"}
    assert doc["frame"]["blocks"]["bare"]["count"] == 7 and doc["frame"]["blocks"]["bare"]["columns"] == {}
    assert doc["frame"]["blocks"]["atoms"]["columns"]["y"]["precision"] == 1e-3
    # the values stored are the rounded ones (frame-and-types §9: q = 2**-10 for p = 1e-3)
    q = 2.0 ** -10
    y = np.asarray(mr.read_mrec_frame(path).blocks["atoms"].columns["y"])
    np.testing.assert_array_equal(y, np.round(np.linspace(0, 1, 4) / q) * q)
    assert mr.validate(path) == []


@pytest.mark.parametrize("cell", BOXES)
@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_10_every_cell_form_both_ways(tmp_path, writer, cell):
    """frame-and-types §10: no box, orthogonal, triclinic with origin, partly periodic,
    undefined with and without an origin — read alike (lattice vectors as columns)."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.array([0.5, 1.5])})}, box=BOXES[cell])
    path = WRITERS[writer](tmp_path / "cell.mrec", frame)
    doc = assert_same_reading(PEER, path)
    assert (doc["frame"]["box"] is None) == (cell == "none")


@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_12_meta_document_both_ways(tmp_path, writer):
    """frame-and-types §12: the meta document is the producer's JSON as given: nested objects,
    integers to the ends of u64 and i64, -0.0 and subnormal numbers, null-valued keys (kept,
    root-layout rule 5), empty containers, unicode and NUL — key order irrelevant."""
    meta = {"creator": {"name": "diff", "version": "1"}, "created_at": "2026-01-01T00:00:00Z",
            "n": 2**62, "neg": -5, "x": 0.1, "list": [1, "two", None, [3.5]], "ü": {"deep": {"er": True}},
            "huge": 1e300, "negzero": -0.0, "u64max": 2**64 - 1, "i64min": -2**63, "tiny": 5e-324, "null": None,
            "empty_list": [], "empty_object": {}, "nul": "é\x00"}
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.zeros(1)})}, box=None)
    path = WRITERS[writer](tmp_path / "meta.mrec", frame, meta=meta)
    doc = assert_same_reading(PEER, path)
    assert {k: v for k, v in doc["meta"].items() if k in meta} == meta


def _forcefield() -> ForceFieldSection:
    """The corpus's awkward force field (escaped pair style, wildcards, a masked parameter, a
    zero-row table, an unknown document key), with its tables rebuilt in memory."""
    section = mr.read_mrec_forcefield(default_corpus() / "valid/forcefield-styles/record.mrec")
    return ForceFieldSection(section.document, {n: Block(columns=dict(b.columns), masks=dict(b.masks))
                                                for n, b in section.tables.items()})


@pytest.mark.parametrize("writer", WRITERS)
def test_documents_forcefield_section_both_ways(tmp_path, writer):
    """The force field section (documents §forcefield): the document (unknown keys kept) and
    one table per style, escaped names, wildcards and a masked parameter, read alike."""
    section = _forcefield()
    path = _write_sections(writer, tmp_path / "ff.mrec", forcefield=section)
    doc = assert_same_reading(PEER, path)
    assert sorted(doc["forcefield"]["tables"]) == sorted(section.tables)
    if writer == "ours":  # molrs's unstamped force field validating clean is core27's (README#decision-15)
        assert not mr.validate(path), mr.validate(path)
    # the values written are the values read (molrs's arrays also carry zarrs's "_zarrs"
    # attribute, a producer attribute the comparison leaves out: root-layout rule 5)
    assert first_difference(forcefield_doc(section), doc["forcefield"]) is None


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_15_packed_zip_both_ways(tmp_path, writer):
    """trajectory §15: a record packed by either side's ``pack_mrec_zip`` is read alike by both,
    and equals the directory's reading."""
    frame = _rich_frame()
    folder = WRITERS[writer](tmp_path / "packed.mrec", frame, meta={"creator": {"name": "t"}})
    directory_doc = assert_same_reading(PEER, folder)
    packed = (mr.pack_mrec_zip(folder) if writer == "molrs" else molrs.io.mrec.pack_mrec_zip(folder))
    packed = Path(packed)
    assert packed.name == "packed.mrec.zip" and packed.is_file()
    zipped_doc = assert_same_reading(PEER, packed)
    assert zipped_doc == directory_doc


# -- property-based: frames written by one side, read by the other -------------------------

_NUMERIC = ["f64", "i8", "i32", "i64", "u8", "u64", "bool", "c128"]


@st.composite
def frames(draw):
    n = draw(st.integers(0, 5))
    columns, masks = {}, {}
    for i, dtype in enumerate(draw(st.lists(st.sampled_from(_NUMERIC + ["string"]), min_size=0, max_size=4))):
        name = f"c{i}_{dtype}"
        if dtype == "string":
            values = np.array(draw(st.lists(st.text(TEXT, max_size=4), min_size=n, max_size=n)) or [], dtype=object)
        elif dtype == "f64":
            values = np.array(draw(st.lists(st.floats(width=64), min_size=n, max_size=n)), dtype=np.float64)
        elif dtype == "c128":
            values = np.array(draw(st.lists(st.complex_numbers(), min_size=n, max_size=n)), dtype=np.complex128)
        elif dtype == "bool":
            values = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        else:
            info = np.iinfo(np.dtype({"i8": "int8", "i32": "int32", "i64": "int64", "u8": "uint8", "u64": "uint64"}[dtype]))
            values = np.array(draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n)),
                              dtype=info.dtype)
        columns[name] = values.reshape(n)
        if n and draw(st.booleans()):
            mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
            if not mask.all():
                masks[name] = mask
    tag = draw(st.sampled_from(sorted(EVERY_TAG)))
    meta = {"m": MetaValue(tag, EVERY_TAG[tag]), "f": draw(st.floats(width=64))}
    return Frame(meta=meta, blocks={"atoms": Block(columns=columns, masks=masks, count=n)},
                 box=draw(st.sampled_from(list(BOXES.values()))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=frames(), writer=st.sampled_from(sorted(WRITERS)))
def test_frame_and_types_14_hypothesis_frames_read_alike(tmp_path_factory, frame, writer):
    """Random frames (dtypes, masks, NaN/inf/-0.0, strings, a meta tag, a cell) written by one
    side read back alike by both, and equal to the frame written."""
    path = WRITERS[writer](tmp_path_factory.mktemp("h") / "h.mrec", frame)
    assert_same_reading(PEER, path)
    assert_same_frame(frame, from_peer_frame(molrs.io.mrec.MrecFile(path).frame()), "molrs read")
    assert mr.validate(path) == []


@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_14_absolute_targets_across_sections(tmp_path, writer):
    """An absolute row reference ``/frame/atoms`` from the system section (frame-and-types
    targets), with and without the frame section beside it, read alike."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.zeros(3)})}, box=None)
    system = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.ones(3)}),
                                    "members": Block(columns={"atom": np.array([0, 2], dtype=np.uint64)},
                                                     targets={"atom": "/frame/atoms"})}, box=None)
    both = WRITERS[writer](tmp_path / "both.mrec", frame, system=system)
    doc = assert_same_reading(PEER, both)
    assert doc["system"]["blocks"]["members"]["targets"] == {"atom": "/frame/atoms"}
    doc = assert_same_reading(PEER, _write_sections(writer, tmp_path / "alone.mrec", system=system))
    assert "frame" not in doc and doc["system"]["blocks"]["members"]["targets"] == {"atom": "/frame/atoms"}


NODE_NAMES = ["a b", "é", "x.y", ".h", "a%2Fb", "-"]


@pytest.mark.parametrize("name", NODE_NAMES)
@pytest.mark.parametrize("writer", WRITERS)
def test_zarr_v3_subset_1_node_names_read_alike(tmp_path, writer, name):
    """Block and column names with spaces, non-ASCII, dots, a leading dot, a literal ``%2F``
    (zarr-v3-subset §1 node names) are stored and read alike; strings with NUL and astral
    characters, a frame section without blocks, empty meta keys too."""
    frame = Frame(meta={"": 2.0, "ü k": MetaValue("json", {"": [1.5]})},
                  blocks={name: Block(columns={name: np.array(["a\x00b", "\U0001F600"], dtype=object)}),
                          "plain": Block(columns={"v": np.zeros(2)})}, box=None)
    path = WRITERS[writer](tmp_path / "names.mrec", frame, meta={"": 1, "x": {"": []}})
    doc = assert_same_reading(PEER, path)
    assert doc["frame"]["blocks"][name]["columns"][name]["values"] == ["a\x00b", "\U0001F600"]


@pytest.mark.parametrize("name", ["__x", "zarr.json"])
def test_zarr_v3_subset_1_reserved_node_names_refused_by_both_writers(tmp_path, name):
    """zarr-v3-subset §1: ``__``-prefixed names and ``zarr.json`` are no node names; both
    writers refuse them (we under zarr-v3-subset#1)."""
    frame = Frame(meta={}, blocks={name: Block(columns={"v": np.zeros(1)})}, box=None)
    with pytest.raises(mr.errors.MolrecError) as refused:
        mr.write_mrec_frame(tmp_path / "ours.mrec", frame)
    assert refused.value.rule == "zarr-v3-subset#1"
    with pytest.raises(ValueError):
        molrs.io.write_mrec(tmp_path / "theirs.mrec", frame=to_peer_frame(PEER, frame))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.floats(width=64), min_size=1, max_size=8),
       precision=st.sampled_from([1e-3, 0.1, 0.75, 2.0**-30, 1e3]))
def test_frame_and_types_9_both_writers_quantise_bit_for_bit(tmp_path_factory, values, precision):
    """frame-and-types §9: both writers store round_half_even(x/q)*q with q the largest power
    of two not above p (NaN, infinities, -0.0 and huge values kept); the stored bits agree."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.array(values)}, precision={"x": precision})}, box=None)
    where = tmp_path_factory.mktemp("q")
    ours = assert_same_reading(PEER, _write_ours(where / "ours.mrec", frame))
    theirs = assert_same_reading(PEER, _write_theirs(where / "theirs.mrec", frame))
    assert first_difference(ours["frame"], theirs["frame"]) is None
    q = 2.0 ** np.floor(np.log2(precision))
    stored = np.asarray(mr.read_mrec_frame(where / "ours.mrec").blocks["atoms"].columns["x"])
    finite = np.isfinite(values) & (np.abs(values) < 2.0**52 * q)
    np.testing.assert_array_equal(stored[finite], (np.round(np.array(values)[finite] / q) * q))


@pytest.mark.parametrize("writer", WRITERS)
def test_frame_and_types_8_9_null_rows_precision_and_references(tmp_path, writer):
    """A null row (validity false) references nothing (its 999 is not range-checked) and a
    precision column with a null row is still stored on the grid by both writers (§8, §9)."""
    frame = Frame(meta={}, blocks={
        "atoms": Block(columns={"x": np.array([0.1, 0.123456, 7.77])}, masks={"x": np.array([True, False, True])},
                       precision={"x": 0.01}),
        "bonds": Block(columns={"atomi": np.array([0, 999], dtype=np.uint64), "atomj": np.array([1, 2], dtype=np.uint64)},
                       masks={"atomi": np.array([True, False])}, targets={"atomi": "atoms", "atomj": "atoms"})}, box=None)
    path = WRITERS[writer](tmp_path / "nulls.mrec", frame)
    doc = assert_same_reading(PEER, path)
    assert doc["frame"]["blocks"]["atoms"]["columns"]["x"]["values"] == [0.1015625, 0.125, 7.7734375]
    assert doc["frame"]["blocks"]["bonds"]["columns"]["atomi"]["values"] == [0, 999]
    assert mr.validate(path) == []


def _ff_variant(change) -> ForceFieldSection:
    base = _forcefield()
    document = json.loads(json.dumps(base.document))
    tables = {n: Block(columns=dict(b.columns), masks=dict(b.masks)) for n, b in base.tables.items()}
    change(document, tables)
    return ForceFieldSection(document, tables)


def _pair(epsilon_ba: float) -> Block:
    return Block(columns={"name": np.array(["A-B", "B-A"], dtype=object), "itom": np.array(["A", "B"], dtype=object),
                          "jtom": np.array(["B", "A"], dtype=object), "epsilon": np.array([1.0, epsilon_ba]),
                          "sigma": np.array([1.0, 1.0])})


FF_REFUSED = {
    "no-units": (lambda d, t: d.pop("units"), "documents#9.23"),
    "units-empty": (lambda d, t: d.__setitem__("units", {}), "documents#9.23"),
    "no-name": (lambda d, t: d.pop("name"), "documents#9.23"),
    "missing-table": (lambda d, t: t.pop("bond.harmonic"), "documents#9.26"),
    "style-without-category": (lambda d, t: d["styles"][0].pop("category"), "documents#9.25"),
    "pair-restated-differently": (lambda d, t: t.__setitem__("pair.lj%2Fcut%2Fcoul%2Flong", _pair(2.0)), "documents#9.31"),
    "null-name": (lambda d, t: t["bond.harmonic"].masks.__setitem__("name", np.array([False])), "documents#9.27"),
    "angle-against-preset": (lambda d, t: d["units"].__setitem__("angle", "gradian"), "documents#9.23"),
    "special-bonds-two-weights": (lambda d, t: d.__setitem__("special_bonds", {"lj": [0.0, 0.0]}), "documents#9.24"),
}
FF_WRITTEN = {
    "pair-restated-alike": lambda d, t: t.__setitem__("pair.lj%2Fcut%2Fcoul%2Flong", _pair(1.0)),
    "unknown-table": lambda d, t: t.__setitem__("notes.free%20text", Block(columns={"a": np.array([1.0])})),
    "nan-parameter": lambda d, t: t["bond.harmonic"].columns.__setitem__("k", np.array([np.nan])),
}


@pytest.mark.parametrize("case", FF_REFUSED)
def test_documents_forcefield_both_writers_refuse_alike(tmp_path, case):
    """The force field rules (documents §9.23–§9.31): both writers refuse the same broken
    sections — no units, empty units, no name, a style without its table or category, a pair
    restated with another epsilon, a null name, an angle unit against the preset, two weights."""
    change, rule = FF_REFUSED[case]
    section = _ff_variant(change)
    with pytest.raises(mr.errors.SpecViolationError) as refused:
        mr.write_mrec_forcefield(tmp_path / "ours.mrec", section)
    assert refused.value.rule == rule
    with pytest.raises(ValueError, match="forcefield"):
        molrs.io.write_mrec(tmp_path / "theirs.mrec", forcefield=to_peer_forcefield(PEER, section))


@pytest.mark.parametrize("case", FF_WRITTEN)
@pytest.mark.parametrize("writer", ["ours", "molrs"])
def test_documents_forcefield_both_writers_accept_alike(tmp_path, writer, case):
    """An agreeing pair restatement, an unknown table, a NaN parameter: written and read alike."""
    section = _ff_variant(FF_WRITTEN[case])
    path = _write_sections(writer, tmp_path / "ff.mrec", forcefield=section)
    assert first_difference(forcefield_doc(section), assert_same_reading(PEER, path)["forcefield"]) is None
