"""Safe names: the percent codec of series keys (documents#9.10, reference-behaviour §2.19)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.metrics import MetricsWriter, decode_safe_name, encode_safe_name, read_metrics
from molrec_raw.zarr import open_group

EXAMPLES = [
    (".", "%2E"), ("..", "%2E."), ("__x", "%5F_x"), ("__", "%5F_"), ("_x", "_x"), ("a.b", "a.b"),
    ("train/loss", "train%2Floss"), ("eval/MAE", "eval%2FMAE"), ("a b", "a%20b"), ("é", "%C3%A9"),
    ("A-z_0.9", "A-z_0.9"), ("...", "..."), ("%", "%25"), ("_", "_"), ("._", "._"),
]


@pytest.mark.parametrize("key,name", EXAMPLES)
def test_documents_9_10_safe_name_examples_of_the_reference(key: str, name: str) -> None:
    assert encode_safe_name(key) == name
    assert decode_safe_name(name) == key


def test_documents_9_10_safe_name_round_trips_any_key() -> None:
    rng = random.Random(7)
    alphabet = "aZ09._-/ %é€😀\x00\n\"\\_."
    for _ in range(2000):
        key = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        name = encode_safe_name(key)
        assert decode_safe_name(name) == key
        assert "/" not in name and name not in (".", "..") and not name.startswith("__")
        assert all(c.isascii() for c in name)


def test_documents_9_10_three_dots_keep_their_name_and_a_record_writer_refuses_them(record, run_dir) -> None:
    """The rule escapes only "." and ".."; "..." is not a valid Zarr node name, so it cannot
    be densified: a record writer refuses the key before any line is written, a host keeps it."""
    assert encode_safe_name("...") == "..."
    with MetricsWriter(record) as writer:
        with pytest.raises(SpecViolationError, match="periods"):
            writer.log("...", 1.0)
    assert read_metrics(record) == {}
    with MetricsWriter.for_host(run_dir) as host:
        host.log("...", 1.0)
    assert list(read_metrics(host.wal_path)) == ["..."]


def test_documents_9_10_empty_key_has_no_safe_name_and_is_refused_at_write(record) -> None:
    with pytest.raises(SpecViolationError, match="empty"):
        encode_safe_name("")
    with MetricsWriter(record) as writer:
        with pytest.raises(SpecViolationError, match="empty"):
            writer.log("", 1.0)
        with pytest.raises(SpecViolationError, match="empty"):
            writer.log("", 1.0, step=3)
        with pytest.raises(SpecViolationError):
            writer.log_many({"": 1.0})
    assert read_metrics(record) == {}


@pytest.mark.parametrize("name", ["%2f", "%4", "%ZZ", "%", "x%2", "a b", "a/b", "é", "%2e", ""])
def test_documents_9_10_malformed_escape_refused_on_read(name: str) -> None:
    with pytest.raises(SpecViolationError):
        decode_safe_name(name)


def test_documents_9_10_needless_escape_of_unreserved_byte_accepted() -> None:
    assert decode_safe_name("%61%2Eb") == "a.b"


def test_documents_9_10_invalid_utf8_after_decoding_refused() -> None:
    with pytest.raises(SpecViolationError, match="UTF-8"):
        decode_safe_name("%FF")


def test_documents_9_10_reader_refuses_a_malformed_array_name(record) -> None:
    root = open_group(record, "r+")
    group = root.create_group("metrics")
    group.create_group("series").create_array("bad%2fname", shape=(1,), dtype=np.float64)
    with pytest.raises(SpecViolationError, match="bad%2fname"):
        read_metrics(record)
