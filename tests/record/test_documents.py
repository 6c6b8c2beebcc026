"""meta / status / method documents (documents §1–§3, §9.1–9.9; frame-and-types §11, §14)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.documents import (
    CURRENT_VERSION,
    SUBSTANTIVE_SECTIONS,
    SUPPORTED_VERSIONS,
    check_finite_json,
    check_meta,
    check_method,
    check_sections,
    check_status,
    is_rfc3339,
    meta_version,
    stamp_meta,
)
from molrec_raw.record.violations import Violation, refuse

ENGINE = {"name": "molrs"}
CLASSICAL = {"type": "classical", "description": "MD", "engine": ENGINE}


def where(violations):
    """(rule, node) of each violation."""
    return [(v.rule, v.node) for v in violations]


def only(violations, rule, node):
    vs = list(violations)
    assert len(vs) == 1, vs
    assert isinstance(vs[0], Violation)
    assert (vs[0].rule, vs[0].node) == (rule, node)
    return vs[0]


# -- constants ---------------------------------------------------------------------------

def test_readme_decision_1_version_constants():
    assert CURRENT_VERSION == 2
    assert list(SUPPORTED_VERSIONS) == [1, 2]
    assert SUBSTANTIVE_SECTIONS == ("frame", "system", "trajectory", "forcefield", "status")


# -- meta: version (README decision 1) ---------------------------------------------------

@pytest.mark.parametrize("bad", [None, 0, "1", 1.0, True, 3, -1, 1.5, np.bool_(True), [1]])
def test_frame_and_types_14_23_bad_versions_refused(bad):
    v = only(check_meta({"molrec_version": bad}), "frame-and-types#14.23", "/meta")
    assert "molrec_version" in v.message
    with pytest.raises(SpecViolationError) as info:
        meta_version({"molrec_version": bad})
    assert info.value.rule == "frame-and-types#14.23" and info.value.node == "/meta"
    assert "molrec_version" in str(info.value)


@pytest.mark.parametrize("good", [1, 2, np.int64(2)])
def test_frame_and_types_14_23_supported_versions_accepted(good):
    assert list(check_meta({"molrec_version": good})) == []
    assert meta_version({"molrec_version": good}) == int(good)
    assert type(meta_version({"molrec_version": good})) is int


def test_frame_and_types_14_30_missing_version_is_a_current_store():
    doc = {"producer": "other", "x": None}
    assert list(check_meta(doc)) == []
    assert meta_version(doc) is None
    assert doc == {"producer": "other", "x": None}  # not re-stamped on read


def test_frame_and_types_14_24_missing_meta_is_empty_document():
    assert list(check_meta(None)) == []
    assert list(check_meta({})) == []
    assert meta_version(None) is None


def test_frame_and_types_14_50_stamp_overrides_caller_value():
    for claim in (1, 99, "x", None, 2.0):
        caller = {"creator": {"name": "me"}, "molrec_version": claim, "z": 1}
        out = stamp_meta(caller)
        assert out == {"creator": {"name": "me"}, "molrec_version": 2, "z": 1}
        assert type(out["molrec_version"]) is int
        assert list(out) == ["creator", "molrec_version", "z"]  # kept where the caller had it
        assert caller["molrec_version"] == claim  # caller's dict untouched
        assert out is not caller


def test_frame_and_types_14_50_stamp_appends_and_handles_none():
    assert stamp_meta(None) == {"molrec_version": 2}
    assert stamp_meta({}) == {"molrec_version": 2}
    out = stamp_meta({"creator": {"name": "test"}, "b": 2})
    assert list(out) == ["creator", "b", "molrec_version"]
    assert list(check_meta(out, writing=True)) == []
    with pytest.raises(SpecViolationError):
        stamp_meta(["not", "an", "object"])


def test_documents_9_2_unknown_keys_and_nulls_preserved():
    caller = {"producer": None, "nested": {"k": None, "l": [None, 1]}, "creator": {"name": "a", "extra": None}}
    out = stamp_meta(caller)
    assert out["producer"] is None and "producer" in out
    assert out["nested"] == {"k": None, "l": [None, 1]}
    assert out["creator"] == {"name": "a", "extra": None}
    # unknown keys are never checked, in any document and any mode
    assert list(check_meta(out, writing=True)) == []
    status = {"state": "weird-custom", "custom": None, "error": {"message": "m", "extra": None}}
    assert list(check_status(status, writing=True)) == []
    method = dict(CLASSICAL, extra=None, engine={"name": "x", "build": None})
    assert list(check_method(method, writing=True)) == []


# -- meta: identity keys (frame-and-types 14.21) ------------------------------------------

@pytest.mark.parametrize("doc", [
    {"creator": {}},
    {"creator": {"name": 3}},
    {"creator": "molrs"},
    {"author": {"email": "a@b"}},
    {"author": {"name": "a", "email": 5}},
    {"creator": {"name": "a", "version": 1}},
    {"created_at": "2026-08-04T00:00:00"},
    {"created_at": "2026-08-04"},
    {"created_at": 1754265600},
])
def test_frame_and_types_14_21_bad_identity_refused(doc):
    only(check_meta(doc), "frame-and-types#14.21", "/meta")


def test_frame_and_types_14_21_valid_identity_accepted():
    doc = {"molrec_version": 1, "creator": {"name": "molrec-fixtures", "version": "0.0.0"},
           "author": {"name": "A", "email": "a@example.org"},
           "created_at": "2026-08-04T00:00:00+00:00", "source": "s", "record_id": "r",
           "content_hash": "h", "modules": {"m": {"spec": "https://x"}}}
    assert list(check_meta(doc)) == []


@pytest.mark.parametrize("doc", [{"modules": []}, {"modules": {"m": 1}}, {"modules": {"m": None}},
                                 {"source": 1}, {"record_id": []}, {"content_hash": 2}])
def test_frame_and_types_11_1_modules_and_strings(doc):
    only(check_meta(doc, node="/x/meta"), "frame-and-types#11.1", "/x/meta")


def test_frame_and_types_14_49_meta_null_named_key():
    doc = {"creator": None, "created_at": None, "modules": None}
    assert list(check_meta(doc)) == []  # reader: null named key = absent
    vs = list(check_meta(doc, writing=True))
    assert where(vs) == [("frame-and-types#14.49", "/meta")] * 3
    assert all("omit" in v.message for v in vs)
    only(check_meta({"creator": {"name": "a", "version": None}}, writing=True),
         "frame-and-types#14.49", "/meta")


def test_frame_and_types_14_21_meta_not_an_object():
    only(check_meta([1]), "frame-and-types#14.21", "/meta")


# -- RFC 3339 (README decision 10) -------------------------------------------------------

@pytest.mark.parametrize("text", [
    "2026-08-04T00:00:00Z", "2026-08-04T00:00:00+02:00", "2026-08-04t00:00:00z",
    "2026-08-04T23:59:59.123456789-05:30", "2024-02-29T12:00:00+00:00", "2026-08-04T00:00:00-00:00",
    "2026-08-04T00:00:00.5Z",
])
def test_readme_decision_10_rfc3339_accepted(text):
    assert is_rfc3339(text)


@pytest.mark.parametrize("text", [
    "2026-08-04T00:00:00", "2026-08-04", "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z",
    "2025-02-29T00:00:00Z", "2026-08-04T24:00:00Z", "2026-08-04T00:60:00Z", "2026-08-04T00:00:60Z",
    "2026-08-04 00:00:00Z", "2026-08-04T00:00Z", "2026-08-04T00:00:00+2:00", "2026-08-04T00:00:00+0200",
    "2026-08-04T00:00:00+24:00", "2026-08-04T00:00:00+02:60", "2026-08-04T00:00:00.Z",
    "2026-08-04T00:00:00Z\n", " 2026-08-04T00:00:00Z", "2026-8-4T00:00:00Z",
    "２０２６-08-04T00:00:00Z", "", None, 20260804, b"2026-08-04T00:00:00Z",
])
def test_readme_decision_10_rfc3339_refused(text):
    assert not is_rfc3339(text)


# -- record sections (documents 9.1, frame-and-types 14.22, README decision 2) ------------

def test_documents_9_1_record_without_substantive_section_reported():
    v = only(check_sections(["meta", "method", "metrics", "observables"]), "documents#9.1", "/")
    assert "frame, system, trajectory, forcefield, status" in v.message
    only(check_sections([]), "documents#9.1", "/")
    only(check_sections(["meta"], node="/r"), "documents#9.1", "/r")


@pytest.mark.parametrize("section", SUBSTANTIVE_SECTIONS)
def test_frame_and_types_14_22_each_substantive_section_suffices(section):
    assert list(check_sections(["meta", section])) == []
    assert list(check_sections(iter([section]))) == []


# -- finite JSON (documents 9.4, frame-and-types 14.41) ----------------------------------

@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan"),
                                 np.float32("inf"), np.float16("-inf")])
def test_documents_9_4_non_finite_refused(bad):
    doc = {"a": {"b": [1, {"c": bad}]}}
    v = only(check_finite_json(doc, "/status", "documents#9.4"), "documents#9.4", "/status")
    assert "/a/b/1/c" in v.message
    only(check_finite_json(bad, "/meta", "frame-and-types#14.41"), "frame-and-types#14.41", "/meta")


def test_frame_and_types_14_41_only_json_values():
    doc = {1: "x", "set": {1}, "arr": np.zeros(2), "cx": 1j, "obj": object(), "b": b"x"}
    vs = list(check_finite_json(doc, "/meta", "frame-and-types#14.41"))
    assert where(vs) == [("frame-and-types#14.41", "/meta")] * 6
    assert "key 1" in vs[0].message


def test_documents_9_4_finite_json_accepted():
    doc = {"s": "x", "i": 2**70, "f": 1.5, "t": True, "n": None, "l": [1, (2, 3)],
           "np": [np.float64(1.0), np.float32(2.0), np.int64(3), np.bool_(False)], "e": {}}
    assert list(check_finite_json(doc, "/meta", "documents#9.4")) == []


def test_documents_9_4_deep_nesting_does_not_exhaust_stack():
    doc: object = math.nan
    for _ in range(5000):
        doc = {"k": [doc]}
    only(check_finite_json(doc, "/meta", "documents#9.4"), "documents#9.4", "/meta")


# -- status (documents §2, 9.3, 9.5–9.8) -------------------------------------------------

def test_documents_9_5_status_without_state_refused():
    v = only(check_status({"stage": "train"}), "documents#9.5", "/status")
    assert "'state'" in v.message
    only(check_status({"state": None}), "documents#9.5", "/status")
    with pytest.raises(SpecViolationError) as info:
        refuse(check_status({"stage": "train"}, node="/run/status"))
    assert info.value.rule == "documents#9.5" and info.value.node == "/run/status"


@pytest.mark.parametrize("doc", [{"state": 1}, {"state": "running", "stage": 2},
                                 {"state": "running", "message": ["x"]}, ["state"]])
def test_documents_9_5_status_bad_state_or_strings_refused(doc):
    only(check_status(doc), "documents#9.5", "/status")


def test_documents_9_5_status_valid_and_custom_state():
    doc = {"state": "running", "epoch": 3, "started_at": "2026-08-04T00:00:00+00:00"}
    assert list(check_status(doc)) == []
    full = {"state": "my-custom", "stage": "train", "epoch": 0, "global_step": np.int64(7),
            "progress": {"a": 1, "b": 0.5, "c": np.float32(1)}, "message": "hi",
            "started_at": "2026-08-04T00:00:00Z", "updated_at": "2026-08-04T00:00:01Z",
            "finished_at": "2026-08-04T00:00:02.5+00:00",
            "error": {"message": "boom", "type": "ValueError", "traceback": "...", "x": 1}}
    assert list(check_status(full, writing=True)) == []


@pytest.mark.parametrize("key,value", [
    ("epoch", -1), ("epoch", 1.0), ("epoch", True), ("epoch", "3"), ("global_step", -5),
    ("global_step", np.bool_(True)), ("progress", [1]), ("progress", {"a": True}),
    ("progress", {"a": "1"}), ("progress", {"a": None}),
])
def test_documents_9_6_bad_counters_and_progress_refused(key, value):
    only(check_status({"state": "running", key: value}), "documents#9.6", "/status")


@pytest.mark.parametrize("key", ["started_at", "updated_at", "finished_at"])
@pytest.mark.parametrize("value", ["2026-08-04T00:00:00", "2026-08-04", "2026-13-01T00:00:00Z", 0])
def test_documents_9_7_timestamp_without_offset_refused(key, value):
    only(check_status({"state": "running", key: value}), "documents#9.7", "/status")


@pytest.mark.parametrize("error", ["boom", [], {}, {"message": 1}, {"message": None},
                                   {"message": "m", "type": 1}, {"message": "m", "traceback": ["t"]}])
def test_documents_9_8_bad_error_refused(error):
    only(check_status({"state": "failed", "error": error}), "documents#9.8", "/status")


def test_documents_9_3_status_null_named_key_refused_on_write_absent_on_read():
    doc = {"state": "running", "stage": None, "error": {"message": "m", "type": None}}
    assert list(check_status(doc)) == []
    vs = list(check_status(doc, writing=True))
    assert where(vs) == [("documents#9.3", "/status")] * 2
    assert "'stage'" in vs[0].message and "omit" in vs[0].message
    assert "error.'type'" in vs[1].message


# -- method (documents §3, 9.9) ----------------------------------------------------------

def test_documents_9_9_valid_classical_and_custom_type():
    assert list(check_method(CLASSICAL)) == []
    training = {"type": "training", "description": "d", "engine": {"name": "molnex", "version": "1"}}
    assert list(check_method(training, writing=True)) == []


@pytest.mark.parametrize("doc", [
    {"type": "ml", "description": "d"},                       # fixture method/invalid-no-engine
    {"type": "ml", "description": "d", "engine": {}},
    {"type": "ml", "description": "d", "engine": "molrs"},
    {"type": "ml", "description": "d", "engine": {"name": 1}},
    {"type": "ml", "description": "d", "engine": {"name": "x", "version": 1}},
    {"description": "d", "engine": ENGINE},
    {"type": 1, "description": "d", "engine": ENGINE},
    {"type": "ml", "engine": ENGINE},
    {"type": "ml", "description": None, "engine": ENGINE},
    "classical",
])
def test_documents_9_9_method_missing_or_bad_keys_refused(doc):
    only(check_method(doc), "documents#9.9", "/method")


def test_documents_9_9_workflow_recursion():
    inner = {"type": "workflow", "description": "nested", "engine": ENGINE,
             "order": ["x"], "stages": {"x": {"type": "ml", "description": "d"}}}
    wf = {"type": "workflow", "description": "w", "engine": ENGINE, "order": ["a", "b", "c"],
          "stages": {"a": CLASSICAL, "b": {"type": "ml", "engine": ENGINE}, "c": inner}}
    vs = list(check_method(wf))
    assert where(vs) == [("documents#9.9", "/method/stages/b"),
                         ("documents#9.9", "/method/stages/c/stages/x")]
    assert "'description'" in vs[0].message and "'engine'" in vs[1].message
    good = dict(wf, stages={"a": CLASSICAL, "b": CLASSICAL, "c": dict(inner, stages={"x": CLASSICAL})})
    assert list(check_method(good)) == []


@pytest.mark.parametrize("order,stages", [
    (None, {}), ("a", {}), (["a", 1], {}), ([], None), ([], ["a"]), ([], {"a": "classical"}),
])
def test_documents_9_9_workflow_order_and_stages_refused(order, stages):
    doc = dict(CLASSICAL, type="workflow")
    if order is not None:
        doc["order"] = order
    if stages is not None:
        doc["stages"] = stages
    expected = "/method/stages/a" if stages == {"a": "classical"} else "/method"
    only(check_method(doc), "documents#9.9", expected)


def test_documents_9_9_order_stages_unchecked_outside_workflow():
    assert list(check_method(dict(CLASSICAL, order=3, stages="x"))) == []


def test_documents_9_9_deep_workflow_does_not_exhaust_stack():
    doc = CLASSICAL
    for _ in range(3000):
        doc = {"type": "workflow", "description": "w", "engine": ENGINE, "order": ["s"], "stages": {"s": doc}}
    assert list(check_method(doc)) == []


def test_documents_9_3_method_null_named_key_refused_on_write():
    doc = dict(CLASSICAL, engine={"name": "x", "version": None})
    assert list(check_method(doc)) == []
    only(check_method(doc, writing=True), "documents#9.3", "/method")
