"""Per-step meta series (trajectory §5): one ``meta/<key>`` array per declared key, tagged
``meta_dtype``, values coerced exactly to the pinned tag (fills for omitted keys).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import orjson

from molrec_raw.errors import MolrecError
from molrec_raw.record import typed_json
from molrec_raw.record.model import MetaValue
from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.schema import MetaSpec
from molrec_raw.record.trajectory.storage import grow
from molrec_raw.zarr import Array, Group

META_STORAGE: Dict[str, Tuple[Any, Tuple[int, ...]]] = {
    "bool": (np.bool_, ()), "i32": (np.int32, ()), "i64": (np.int64, ()), "u32": (np.uint32, ()),
    "u64": (np.uint64, ()), "f64": (np.float64, ()), "string": (object, ()), "json": (object, ()),
    "bool3": (np.bool_, (3,)), "i32x3": (np.int32, (3,)), "i64x3": (np.int64, (3,)), "u32x3": (np.uint32, (3,)),
    "u64x3": (np.uint64, (3,)), "f64x3": (np.float64, (3,)), "f64x6": (np.float64, (6,)), "f64x9": (np.float64, (9,)),
}
_ZARR_OF = {np.bool_: "bool", np.int32: "int32", np.int64: "int64", np.uint32: "uint32", np.uint64: "uint64",
            np.float64: "float64", object: "string"}


def meta_cell(tag: str, key: str, value: Any) -> Any:
    """One step's stored value for ``tag`` (exact coercion or ``trajectory#W23``)."""
    where = f"/trajectory/meta/{key}"
    if isinstance(value, MetaValue):
        value = value.value  # re-read through the declared tag's typed-JSON form
    try:
        encoded = typed_json.encode_value(tag, value, where)
        decoded = typed_json.decode_value(tag, encoded, where)
    except MolrecError as exc:
        raise spec_error("W23", f"meta key {key!r} ({tag}): {value!r} is not exactly a {tag} value: {exc.message}", where) from None
    if tag == "json":
        return orjson.dumps(encoded).decode()
    return list(decoded) if isinstance(decoded, tuple) else decoded


def meta_value(tag: str, raw: Any, where: str) -> Any:
    """A stored meta element back as the caller's value (plain or ``MetaValue``)."""
    if tag == "json":
        try:
            value = orjson.loads(raw)
        except (orjson.JSONDecodeError, TypeError):
            raise spec_error("R10", f"meta json value {raw!r} is not a JSON document", where) from None
    elif isinstance(raw, np.ndarray):
        value = tuple(x.item() for x in raw)
    else:
        value = raw.item() if isinstance(raw, np.generic) else raw
    if tag == "f64" or tag.startswith("f64x"):
        value = tuple(float(x) for x in value) if isinstance(value, tuple) else float(value)
    try:
        plain = typed_json.infer_tag(value) == tag
    except MolrecError:
        plain = False
    return value if plain else MetaValue(tag, value)


# per tag: the Python type whose values (in range, finite) are their own stored value
_AS_GIVEN: Dict[str, Tuple[Any, Any]] = {
    "f64": (float, None), "bool": (bool, None),
    **{tag: (int, bounds) for tag, bounds in typed_json.INT_RANGES.items()},
}


class MetaWriter:
    def __init__(self, key: str, spec: MetaSpec) -> None:
        self.key, self.spec = key, spec
        self.array: Optional[Array] = None
        self.pending: List[Any] = []
        self.committed = 0
        self._as_given: Any
        self._bounds: Any
        self._as_given, self._bounds = _AS_GIVEN.get(spec.tag, (None, None))

    def cell(self, value: Any) -> Any:
        """:func:`meta_cell` of ``value`` under this key's tag: a finite ``float`` for
        ``f64``, an ``int`` in range for an integer tag or a ``bool`` for ``bool`` is its own
        stored value (what ``meta_cell`` returns for it, without the typed-JSON round trip of
        every append); anything else goes through ``meta_cell`` (``trajectory#W23``)."""
        kind = self._as_given
        if kind is not None and type(value) is kind:
            if kind is float:
                if value - value == 0.0:  # finite
                    return value
            elif kind is int:
                lo, hi = self._bounds
                if lo <= value <= hi:
                    return value
            else:
                return value
        return meta_cell(self.spec.tag, self.key, value)

    def ensure(self, mgroup: Group) -> None:
        if self.array is None:
            dtype, trailing = META_STORAGE[self.spec.tag]
            self.array = mgroup.create_array(
                self.key, shape=(0,) + trailing, dtype=str if dtype is object else dtype,
                chunks=(ext.DENSE_ROWS,) + trailing, shards=(ext.DENSE_ROWS * ext.DENSE_CHUNKS_PER_SHARD,) + trailing,
                codecs=ext.dense_codecs("string" if dtype is object else "u64"), attributes={"meta_dtype": self.spec.tag},
                shard_index_location="start", overwrite=True)

    def commit(self, touched: List[str]) -> None:
        if self.pending:
            dtype, trailing = META_STORAGE[self.spec.tag]
            values = np.empty((len(self.pending),) + trailing, dtype=dtype)
            for j, v in enumerate(self.pending):
                values[j] = v
            assert self.array is not None, "ensure() creates the array before the first commit"
            grow(self.array, self.committed, values, touched)
            self.committed += len(self.pending)
            self.pending = []


def open_meta_array(arr: Any, key: str, tag: str, nstep: int) -> Optional[Array]:
    where = f"/trajectory/meta/{key}"
    if not isinstance(arr, Array):
        if nstep:
            raise spec_error("R6", f"meta key {key!r} is declared but has no array for its {nstep} steps", where)
        return None
    stored = arr.attrs.get("meta_dtype")
    if stored is None:
        raise spec_error("R10", f"meta array {key!r} has no meta_dtype attribute", where)
    if stored in typed_json.LEGACY_TAGS:
        stored = typed_json.LEGACY_TAGS[stored]
    if stored not in META_STORAGE:
        raise spec_error("R10", f"meta array {key!r}: unknown meta_dtype {stored!r}", where)
    if stored != tag:
        raise spec_error("R10", f"meta array {key!r} is tagged {stored!r} but pinned {tag!r}", where)
    dtype, trailing = META_STORAGE[tag]
    if arr.metadata.dtype.name != _ZARR_OF[dtype] or tuple(arr.shape[1:]) != trailing:
        raise spec_error("R10", f"meta array {key!r}: stored {arr.metadata.dtype.name}{list(arr.shape[1:])} does not "
                         f"hold tag {tag}", where)
    if arr.shape[0] < nstep:
        raise spec_error("R6", f"meta array {key!r} has {arr.shape[0]} values for {nstep} steps", where)
    return arr
