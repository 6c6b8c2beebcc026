"""What a conformance case is, and the small tools the case builders share.

A case writes one record through this package's public writers (so a change in the bytes
they produce changes the corpus), then — for foreign layouts and invalid cases — edits
what a writer of ours would never produce, through the Zarr layer or by hand.  Every
builder is deterministic: fixed values, fixed wall times, no randomness.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from molrec_raw.zarr import Array, DirectoryStore, Group, open_group
from molrec_raw.zarr import jsonio

__all__ = ["Case", "CASES", "valid", "invalid", "valid_collection", "invalid_collection", "RECORD", "ZIP", "COLLECTION",
           "strings", "store_of", "group_at", "array_at", "edit_json",
           "edit_attrs", "write_json", "remove", "WALL"]

RECORD = "record.mrec"
ZIP = "record.mrec.zip"
COLLECTION = "collection.mrec.lmdb"  # the one form of a collection case (lmdb.md: one file)
WALL = "2026-08-04T00:00:{:02d}Z"  # wall times of metrics events: fixed, second by second


@dataclass(frozen=True)
class Case:
    """One corpus case: ``name`` (``valid/…`` or ``invalid/…``), what it is about, its
    builder (writes the record directory at the path it is given), and for an invalid case
    the rule a reader must refuse it under and the form it comes in (``dir`` or ``zip``:
    a zip case's ``zip_edit`` breaks the packed archive; ``lmdb``: a collection, one
    ``*.mrec.lmdb`` file, valid or not).  ``frozen``: laid out once by
    another tool and checked in (verified, never rebuilt)."""

    name: str
    about: str
    build: Callable[[Path], None]
    rule: Optional[str] = None
    form: str = "dir"
    zip_edit: Optional[Callable[[Path], None]] = None
    frozen: bool = False

    @property
    def valid(self) -> bool:
        return self.name.startswith("valid/")


CASES: List[Case] = []


def valid(name: str, about: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    """Register a valid case (a directory and its zip; expected.json is its dump)."""
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(f"valid/{name}", about, build))
        return build
    return register


def invalid(name: str, rule: str, about: str, *, zip_edit: Optional[Callable[[Path], None]] = None,
            base: Optional[Callable[[Path], None]] = None) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    """Register an invalid case refused under ``rule``.  With ``zip_edit`` the case is a zip:
    ``base`` (or the decorated function) writes a valid directory, it is packed, and
    ``zip_edit`` breaks the archive."""
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(f"invalid/{name}", about, build, rule, "zip" if zip_edit else "dir", zip_edit))
        return build
    return register


def valid_collection(name: str, about: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    """Register a valid collection case (one ``collection.mrec.lmdb``; expected.json is its dump)."""
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(f"valid/{name}", about, build, form="lmdb"))
        return build
    return register


def invalid_collection(name: str, rule: str, about: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    """Register a collection case a reader refuses under ``rule``."""
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(f"invalid/{name}", about, build, rule, "lmdb"))
        return build
    return register


def strings(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def store_of(rec: Path) -> Group:
    """The record's root through the Zarr layer, for edits a record writer never makes."""
    return open_group(DirectoryStore(rec), mode="r+", threads=1)


def group_at(rec: Path, path: str) -> Group:
    """The group at ``path`` of the record (opened for edits)."""
    node = store_of(rec)[path]
    assert isinstance(node, Group), f"{path} is not a group"
    return node


def array_at(rec: Path, path: str) -> Array:
    """The array at ``path`` of the record (opened for edits)."""
    node = store_of(rec)[path]
    assert isinstance(node, Array), f"{path} is not an array"
    return node


def edit_json(rec: Path, key: str, change: Callable[[Dict[str, Any]], object]) -> None:
    """Parse the JSON file ``key`` of the record, let ``change`` edit it, write it back in
    the Zarr layer's form (orjson, indent 2: deterministic)."""
    path = rec / key
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_bytes(jsonio.dumps(doc))


def edit_attrs(rec: Path, node: str, change: Callable[[Dict[str, Any]], object]) -> None:
    """Edit the attributes of the node at ``node`` ('' = the root)."""
    edit_json(rec, f"{node}/zarr.json" if node else "zarr.json", lambda doc: change(doc.setdefault("attributes", {})))


def write_json(rec: Path, key: str, text: str) -> None:
    """Write a JSON file verbatim (for what the Zarr layer refuses to write, e.g. 1.0)."""
    path = rec / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def remove(rec: Path, key: str) -> None:
    """Delete a file or a whole node directory of the record."""
    path = rec / key
    if path.is_dir():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        path.rmdir()
    else:
        path.unlink()
