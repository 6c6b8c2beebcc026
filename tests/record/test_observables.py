"""The observables section: documents §6, checklist documents#9.18–9.22, reference-behaviour §2.18."""
from __future__ import annotations

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.observables import (
    Observable, check_observable_meta, check_observable_name, read_observables_group, write_observables_group,
)
from molrec_raw.zarr import open_group


def scalar_meta(**extra):
    meta = {"kind": "scalar", "description": "potential energy", "time_dependent": True, "unit": "eV",
            "axes": ["timestep"], "domain": "trajectory"}
    meta.update(extra)
    return meta


def write_read(tmp_path, observables, name="x.mrec"):
    root = open_group(tmp_path / name, mode="w")
    write_observables_group(root, observables)
    return read_observables_group(open_group(tmp_path / name, mode="r")["observables"])


def hand_built(tmp_path, name="bad.mrec"):
    """A store built directly on the Zarr layer, as a careless producer could."""
    root = open_group(tmp_path / name, mode="w")
    section = root.create_group("observables")
    return root, section


def reopen(tmp_path, name="bad.mrec"):
    return open_group(tmp_path / name, mode="r")["observables"]


# -- round trips (reference-behaviour §2.18) -------------------------------------------------------
def test_reference_2_18_scalar_observable_round_trip(tmp_path):
    energy = Observable(np.array([-1.5, -1.25, -0.0, 5e-324]), scalar_meta())
    back = write_read(tmp_path, {"energy": energy})
    assert list(back) == ["energy"]
    got = back["energy"]
    assert got == energy
    assert got.meta["kind"] == "scalar" and got.meta["unit"] == "eV" and got.meta["axes"] == ["timestep"]
    assert got.meta["time_dependent"] is True and got.meta["domain"] == "trajectory"
    assert list(got.meta) == list(energy.meta)  # key order kept
    assert got.data.dtype == np.float64 and got.data.tobytes() == energy.data.tobytes()


def test_reference_2_18_unknown_kind_round_trips_twice_unchanged(tmp_path):
    meta = {"kind": "spectrum_density", "description": "vibrational DOS", "time_dependent": False,
            "x_vendor": None, "binning": {"width": 0.5, "edges": [0, 1, 2]}, "unit": "1/cm"}
    obs = {"dos": Observable(np.array([[0.0, 1.0], [2.0, 3.0]]), meta)}
    once = write_read(tmp_path, obs, "a.mrec")
    twice = write_read(tmp_path, once, "b.mrec")
    assert once == obs and twice == obs
    assert list(twice["dos"].meta) == list(meta) and twice["dos"].meta["x_vendor"] is None


@pytest.mark.parametrize("data", [
    np.float64(3.5),  # 0-d
    np.array(7, dtype=np.int64),
    np.array("only one", dtype=object),
    np.array(["a", "", "ünï"], dtype=object),
    np.array(["fixed", "width"]),  # numpy U strings become vlen strings
    np.arange(24, dtype=np.int8).reshape(2, 3, 4),
    np.array([1, 2], dtype=np.uint64),
    np.array([1, 2], dtype=np.uint16),
    np.array([True, False]),
    np.array([1 + 2j, -0.0j], dtype=np.complex64),
    np.array([[1 + 2j]], dtype=np.complex128),
    np.zeros((0, 3)),
    np.array([1.0, 2.0], dtype=">f8"),  # big-endian in memory, stored little-endian
])
def test_documents_6_1_every_column_dtype_and_shape_round_trips(data, tmp_path):
    meta = {"kind": "vector", "description": "d", "time_dependent": False}
    back = write_read(tmp_path, {"v": Observable(data, meta)})["v"]
    expected = np.asarray(data)
    assert back.data.shape == expected.shape
    if expected.dtype.kind in "UTO":
        assert back.data.dtype == object and back.data.tolist() == expected.tolist()
    else:
        assert back.data.dtype == expected.dtype.newbyteorder("=")
        assert np.array_equal(back.data, expected)
    assert back == Observable(data, meta)


def test_documents_6_1_empty_section_is_valid(tmp_path):
    assert write_read(tmp_path, {}) == {}


def test_documents_6_1_several_observables_read_in_name_order(tmp_path):
    meta = {"kind": "scalar", "description": "", "time_dependent": False}
    obs = {"b": Observable(np.array([1.0]), meta), "a": Observable(np.array([2.0]), dict(meta, kind="x"))}
    back = write_read(tmp_path, obs)
    assert back == obs and list(back) == ["a", "b"]


def test_documents_6_1_time_independent_0d(tmp_path):
    meta = {"kind": "scalar", "description": "binding energy", "time_dependent": False, "unit": "eV"}
    back = write_read(tmp_path, {"eb": Observable(np.float64(-1.25), meta)})
    assert back["eb"].data.shape == () and float(back["eb"].data) == -1.25


# -- documents#9.18 pairing -----------------------------------------------------------------------
def test_documents_9_18_data_without_meta_refused(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_group("meta")
    section.create_array("energy", shape=(2,), dtype=np.float64)[...] = [1.0, 2.0]
    with pytest.raises(SpecViolationError) as info:
        read_observables_group(reopen(tmp_path))
    assert info.value.message == "observable 'energy' has data but no 'observables/meta/energy' entry"
    assert info.value.rule == "documents#9.18"


def test_documents_9_18_data_without_meta_group_at_all_refused(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_array("energy", shape=(), dtype=np.float64)
    with pytest.raises(SpecViolationError, match="has data but no 'observables/meta/energy' entry"):
        read_observables_group(reopen(tmp_path))


def test_documents_9_18_meta_without_data_refused(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_group("ir", attributes={"kind": "spectrum", "description": "",
                                                                 "time_dependent": False})
    with pytest.raises(SpecViolationError, match="'ir'.*no data array") as info:
        read_observables_group(reopen(tmp_path))
    assert info.value.rule == "documents#9.18"


def test_documents_9_18_collects_without_stopping(tmp_path):
    _, section = hand_built(tmp_path)
    meta = section.create_group("meta")
    meta.create_group("ok", attributes={"kind": "scalar", "description": "", "time_dependent": False})
    section.create_array("ok", shape=(1,), dtype=np.float64)
    meta.create_group("lonely", attributes={"kind": "scalar", "description": "", "time_dependent": False})
    section.create_array("orphan", shape=(1,), dtype=np.float64)
    found = []
    back = read_observables_group(reopen(tmp_path), out=found)
    assert sorted(v.message for v in found) == [
        "observable 'lonely' has an 'observables/meta/lonely' entry but no data array",
        "observable 'orphan' has data but no 'observables/meta/orphan' entry",
    ]
    assert list(back) == ["ok"]


def test_documents_6_1_unexpected_layout_reported_not_dropped(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_array("stray", shape=(1,), dtype=np.float64)
    section.create_group("extra")
    found = []
    read_observables_group(reopen(tmp_path), out=found)
    assert sorted(v.node for v in found) == ["/observables/extra", "/observables/meta/stray"]


# -- documents#9.19 names ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["meta", "", "a/b", ".", "..", "__x", "zarr.json"])
def test_documents_9_19_bad_name_refused(name, tmp_path):
    root = open_group(tmp_path / "x.mrec", mode="w")
    obs = Observable(np.array([1.0]), {"kind": "scalar", "description": "", "time_dependent": False})
    with pytest.raises(SpecViolationError) as info:
        write_observables_group(root, {name: obs})
    assert info.value.rule == "documents#9.19"
    assert "observables" not in root  # refused before writing


@pytest.mark.parametrize("name", ["energy", "_x", "a.b", "...x", "E_total-2", "ünï"])
def test_documents_9_19_ordinary_names_accepted(name):
    assert list(check_observable_name(name, "/observables")) == []


# -- documents#9.20 / 9.21 metadata ---------------------------------------------------------------
@pytest.mark.parametrize("meta", [
    {"description": "x", "time_dependent": False},  # missing kind
    {"kind": "", "description": "x", "time_dependent": False},
    {"kind": 3, "description": "x", "time_dependent": False},
    {"kind": "scalar", "time_dependent": False},  # missing description
    {"kind": "scalar", "description": 1, "time_dependent": False},
    {"kind": "scalar", "description": "x"},  # missing time_dependent
    {"kind": "scalar", "description": "x", "time_dependent": 1},
    {"kind": "scalar", "description": "x", "time_dependent": False, "unit": 1},
    {"kind": "scalar", "description": "x", "time_dependent": False, "axes": "timestep"},
    {"kind": "scalar", "description": "x", "time_dependent": False, "axes": ["t", 1]},
    {"kind": "scalar", "description": "x", "time_dependent": False, "domain": ["trajectory"]},
    ["kind", "scalar"],
])
def test_documents_9_20_bad_meta_refused(meta, tmp_path):
    found = list(check_observable_meta(meta, np.zeros(2), "/observables/meta/o"))
    assert [v.rule for v in found] == ["documents#9.20"]
    root = open_group(tmp_path / "x.mrec", mode="w")
    with pytest.raises(SpecViolationError):
        write_observables_group(root, {"o": Observable(np.zeros(2), meta)})


def test_documents_9_20_missing_kind_refused_at_read(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_group("energy", attributes={"description": "", "time_dependent": True})
    section.create_array("energy", shape=(2,), dtype=np.float64)
    with pytest.raises(SpecViolationError, match="kind") as info:
        read_observables_group(reopen(tmp_path))
    assert info.value.rule == "documents#9.20"


def test_documents_9_20_time_dependent_0d_refused(tmp_path):
    meta = {"kind": "scalar", "description": "x", "time_dependent": True}
    root = open_group(tmp_path / "x.mrec", mode="w")
    with pytest.raises(SpecViolationError, match="0-d"):
        write_observables_group(root, {"e": Observable(np.float64(1.0), meta)})
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_group("e", attributes=meta)
    section.create_array("e", shape=(), dtype=np.float64)
    with pytest.raises(SpecViolationError, match="0-d"):
        read_observables_group(reopen(tmp_path))


def test_documents_9_3_null_named_key_read_as_absent_refused_at_write(tmp_path):
    meta = {"kind": "scalar", "description": "x", "time_dependent": False, "unit": None}
    assert list(check_observable_meta(meta, np.zeros(1), "/o")) == []
    with pytest.raises(SpecViolationError, match="omit"):
        write_observables_group(open_group(tmp_path / "x.mrec", mode="w"), {"o": Observable(np.zeros(1), meta)})
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_group("o", attributes=meta)
    section.create_array("o", shape=(1,), dtype=np.float64)
    assert read_observables_group(reopen(tmp_path))["o"].meta["unit"] is None


def test_documents_9_4_meta_finite_json_refused(tmp_path):
    meta = {"kind": "scalar", "description": "x", "time_dependent": False, "x_peak": float("inf")}
    with pytest.raises(SpecViolationError) as info:
        write_observables_group(open_group(tmp_path / "x.mrec", mode="w"), {"o": Observable(np.zeros(1), meta)})
    assert info.value.rule == "documents#9.4"


def test_documents_9_21_extra_keys_and_unknown_kind_preserved(tmp_path):
    meta = {"vendor_first": [1, {"a": None}], "kind": "spectrum", "description": "IR", "time_dependent": False,
            "sampling": "time_average", "target": "/frame/atoms", "x_vendor": None}
    back = write_read(tmp_path, {"ir": Observable(np.array([0.1, 0.2, 0.3]), meta)})
    assert back["ir"].meta == meta and list(back["ir"].meta) == list(meta)


# -- documents#9.22 dtypes --------------------------------------------------------------------------
@pytest.mark.parametrize("data", [
    np.zeros(3, dtype=np.float32),
    np.zeros(3, dtype=np.float16),
    np.array([1, "a"], dtype=object),
    np.array([b"raw"]),
    np.zeros(2, dtype="datetime64[s]"),
])
def test_documents_9_22_bad_dtype_refused_at_write(data, tmp_path):
    root = open_group(tmp_path / "x.mrec", mode="w")
    with pytest.raises(SpecViolationError) as info:
        write_observables_group(root, {"o": Observable(data, {"kind": "scalar", "description": "",
                                                              "time_dependent": False})})
    assert info.value.rule == "documents#9.22"
    assert "observables" not in root


def test_documents_9_22_float32_refused_at_read(tmp_path):
    _, section = hand_built(tmp_path)
    section.create_group("meta").create_group("f", attributes={"kind": "scalar", "description": "",
                                                               "time_dependent": False})
    section.create_array("f", shape=(3,), dtype=np.float32)
    with pytest.raises(SpecViolationError, match="float32") as info:
        read_observables_group(reopen(tmp_path))
    assert info.value.rule == "documents#9.22"


def test_write_refuses_non_observable_values(tmp_path):
    root = open_group(tmp_path / "x.mrec", mode="w")
    with pytest.raises(TypeError):
        write_observables_group(root, {"o": np.zeros(2)})
    with pytest.raises(TypeError):
        write_observables_group(root, [Observable(np.zeros(2), {})])
