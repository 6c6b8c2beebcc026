"""Symbolic links (issue 23 item 7; spec-notes/safety.md "Symbolic links").

Readers and ``pack`` never follow a symbolic link out of the record root: refused, naming it
(implemented once, in DirectoryStore's path resolution).  A link that stays inside is fine.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import StoreError
from molrec_raw.zarr import DirectoryStore

from safety_helpers import frames_of, make_record


def _secret(tmp: Path) -> Path:
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not yours")
    return outside


def test_safety_symlink_a_file_link_out_of_the_record_is_refused_by_readers_and_pack(tmp_path: Path) -> None:
    """A chunk replaced by a link to a file outside: every read of it, validate and pack are
    refused naming the link; nothing of the file outside reaches a zip."""
    outside = _secret(tmp_path)
    record = tmp_path / "r.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0)})}))
    chunk = record / "frame" / "atoms" / "x" / "c" / "0"
    chunk.unlink()
    os.symlink(outside / "secret", chunk)
    with pytest.raises(StoreError, match="symbolic link 'frame/atoms/x/c/0' out of the store"):
        mr.read_mrec_frame(record)
    violations = mr.validate(record)
    assert any("symbolic link" in v.message for v in violations), violations
    with pytest.raises(StoreError, match="frame/atoms/x/c/0"):
        mr.pack_mrec_zip(record, check=False)  # even forced
    assert not (tmp_path / "r.mrec.zip").exists()
    assert DirectoryStore(record).get("frame/atoms/x/zarr.json") is not None  # the rest reads on


def test_safety_symlink_a_directory_link_out_of_the_record_is_refused(tmp_path: Path) -> None:
    """A section directory replaced by a link to a directory outside (holding a record of its
    own): reads through it and pack are refused, naming the link."""
    outside = tmp_path / "elsewhere.mrec"
    make_record(outside)
    record = make_record(tmp_path / "r.mrec")
    (record / "system").rename(tmp_path / "system-moved")
    os.symlink(outside / "system", record / "system")
    with pytest.raises(StoreError, match="symbolic link 'system' out of the store"):
        mr.read_mrec_system(record)
    with pytest.raises(StoreError, match="'system'"):
        mr.pack_mrec_zip(record, check=False)
    with pytest.raises(StoreError, match="'system'"):  # a trajectory reader checks the system it aligns with
        frames_of(record)


def test_safety_symlink_a_link_that_stays_inside_is_followed(tmp_path: Path) -> None:
    record = tmp_path / "r.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0)})}))
    chunk = record / "frame" / "atoms" / "x" / "c" / "0"
    kept = record / "frame" / "atoms" / "x" / "copy"
    chunk.rename(kept)
    os.symlink(kept, chunk)
    assert mr.read_mrec_frame(record)["atoms"]["x"].tolist() == [0.0, 1.0, 2.0]
