"""The ``observables/`` section (documents §6, checklist documents#9.18–9.22).

Layout::

    observables/
      meta/<name>/   group; its attributes are the metadata document
      <name>         array: the data (any shape, 0-d allowed, one of the 13 column dtypes)

Not frame-shaped. Unknown kinds and extra metadata keys are carried unchanged
(documents#9.21); nothing is converted.

Decisions where the digest is unclear:

- ``null`` on an optional named key (``unit``, ``axes``, ``sampling``, ``domain``,
  ``target``) reads as absent; the writer refuses it (omit the key), as documents.py does.
  ``sampling``/``domain``/``target`` must be strings when present (the digest calls them
  free text / a block path).
- ``axes`` is not compared with the array's rank (the reference's own scalar example names
  the leading, time axis ``timestep``).
- The reader reports, instead of silently dropping, anything the layout has no place for:
  a child group of ``observables/`` other than ``meta``, an array inside ``meta/``, a
  ``meta`` that is an array (rule documents#6.1). The section group's own attributes and
  children of a ``meta/<name>`` group are not read.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from molrec_raw.record.columns import ZARR_TO_COLUMN, column_dtype_of, same_values
from molrec_raw.record.documents import check_finite_json
from molrec_raw.record.layout import column_codecs, fixed_extents
from molrec_raw.record.violations import Checks, Violation, refuse
from molrec_raw.zarr import Array, Group

__all__ = [
    "Observable", "check_observable_name", "check_observable_meta", "check_observable_data",
    "write_observables_group", "read_observables_group",
]

SECTION = "observables"
META = "meta"
_OPTIONAL_TEXT = ("unit", "sampling", "domain", "target")


def _rule(item: str) -> str:
    return f"documents#{item}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(eq=False)
class Observable:
    """One observable: its data array and its metadata document (key order kept)."""

    data: np.ndarray
    meta: Dict[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Observable):
            return NotImplemented
        return self.meta == other.meta and same_values(self.data, other.data)

    __hash__ = None  # type: ignore[assignment]


def check_observable_name(name: Any, node: str) -> Checks:
    """documents#9.19: one node name — non-empty, no ``/``, not only dots, no leading ``__``,
    not ``meta`` (the metadata group) and not ``zarr.json``."""
    rule = _rule("9.19")
    if not isinstance(name, str) or not name:
        yield Violation(rule, node, f"observable name {_show(name)} must be a non-empty string")
    elif "/" in name:
        yield Violation(rule, node, f"observable name {name!r} contains '/'")
    elif set(name) == {"."}:
        yield Violation(rule, node, f"observable name {name!r} is only dots")
    elif name.startswith("__"):
        yield Violation(rule, node, f"observable name {name!r} starts with '__' (reserved)")
    elif name in (META, "zarr.json"):
        yield Violation(rule, node, f"observable name {name!r} is reserved")


def check_observable_meta(meta: Any, data: Any, node: str, *, writing: bool = False) -> Checks:
    """documents#9.20 (kind, description, time_dependent; 0-d with time_dependent) plus the
    optional keys' types; documents#9.4 finite JSON. Extra keys and unknown kinds are fine."""
    rule = _rule("9.20")
    if not isinstance(meta, Mapping):
        yield Violation(rule, node, f"observable metadata must be a JSON object, found {_show(meta)}")
        return
    kind = meta.get("kind")
    if kind is None:
        yield Violation(rule, node, "observable metadata has no 'kind' (a non-empty string)")
    elif not isinstance(kind, str) or not kind:
        yield Violation(rule, node, f"'kind' must be a non-empty string, found {_show(kind)}")
    if not isinstance(meta.get("description"), str):
        yield Violation(rule, node, "observable metadata needs 'description' (a string)" if meta.get("description") is None
                        else f"'description' must be a string, found {_show(meta['description'])}")
    td = meta.get("time_dependent")
    if not isinstance(td, bool):
        yield Violation(rule, node, "observable metadata needs 'time_dependent' (a boolean)" if td is None
                        else f"'time_dependent' must be a boolean, found {_show(td)}")
    elif td and data is not None and np.ndim(data) == 0:
        yield Violation(rule, node, "'time_dependent' is true but the data is 0-d: a time-dependent "
                                    "observable's leading axis is the frame axis")
    for key in _OPTIONAL_TEXT + ("axes",):
        if key not in meta:
            continue
        value = meta[key]
        if value is None:
            if writing:
                yield Violation(rule, node, f"{key!r} is None: omit an unset key instead of writing null")
        elif key == "axes":
            if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
                yield Violation(rule, node, f"'axes' must be a list of strings, found {_show(value)}")
        elif not isinstance(value, str):
            yield Violation(rule, node, f"{key!r} must be a string, found {_show(value)}")
    yield from check_finite_json(meta, node, _rule("9.4"))


def check_observable_data(data: Any, node: str) -> Checks:
    """documents#9.22: one of the 13 column dtypes at its own width (never float16/32)."""
    array = np.asarray(data)
    if column_dtype_of(array) is None:
        yield Violation(_rule("9.22"), node, f"observable data of dtype {array.dtype} is not one of the 13 column "
                                             "dtypes (float16/float32 are never widened; strings must all be str)")


def _storable(data: Any) -> np.ndarray:
    array = np.asarray(data)
    if array.dtype.kind in "UT":
        return array.astype(object)
    if array.dtype.kind != "O" and array.dtype.byteorder not in "=|":
        return array.astype(array.dtype.newbyteorder("="))
    return array


def write_observables_group(root: Group, observables: Mapping[str, Observable]) -> None:
    """Write ``root/observables``: every name, metadata and array is checked first."""
    if not isinstance(observables, Mapping):
        raise TypeError(f"observables are a mapping of name to Observable, not {type(observables).__name__}")
    base = f"{root.name.rstrip('/')}/{SECTION}"
    prepared: Dict[str, Observable] = {}
    for name, observable in observables.items():
        if not isinstance(observable, Observable):
            raise TypeError(f"observable {name!r} must be an Observable, not {type(observable).__name__}")
        refuse(check_observable_name(name, f"{base}/{name}"))
        refuse(check_observable_data(observable.data, f"{base}/{name}"))
        data = _storable(observable.data)
        refuse(check_observable_meta(observable.meta, data, f"{base}/{META}/{name}", writing=True))
        prepared[name] = Observable(data, dict(observable.meta))
    section = root.create_group(SECTION)
    meta_group = section.create_group(META)
    for name, observable in prepared.items():
        data = observable.data
        chunks, shards = fixed_extents(data.shape, data.dtype)
        array = section.create_array(name, shape=data.shape, dtype=str if data.dtype.kind == "O" else data.dtype,
                                     chunks=chunks, shards=shards, codecs=column_codecs(data.dtype, False))
        if data.size:
            array[...] = data
        meta_group.create_group(name, attributes=observable.meta)


def _read_data(array: Array) -> np.ndarray:
    values = array[...]
    if array.metadata.dtype.name == "string":
        return np.array(values, dtype=object)
    return np.asarray(values, dtype=array.dtype)


def read_observables_group(group: Group, out: Optional[List[Violation]] = None) -> Dict[str, Observable]:
    """Read ``observables/``; violations go to ``out`` (the first is raised when None)."""
    collect: List[Violation] = [] if out is None else out
    node = group.name.rstrip("/") or "/"
    arrays: Dict[str, Array] = {}
    metas: Dict[str, Dict[str, Any]] = {}
    for name, member in group.members():
        if isinstance(member, Array):
            arrays[name] = member
        elif name == META:
            for child, meta_node in member.members():
                if isinstance(meta_node, Group):
                    metas[child] = dict(meta_node.attrs)
                else:
                    collect.append(Violation(_rule("6.1"), f"{node}/{META}/{child}",
                                             f"'{META}/{child}' is an array; observable metadata is a group's attributes"))
        else:
            collect.append(Violation(_rule("6.1"), f"{node}/{name}",
                                     f"group {name!r} has no place in the observables layout (only 'meta' and data arrays)"))
    if isinstance(arrays.get(META), Array):
        collect.append(Violation(_rule("9.19"), f"{node}/{META}", "'meta' is reserved for the metadata group, "
                                                                  "not an observable"))
        arrays.pop(META)
    result: Dict[str, Observable] = {}
    for name in sorted(set(arrays) | set(metas)):
        if name not in metas:
            collect.append(Violation(_rule("9.18"), f"{node}/{name}",
                                     f"observable {name!r} has data but no 'observables/meta/{name}' entry"))
            continue
        if name not in arrays:
            collect.append(Violation(_rule("9.18"), f"{node}/{META}/{name}",
                                     f"observable {name!r} has an 'observables/meta/{name}' entry but no data array"))
            continue
        array = arrays[name]
        dtype = array.metadata.dtype.name
        if dtype not in ZARR_TO_COLUMN:
            collect.append(Violation(_rule("9.22"), f"{node}/{name}", f"observable {name!r} is stored as {dtype}, which is "
                                                                      "not a column dtype (never widened)"))
            continue
        data = _read_data(array)
        collect.extend(check_observable_meta(metas[name], data, f"{node}/{META}/{name}"))
        result[name] = Observable(data, metas[name])
    if out is None:
        refuse(collect)
    return result
