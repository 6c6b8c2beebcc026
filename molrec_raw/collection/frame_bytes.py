"""Frame bytes, ``MRF1``: one frame — a system, a trajectory update, the index, a force
field — as one value whose numeric buffers a reader can view in place (lmdb.md "Frame
bytes").  Knows nothing of LMDB: bytes in, bytes out.

::

    value         := magic | header_length | header | padding | payload
    magic         := b"MRF1"                      (lmdb#L9)
    header_length := u32 little-endian
    header        := UTF-8 JSON object, header_length bytes
    padding       := zero bytes up to the next multiple of 8 from the start of the value
    payload       := the column buffers, each at an 8-aligned ``offset`` into the payload

Every numeric column is one C-order little-endian buffer of ``prod(shape) × itemsize``
bytes (``lmdb#L10``); ``bool`` is one byte 0/1, ``c64``/``c128`` interleaved pairs
(``lmdb#L11``); a ``string`` column has no buffer, its values are the header's ``values``
list, row-major (``lmdb#L12``); a nullable column's mask is a ``validity`` buffer of
``shape[0]`` one-byte bools (``lmdb#L13``); ``precision`` rides in a column entry (system and
index frames, ``lmdb#L14``), ``targets`` and ``attributes`` in a block entry (``lmdb#L16``);
``meta``/``meta_types``/``step``/``time``/``box`` at the top (``lmdb#L15``, ``#L16``).

:func:`decode_frame` refuses (never an IndexError or MemoryError) an unknown magic, a
header that lies about its length or is not the documented JSON, a dtype outside the closed
column set, an offset that is not a multiple of 8, a buffer that runs past the value, a
shape that disagrees with the block's ``count``, a bool buffer holding anything but 0/1.
Its numeric columns are ``numpy`` views of the value it was given (read-only when the value
is): valid for as long as that buffer is — for an LMDB value, while its read transaction is
open.  What the decoder does *not* check (dtypes against a declaration, canonical keys, row
references, typed meta) is the caller's, who knows what kind of frame it holds.  The layouts a
reader keeps, and the quick decode of a value whose header is a text it remembers, are
``layout_cache.py``.
"""
from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np
import orjson

from molrec_raw.errors import CorruptDataError, InvalidValueError, SpecViolationError, brief
from molrec_raw.record import typed_json
from molrec_raw.record.columns import COLUMN_NUMPY, column_dtype_of
from molrec_raw.record.model import Block, Box
from molrec_raw.record.precision import check_precision

if TYPE_CHECKING:
    from molrec_raw.collection.layout_cache import LayoutCache

__all__ = ["MAGIC", "ALIGN", "DecodedFrame", "EncodeCache", "Layout", "compile_layout", "encode_frame", "encode_planned",
           "header_rest", "decode_frame",
           "box_header", "read_box", "header_of", "made_block", "frame_layout"]

MAGIC = b"MRF1"
ALIGN = 8
_PREFIX = struct.Struct("<4sI")
_UNPACK = _PREFIX.unpack_from
_ZERO_PAD = bytes(ALIGN)

R_MAGIC = "lmdb#L9"       # magic, header length, header JSON, padding
R_BUFFER = "lmdb#L10"     # 8-aligned offsets, buffers inside the value
R_DTYPE = "lmdb#L11"      # the closed column set; bool 0/1
R_STRING = "lmdb#L12"     # string values in the header
R_VALIDITY = "lmdb#L13"   # validity buffers
R_PRECISION = "lmdb#L14"  # precision on system / index columns
R_HEADER = "lmdb#L17"     # the header's documented shape

_TOP_KEYS = frozenset(("blocks", "meta", "meta_types", "step", "time", "box"))
_BLOCK_KEYS = frozenset(("count", "structural_shape", "columns", "targets", "attributes"))
_NUMERIC_KEYS = frozenset(("dtype", "shape", "offset", "validity", "precision"))
_STRING_KEYS = frozenset(("dtype", "shape", "values", "validity"))
_BOX_KEYS = frozenset(("vectors", "origin", "boundary", "cell_defined"))
_MAX_NDIM = 32
_MAX_DIM = 1 << 40
_MAX_PAYLOAD = 1 << 48  # no value is larger (LMDB's map is far smaller)
_U8 = np.dtype("u1")
_OBJECT = np.dtype(object)
_UNSET = object()
_new_block = Block.__new__


class DecodedFrame:
    """What one value holds.  ``blocks``: columns as views of the value (strings as object
    arrays), ``masks`` exactly as stored (an all-true mask stays), ``precision``, ``targets``,
    ``attrs`` (the entry's ``attributes``), ``structural_shape``, ``count``.  ``meta`` and
    ``meta_types`` are the header's JSON as stored (typed JSON forms, not decoded: the caller
    knows the tags); ``step`` / ``time`` the raw JSON values, ``has_step`` / ``has_time``
    whether they are there (a JSON ``null`` reads as absent); ``box`` the cell; ``layout``
    the checked layout its blocks were built by."""

    __slots__ = ("blocks", "meta", "meta_types", "step", "time", "has_step", "has_time", "box", "layout")

    def __init__(self, blocks: Dict[str, Block], meta: Dict[str, Any], meta_types: Optional[Dict[str, Any]],
                 step: Any, time: Any, box: Optional[Box], layout: Optional["Layout"]) -> None:
        self.blocks, self.meta, self.meta_types, self.step, self.time = blocks, meta, meta_types, step, time
        self.has_step, self.has_time = step is not None, time is not None  # a JSON null reads as absent
        self.box, self.layout = box, layout


def made_block(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray], precision: Dict[str, float],
               targets: Dict[str, str], structural_shape: Optional[Tuple[int, ...]], attrs: Dict[str, Any],
               count: int) -> Block:
    """``Block(...)`` of checked parts, without the dataclass's defaulting (a decoder makes one
    per block of every value it reads; the fields are the same)."""
    block = Block.__new__(Block)
    block.__dict__.update(columns=columns, masks=masks, precision=precision, targets=targets,
                          structural_shape=structural_shape, attrs=attrs, count=count, column_attrs={})
    return block


def _align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


# -- encoding --------------------------------------------------------------------------------
_NAMES = {numpy: name for name, numpy in COLUMN_NUMPY.items()}  # little-endian and native: one table


def _column_dtype(values: np.ndarray) -> Optional[str]:
    """The column dtype of a checked array (a dict lookup for the common, native case)."""
    name = _NAMES.get(values.dtype)
    return name if name is not None else column_dtype_of(values)


def box_header(box: Box) -> Dict[str, Any]:
    """The header form of a cell (``box`` follows frame-and-types §10): ``vectors`` always
    (3×3 nested, lattice vectors as columns), ``origin`` when not zero, ``boundary`` when not
    all periodic or the cell is undefined, ``cell_defined`` only when false; reals in their
    typed JSON ``f64`` form (``"NaN"`` …)."""
    defined = bool(box.defined)
    vectors = np.asarray(box.vectors, dtype=np.float64) if defined else np.eye(3)
    out: Dict[str, Any] = {"vectors": [[typed_json.encode_value("f64", float(x)) for x in row] for row in vectors]}
    origin = np.asarray(box.origin, dtype=np.float64)
    if origin.any() or np.signbit(origin).any():
        out["origin"] = [typed_json.encode_value("f64", float(x)) for x in origin]
    boundary = [bool(b) for b in box.boundary]
    if not defined or not all(boundary):
        out["boundary"] = boundary
    if not defined:
        out["cell_defined"] = False
    return out


class _Plan:
    """How frames of one shape are encoded: the JSON text of the header's ``blocks`` (cut
    where each string column's ``values`` go; ``head``: ``{"blocks":`` and its first piece)
    and, per column, the padding after its buffer (None for a string column).  ``strided``:
    a frame through it had a strided buffer (its callers' columns are views): each buffer is
    copied to C order without trying the join first."""

    __slots__ = ("texts", "head", "pads", "strided")

    def __init__(self, texts: List[bytes], pads: List[Optional[bytes]]) -> None:
        self.texts, self.head, self.pads = texts, b'{"blocks":' + texts[0], pads
        self.strided = False


_NATIVE = frozenset(COLUMN_NUMPY.values()) - {np.dtype(object)}
_KEPT = _NATIVE | {np.dtype(object)}
_EMPTY_VALUES = b'"values":[]'


def _signature(blocks: Mapping[str, Block]) -> Optional[Tuple[Any, ...]]:
    """The shape of ``blocks`` as an encoding plan is kept by — None when a block carries
    what a plan does not hold (masks, precision, targets, attributes, a structural shape) or
    a column is not a C-order array of a native column dtype or of strings (``object``)."""
    key: List[Any] = []
    for name, block in blocks.items():
        if block.masks or block.precision or block.targets or block.attrs or block.structural_shape is not None:
            return None
        key.append((name, block.count))
        for column, values in block.columns.items():
            if type(values) is not np.ndarray or values.dtype not in _KEPT or not values.flags.c_contiguous:
                return None
            key.append((column, values.dtype, values.shape))
    return tuple(key)


class EncodeCache:
    """Encoding plans by the shape of a frame's blocks (:func:`encode_frame` with ``cache=``):
    the header's blocks are serialized once per shape; the bytes are the same.  A plan is made
    by the second frame of its shape (``seen``: shapes met once), so frames of shapes met once
    make none."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.plans: Dict[Any, _Plan] = {}
        self.seen: Set[Any] = set()


def _encode_planned(plan: _Plan, blocks: Mapping[str, Block], rest: bytes) -> Optional[bytes]:
    """The value through ``plan``; None when a block has masks or a column does not fit it
    (:func:`_encode_columns`): the general path then encodes it, or names the rule it breaks."""
    columns: List[np.ndarray] = []
    for block in blocks.values():
        if block.masks:
            return None
        columns += block.columns.values()
    return _encode_columns(plan, columns, rest)


def encode_planned(cache: EncodeCache, shape: Any, columns: List[Any], rest: bytes) -> Optional[bytes]:
    """A frame's value through the plan ``cache`` keeps for ``shape`` (the caller's key, as
    :func:`encode_frame`'s): ``columns`` its columns' arrays in the header's order (no masks;
    a 1-D string column may be the ``orjson.dumps`` text of its values, all ``str``),
    ``rest`` the :func:`header_rest` text of its other members — the bytes
    :func:`encode_frame` gives.  None when no plan is kept yet or a column does not fit it;
    :func:`encode_frame` then encodes it (and names what is wrong)."""
    plan = cache.plans.get(shape)
    return None if plan is None else _encode_columns(plan, columns, rest)


def header_rest(meta: Any = None, meta_types: Any = None, step: Any = None, time: Any = None,
                box: Optional[Box] = None) -> bytes:
    """The JSON text of a header's members after ``blocks`` (those given, in their order)."""
    try:
        return orjson.dumps(_header_rest(meta, meta_types, step, time, box), option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:
        raise InvalidValueError(f"frame header is not JSON: {exc}", rule=R_MAGIC) from None


def _encode_columns(plan: _Plan, columns: List[Any], rest: bytes) -> Optional[bytes]:
    """The value through ``plan`` of ``columns`` (in its order; numeric ones of the plan's
    native dtypes, C-order or strided; a string column as an array, or as the compact JSON
    text of its values a caller made of strings it checked); None when a string column does
    not fit it (a non-string, or a string JSON cannot hold)."""
    parts: List[Any] = [b"", b"", b""]  # the prefix, the header, its padding; then the buffers
    pads, texts = plan.pads, plan.texts
    pieces: List[bytes] = [plan.head]
    i = 0
    for values in columns:
        pad = pads[i]
        if pad is None and type(values) is bytes:  # a string column's JSON text, made by the caller
            pieces.append(values)
            pieces.append(texts[len(pieces) >> 1])
        elif pad is None:  # a string column: its values in the header (lmdb#L12)
            items = values.ravel().tolist()
            try:
                "".join(items)  # a C loop that fails on any element that is not a str (lmdb#L11)
                pieces.append(orjson.dumps(items))
            except TypeError:
                return None
            pieces.append(texts[len(pieces) >> 1])
        else:
            parts.append(values)
            if pad:
                parts.append(pad)
        i += 1
    tail = b"}" if rest == b"{}" else b"," + rest[1:]  # orjson's compact form
    if len(pieces) == 1:
        text = plan.head + tail
    else:
        pieces.append(tail)
        text = b"".join(pieces)
    n = len(text)
    parts[0] = _PREFIX.pack(MAGIC, n)
    parts[1] = text
    parts[2] = _ZERO_PAD[:-(n + _PREFIX.size) % ALIGN]
    if not plan.strided:
        try:
            return b"".join(parts)
        except TypeError:  # a strided buffer (a caller's column view): the same bytes in C order
            plan.strided = True
            return b"".join([p if type(p) is bytes else p.tobytes() for p in parts])
    return b"".join([p if type(p) is bytes else p.tobytes() for p in parts])  # (tobytes: C order, any layout)


def encode_frame(blocks: Mapping[str, Block], *, meta: Optional[Mapping[str, Any]] = None,
                 meta_types: Optional[Mapping[str, str]] = None, step: Any = None, time: Any = None,
                 box: Optional[Box] = None, cache: Optional[EncodeCache] = None, shape: Any = None) -> bytes:
    """One frame as frame bytes.  ``blocks`` hold checked columns (one of the 13 dtypes,
    ``count`` rows each; the caller validated them); their ``precision``, ``targets``,
    ``structural_shape`` and ``attrs`` are written as given, masks as ``validity`` buffers
    (also an all-true one: a nullable index column keeps its mask).  ``meta`` is already in
    typed JSON form; ``meta_types`` is written when given; ``step``/``time`` (typed JSON
    ``i64``/``f64`` values) and ``box`` when given.  Deterministic: the same input gives the
    same bytes.  ``cache``: plans kept by the blocks' shape (the same bytes, less work per
    frame); ``shape``: the caller's key of that shape, in place of the one computed here — a
    hashable that determines every byte of the header's ``blocks`` but the string values
    (block names, counts, structural shapes, precision, targets, attributes; column names,
    dtypes and shapes; no masks)."""
    signature: Any = None
    if cache is not None:
        signature = _signature(blocks) if shape is None else shape
        plan = None if signature is None else cache.plans.get(signature)
        if plan is not None:
            value = _encode_planned(plan, blocks, header_rest(meta, meta_types, step, time, box))
            if value is not None:
                return value
    parts: List[Any] = []
    size = 0
    plannable = signature is not None  # every buffer the caller's array as it is, no validity

    def place(buffer: np.ndarray) -> int:
        """Append a buffer at the next 8-aligned payload offset; that offset."""
        nonlocal size
        at = size
        parts.append(buffer)
        size += buffer.nbytes
        pad = -size % ALIGN
        if pad:
            parts.append(_ZERO_PAD[:pad])
            size += pad
        return at

    header_blocks: Dict[str, Any] = {}
    strings: List[bool] = []
    for name, block in blocks.items():
        columns: Dict[str, Any] = {}
        for column, raw in block.columns.items():
            values = raw if type(raw) is np.ndarray else np.asarray(raw)
            dtype = _column_dtype(values)
            if dtype is None:
                raise InvalidValueError(f"column {column!r} of block {name!r} has dtype {values.dtype}, "
                                        "not one of the 13 column dtypes", rule=R_DTYPE)
            entry: Dict[str, Any] = {"dtype": dtype, "shape": list(values.shape)}
            if dtype == "string":
                entry["values"] = values.ravel().tolist()
                strings.append(True)
            else:
                buffer = values
                native = values.dtype is COLUMN_NUMPY[dtype] or values.dtype == COLUMN_NUMPY[dtype]
                if not native or not values.flags.c_contiguous:  # C-order, little-endian: a copy only when needed
                    buffer = np.ascontiguousarray(values, dtype=COLUMN_NUMPY[dtype])
                    plannable = plannable and native  # a plan takes native buffers (C order is its to make)
                entry["offset"] = place(buffer)
                strings.append(False)
            mask = block.masks.get(column)
            if mask is not None:
                entry["validity"] = place(np.ascontiguousarray(mask, dtype=np.bool_))
                plannable = False
            p = block.precision.get(column)
            if p is not None:
                entry["precision"] = float(p)
            columns[column] = entry
        header_block: Dict[str, Any] = {"count": int(block.nrows), "structural_shape": (
            None if block.structural_shape is None else [int(s) for s in block.structural_shape]), "columns": columns}
        if block.targets:
            header_block["targets"] = dict(block.targets)
        if block.attrs:
            header_block["attributes"] = dict(block.attrs)
        header_blocks[name] = header_block
    header: Dict[str, Any] = {"blocks": header_blocks, **_header_rest(meta, meta_types, step, time, box)}
    try:
        text = orjson.dumps(header, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:
        raise InvalidValueError(f"frame header is not JSON: {exc}", rule=R_MAGIC) from None
    if plannable and cache is not None:
        if signature in cache.seen:
            _keep_plan(cache, signature, header_blocks, strings, parts, text)
        else:
            if len(cache.seen) >= cache.size:
                cache.seen.clear()
            cache.seen.add(signature)
    start = _align(_PREFIX.size + len(text))
    prefix = _PREFIX.pack(MAGIC, len(text)) + text + _ZERO_PAD[:start - _PREFIX.size - len(text)]
    return b"".join([prefix, *parts])


def _header_rest(meta: Any, meta_types: Any, step: Any, time: Any, box: Optional[Box]) -> Dict[str, Any]:
    """The header's members after ``blocks``, in their order, those given."""
    rest: Dict[str, Any] = {}
    if meta is not None:
        rest["meta"] = meta
    if meta_types is not None:
        rest["meta_types"] = meta_types
    if step is not None:
        rest["step"] = step
    if time is not None:
        rest["time"] = time
    if box is not None:
        rest["box"] = box_header(box)
    return rest


def _keep_plan(cache: EncodeCache, signature: Any, header_blocks: Dict[str, Any], strings: List[bool],
               parts: List[Any], header: bytes) -> None:
    """Keep the plan of a frame just encoded (``header``: its header's text): its blocks' text
    cut at each string column's ``values`` — JSON without spacing is the concatenation of its
    members' texts, so any values spliced there give the text orjson writes (kept only when
    the cuts are exactly those, and the text before the first is the header's)."""
    pads: List[bytes] = []
    for part in parts:
        if type(part) is bytes:
            pads[-1] = part
        else:
            pads.append(b"")
    entries = [entry for block in header_blocks.values() for entry in block["columns"].values()
               if entry["dtype"] == "string"]
    held = [entry["values"] for entry in entries]
    try:
        for entry in entries:
            entry["values"] = []
        cut = orjson.dumps(header_blocks).split(_EMPTY_VALUES) if entries else [orjson.dumps(header_blocks)]
    finally:
        for entry, values in zip(entries, held):
            entry["values"] = values
    if len(cut) != len(entries) + 1:  # "values":[] elsewhere (an attribute): no plan
        return
    texts = [piece + b'"values":' for piece in cut[:-1]] + [cut[-1]]
    if not header.startswith(b'{"blocks":' + texts[0]):
        return
    if len(cache.plans) >= cache.size:
        cache.plans.clear()
    pads_by_column = iter(pads)
    cache.plans[signature] = _Plan(texts, [None if s else next(pads_by_column) for s in strings])


# -- decoding --------------------------------------------------------------------------------
def _corrupt(message: str, where: str, rule: str, offset: Optional[int] = None) -> CorruptDataError:
    return CorruptDataError(message, node=where, rule=rule, offset=offset)


def _spec(message: str, where: str, rule: str) -> SpecViolationError:
    return SpecViolationError(message, node=where, rule=rule)


def _object(value: Any, allowed: frozenset[str], where: str, what: str) -> Dict[str, Any]:
    if type(value) is not dict:
        raise _corrupt(f"{what} is not a JSON object: {brief(value)}", where, R_HEADER)
    if not value.keys() <= allowed:
        unknown = sorted(k for k in value if k not in allowed)
        raise _corrupt(f"{what} has unknown key(s) {unknown} (allowed: {', '.join(sorted(allowed))})", where, R_HEADER)
    return value


def _shape(raw: Any, count: int, where: str) -> Tuple[int, ...]:
    if type(raw) is not list or not 1 <= len(raw) <= _MAX_NDIM or not all(
            type(n) is int and 0 <= n <= _MAX_DIM for n in raw):
        raise _corrupt(f"shape {brief(raw)} is not a list of 1 to {_MAX_NDIM} integers in [0, 2^40]", where, R_HEADER)
    if raw[0] != count:
        raise _corrupt(f"shape {raw} has {raw[0]} rows but the block's count is {count}", where, R_HEADER)
    return tuple(raw)


def _bools(value: Any, start: int, count: int, where: str, rule: str) -> np.ndarray:
    flags = np.frombuffer(value, _U8, count, start)
    if count and int(flags.max()) > 1:
        bad = int(np.flatnonzero(flags > 1)[0])
        raise _corrupt(f"a bool buffer holds byte {int(flags[bad])} (only 0 and 1)", where, rule, start + bad)
    return flags.view(np.bool_)


class _Column:
    """One column's part of a layout: a numeric buffer (``start`` payload-relative), a run of
    1-D buffers of one dtype that touch (one view, a row each), or string values."""

    __slots__ = ("kind", "names", "dtype", "start", "count", "shape", "mask", "at")

    def __init__(self, kind: str, dtype: Any, start: int, count: int, shape: Tuple[int, ...], mask: Optional[int],
                 at: str) -> None:
        self.kind, self.dtype, self.start, self.count = kind, dtype, start, count
        self.names: List[str] = []
        self.shape, self.mask, self.at = shape, mask, at


class _BlockLayout:
    __slots__ = ("name", "count", "shape", "targets", "attrs", "columns", "precision")

    def __init__(self, name: str, count: int, shape: Optional[Tuple[int, ...]], targets: Dict[str, str],
                 attrs: Dict[str, Any], columns: List[_Column], precision: Dict[str, float]) -> None:
        self.name, self.count, self.shape, self.targets, self.attrs = name, count, shape, targets, attrs
        self.columns, self.precision = columns, precision


class FlatColumn:
    """One column of a layout for a batch: its block, name, whether its values are strings
    (in the header), its dtype, payload offset, element count, trailing shape, and the block's
    rows."""

    __slots__ = ("block", "name", "strings", "dtype", "start", "count", "trailing", "rows")

    def __init__(self, block: str, name: str, strings: bool, dtype: Any, start: int, count: int,
                 trailing: Tuple[int, ...], rows: int) -> None:
        self.block, self.name, self.strings, self.dtype, self.start = block, name, strings, dtype, start
        self.count, self.trailing, self.rows = count, trailing, rows


class Layout:
    """The checked ``blocks`` of a header: where each column lives, relative to the payload.
    Everything about it that does not depend on the value's bytes is checked once, when it is
    compiled (:func:`compile_layout`); :meth:`build` checks the rest — that the buffers fit in
    the value, that bool buffers hold 0/1 — and makes the views.  A reader keeps layouts by
    the exact JSON text of ``blocks`` (:class:`LayoutCache`): frames that share one are
    decoded without checking the header's blocks again.  ``checked`` holds a reader's own
    verdicts on the layout (what it checked it against)."""

    __slots__ = ("blocks", "need", "checked", "_flat", "texts", "plain", "_maker", "makers", "strings_count")

    def __init__(self, blocks: List[_BlockLayout], need: int) -> None:
        self.blocks, self.need = blocks, need
        self.checked: Dict[Any, bool] = {}
        self.texts = any(col.kind == "strings" for b in blocks for col in b.columns)  # a prefix is never shared
        self._flat: Any = _UNSET
        # built by views(): no bool column, no mask, no targets (nothing whose values need checking
        # row by row), at most one string column (LayoutCache.quick hands its values)
        self.plain = sum(col.kind == "strings" for b in blocks for col in b.columns) <= 1 and not any(
            b.targets or col.mask is not None or col.dtype is not None and col.dtype.kind == "b"
            for b in blocks for col in b.columns) and not any(b.targets for b in blocks)
        self._maker: Any = None
        strings = [col.count for b in blocks for col in b.columns if col.kind == "strings"]
        self.strings_count: Optional[int] = strings[0] if len(strings) == 1 else None  # (its element count)
        self.makers: Dict[Any, _Maker] = {}  # a reader's: maker() by what it checked the layout as

    def flat(self) -> Optional[List["FlatColumn"]]:
        """Where each column of the layout lives, one entry per column — or None when a column
        is a bool, carries a validity mask or a block has ``targets`` (their values need
        checking row by row: a batch reads such frames one by one)."""
        if self._flat is _UNSET:
            out: Optional[List[FlatColumn]] = []
            for b in self.blocks:
                for col in b.columns:
                    if out is None or b.targets or col.mask is not None or (
                            col.dtype is not None and col.dtype.kind == "b"):
                        out = None
                        break
                    for i, name in enumerate(col.names):
                        size = 0 if col.dtype is None else col.count * col.dtype.itemsize
                        out.append(FlatColumn(b.name, name, col.kind == "strings", col.dtype, col.start + i * size,
                                              col.count, col.shape[1:], b.count))
                if b.targets:
                    out = None
            self._flat = out
        flat: Optional[List[FlatColumn]] = self._flat
        return flat

    def maker(self, extras: Optional[Mapping[str, Tuple[Dict[str, float], Dict[str, str], Any]]] = None) -> "_Maker":
        """The function making the blocks of a ``plain`` layout whose value
        :meth:`LayoutCache.quick` matched — ``(value, payload, strings) -> blocks``, what
        :meth:`build` makes of it without looking at anything :meth:`build` checks (``quick``
        did: the buffers fit, ``strings`` are the string column's checked values).
        ``extras``: a block's (precision, targets, structural shape) in place of the layout's
        (a reader's declaration; the same mapping at every call: the function is compiled
        once for it); a block without one keeps the layout's."""
        maker = self._maker
        if maker is None or maker[0] is not extras:
            maker = self._maker = (extras, _blocks_maker(self.blocks, extras))
        made: _Maker = maker[1]
        return made

    def build(self, value: Any, payload: int, where: str, raw_blocks: Dict[str, Any]) -> Dict[str, Block]:
        """The blocks of ``value`` (views of it) under this layout; string values come from
        the header's ``raw_blocks`` (they are not part of a layout)."""
        if payload + self.need > len(value):
            self._past_end(payload, len(value), where)
        blocks: Dict[str, Block] = {}
        for b in self.blocks:
            columns: Dict[str, np.ndarray] = {}
            masks: Dict[str, np.ndarray] = {}
            for col in b.columns:
                kind = col.kind
                if kind == "run":
                    names = col.names
                    if len(names) == 1:
                        columns[names[0]] = np.frombuffer(value, col.dtype, col.count, payload + col.start)
                    else:
                        rows = np.frombuffer(value, col.dtype, col.count * len(names), payload + col.start).reshape(
                            len(names), col.count)
                        for i, name in enumerate(names):
                            columns[name] = rows[i]
                    continue
                name = col.names[0]
                if kind == "strings":
                    columns[name] = _strings(raw_blocks[b.name]["columns"][name].get("values"), col.count, col.shape,
                                             col.at)
                elif col.dtype.kind == "b":
                    columns[name] = _bools(value, payload + col.start, col.count, col.at, R_DTYPE).reshape(col.shape)
                else:
                    columns[name] = np.frombuffer(value, col.dtype, col.count, payload + col.start).reshape(col.shape)
                if col.mask is not None:
                    masks[name] = _bools(value, payload + col.mask, b.count, col.at, R_VALIDITY)
            blocks[b.name] = made_block(columns, masks, dict(b.precision) if b.precision else {},
                                        dict(b.targets) if b.targets else {}, b.shape,
                                        dict(b.attrs) if b.attrs else {}, b.count)
        return blocks

    def _past_end(self, payload: int, end: int, where: str) -> None:
        for b in self.blocks:
            for col in b.columns:
                size = 0 if col.kind == "strings" else col.count * col.dtype.itemsize * (
                    len(col.names) if col.kind == "run" else 1)
                if payload + col.start + size > end:
                    raise _corrupt(f"buffer of {size} bytes at payload offset {col.start} runs past the value "
                                   f"({end - payload} payload bytes)", col.at, R_BUFFER, payload + col.start)
                if col.mask is not None and payload + col.mask + b.count > end:
                    raise _corrupt(f"validity of {b.count} bytes at payload offset {col.mask} runs past the value "
                                   f"({end - payload} payload bytes)", col.at, R_BUFFER, payload + col.mask)
        raise _corrupt("a buffer runs past the value", where, R_BUFFER)  # pragma: no cover - need is their maximum


_Maker = Callable[[Any, int, Optional[List[str]]], Dict[str, Block]]


def _blocks_maker(blocks: List[_BlockLayout], extras: Any) -> _Maker:
    """The function :meth:`Layout.maker` compiles."""
    if len(blocks) == 1:
        b = blocks[0]
        one: _Maker = _block_maker(b, None if extras is None else extras.get(b.name), b.name)
        return one
    makers = [(b.name, _block_maker(b, None if extras is None else extras.get(b.name), None)) for b in blocks]

    def many(value: Any, payload: int, strings: Optional[List[str]]) -> Dict[str, Block]:
        return {name: make(value, payload, strings) for name, make in makers}
    return many


def _block_maker(b: _BlockLayout, extra: Any, wrap: Optional[str]) -> Any:
    """One block of a plain layout (in a dict ``{wrap: block}`` when ``wrap`` is given):
    each column a view (a run of touching 1-D buffers one view of rows), the string column
    an object array of the checked values."""
    ops: List[Tuple[Any, ...]] = []
    for col in b.columns:
        if col.kind == "strings":
            ops.append((2, col.names[0], col.count, None if len(col.shape) == 1 else col.shape))
        elif col.kind == "run" and len(col.names) > 1 and col.count:
            ops.append((0, tuple(col.names), np.dtype((col.dtype, (col.count,))), col.start))
        elif col.kind == "run" and len(col.names) > 1:
            ops.extend((1, name, col.dtype, 0, col.start) for name in col.names)  # zero rows: empty views
        else:
            ops.append((1, col.names[0], col.dtype, col.count, col.start) if col.kind == "run" else
                       (3, col.names[0], col.dtype, col.count, col.start, col.shape))
    count = b.count
    if extra is None:
        precision, targets, shape, attrs = b.precision, None, b.shape, b.attrs
    else:
        (precision, targets, shape), attrs = extra, None
    frombuffer, fromiter, new = np.frombuffer, np.fromiter, _new_block

    def make(value: Any, payload: int, strings: Optional[List[str]]) -> Any:
        columns: Dict[str, np.ndarray] = {}
        for op in ops:
            kind = op[0]
            if kind == 0:
                rows = frombuffer(value, op[2], len(op[1]), payload + op[3])
                i = 0
                for name in op[1]:
                    columns[name] = rows[i]
                    i += 1
            elif kind == 1:
                columns[op[1]] = frombuffer(value, op[2], op[3], payload + op[4])
            elif kind == 2:
                text = fromiter(strings, _OBJECT, op[2]) if op[2] else np.empty(0, _OBJECT)  # type: ignore[arg-type]
                columns[op[1]] = text if op[3] is None else text.reshape(op[3])
            else:
                columns[op[1]] = frombuffer(value, op[2], op[3], payload + op[4]).reshape(op[5])
        block = new(Block)
        block.__dict__ = {"columns": columns, "masks": {}, "precision": dict(precision) if precision else {},
                          "targets": dict(targets) if targets else {}, "structural_shape": shape,
                          "attrs": dict(attrs) if attrs else {}, "count": count, "column_attrs": {}}
        return block if wrap is None else {wrap: block}
    return make


def _offset(raw: Any, nbytes: int, where: str, what: str) -> int:
    """A buffer's payload offset: a non-negative multiple of 8 (whether it fits is checked
    against the value when the layout is built)."""
    if type(raw) is not int or raw < 0:
        raise _corrupt(f"{what} offset {brief(raw)} is not a non-negative integer", where, R_BUFFER)
    if raw % ALIGN:
        raise _corrupt(f"{what} offset {raw} is not a multiple of {ALIGN}", where, R_BUFFER)
    if raw + nbytes > _MAX_PAYLOAD:
        raise _corrupt(f"{what} of {nbytes} bytes at payload offset {raw} runs past any value", where, R_BUFFER)
    return raw


def _strings(values: Any, count: int, shape: Tuple[int, ...], where: str) -> np.ndarray:
    """A string column's header ``values`` (lmdb#L12): a list of ``count`` strings, row-major."""
    if type(values) is not list:
        raise _corrupt(f"string column 'values' is not a list: {brief(values)}", where, R_STRING)
    if len(values) != count:
        raise _corrupt(f"string column of shape {list(shape)} holds {len(values)} values", where, R_STRING)
    try:
        "".join(values)  # a C loop that fails on any element that is not a str
    except TypeError:
        raise _corrupt("string column 'values' holds a non-string", where, R_STRING) from None
    text = np.array(values, dtype=object) if count else np.empty(0, dtype=object)  # a list of str: one axis
    return text if len(shape) == 1 else text.reshape(shape)


def _column(raw: Any, count: int, where: str) -> Tuple[_Column, Optional[float]]:
    """One column entry, checked (everything but its bytes)."""
    if type(raw) is not dict:
        raise _corrupt(f"column entry is not a JSON object: {brief(raw)}", where, R_HEADER)
    dtype = raw.get("dtype")
    mask = None
    if "validity" in raw:
        mask = _offset(raw["validity"], count, where, "validity")
    if dtype == "string":
        _object(raw, _STRING_KEYS, where, "string column entry")
        shape = _shape(raw.get("shape"), count, where)
        strings = raw.get("values")
        _strings(strings, math.prod(shape), shape, where)
        column = _Column("strings", None, 0, math.prod(shape), shape, mask, where)
    else:
        numpy = COLUMN_NUMPY.get(dtype) if type(dtype) is str else None
        if numpy is None:
            raise _spec(f"column dtype {brief(dtype)} is not one of the 13 column dtypes (never widened)", where, R_DTYPE)
        if not raw.keys() <= _NUMERIC_KEYS:
            _object(raw, _NUMERIC_KEYS, where, "column entry")
        shape = _shape(raw.get("shape"), count, where)
        n = math.prod(shape)
        start = _offset(raw.get("offset"), n * numpy.itemsize, where, "buffer")
        column = _Column("array", numpy, start, n, shape, mask, where)
    precision = raw.get("precision")
    if precision is not None or "precision" in raw:
        problems = list(check_precision(precision, "f64" if dtype == "f64" else str(dtype), where))
        if problems:
            raise _spec(problems[0].message, where, R_PRECISION)
    return column, precision


def read_box(raw: Any, where: str) -> Box:
    """The cell of a header's ``box`` entry (the form :func:`box_header` writes)."""
    entry = _object(raw, _BOX_KEYS, where, "box")

    def reals(value: Any, n: int, what: str) -> List[float]:
        if type(value) is not list or len(value) != n:
            raise _corrupt(f"box {what} {brief(value)} is not a list of {n}", where, R_HEADER)
        try:
            return [typed_json.decode_value("f64", x, where) for x in value]
        except SpecViolationError as exc:
            raise _corrupt(f"box {what}: {exc.message}", where, R_HEADER) from None

    if "vectors" not in entry:
        raise _corrupt("box has no 'vectors'", where, R_HEADER)
    rows = entry["vectors"]
    if type(rows) is not list or len(rows) != 3:
        raise _corrupt(f"box vectors {brief(rows)} is not 3x3", where, R_HEADER)
    vectors = np.array([reals(row, 3, "vectors row") for row in rows], dtype=np.float64)
    origin = np.array(reals(entry.get("origin", [0.0, 0.0, 0.0]), 3, "origin"), dtype=np.float64)
    defined = entry.get("cell_defined", True)
    if type(defined) is not bool:
        raise _corrupt(f"box cell_defined {brief(defined)} is not a JSON boolean", where, R_HEADER)
    boundary = entry.get("boundary", [defined] * 3)
    if type(boundary) is not list or len(boundary) != 3 or not all(type(b) is bool for b in boundary):
        raise _corrupt(f"box boundary {brief(boundary)} is not three booleans", where, R_HEADER)
    if not defined and any(boundary):
        raise _spec("an undefined cell cannot be periodic in any direction", where, "frame-and-types#14.18")
    return Box(vectors if defined else np.eye(3), origin, (boundary[0], boundary[1], boundary[2]), defined)


def header_of(value: Any, where: str) -> Tuple[Dict[str, Any], int]:
    """The parsed header of a frame-bytes value and the absolute offset of its payload."""
    text, payload = header_text(value, where)
    return _parsed(text, where), payload


def _parsed(text: bytes, where: str) -> Dict[str, Any]:
    try:
        header = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _corrupt(f"the header is not UTF-8 JSON: {exc}", where, R_MAGIC, _PREFIX.size) from None
    if type(header) is not dict:
        raise _corrupt(f"the header is not a JSON object: {brief(header)}", where, R_HEADER, _PREFIX.size)
    return header


def header_text(value: Any, where: str) -> Tuple[bytes, int]:
    """The header's bytes of a frame-bytes value (magic, length and padding checked) and the
    absolute offset of its payload."""
    end = len(value)
    if end < _PREFIX.size:
        raise _corrupt(f"a frame-bytes value of {end} bytes is shorter than its 8-byte prefix", where, R_MAGIC, 0)
    magic, length = _PREFIX.unpack_from(value, 0)
    if magic != MAGIC:
        raise _corrupt(f"unknown magic {bytes(magic)!r} (frame bytes start with {MAGIC!r})", where, R_MAGIC, 0)
    if _PREFIX.size + length > end:
        raise _corrupt(f"header_length {length} runs past the value ({end} bytes)", where, R_MAGIC, 4)
    payload = (length + _PREFIX.size + ALIGN - 1) & ~(ALIGN - 1)
    if payload > end:
        raise _corrupt(f"the header's padding runs past the value ({end} bytes)", where, R_MAGIC, _PREFIX.size + length)
    text = bytes(value[_PREFIX.size:payload])  # (orjson parses bytes faster than a memoryview)
    pad = payload - _PREFIX.size - length
    if pad and text[length:] != _ZERO_PAD[:pad]:
        try:  # an unparsable header is named before its padding
            orjson.loads(text[:length])
        except orjson.JSONDecodeError as exc:
            raise _corrupt(f"the header is not UTF-8 JSON: {exc}", where, R_MAGIC, _PREFIX.size) from None
        raise _corrupt("the header's padding is not zero bytes", where, R_MAGIC, _PREFIX.size + length)
    return text[:length] if pad else text, payload


def compile_layout(raw_blocks: Any, where: str) -> Layout:
    """Check a header's ``blocks`` (everything that does not depend on the value's bytes) and
    compile where each column lives."""
    if type(raw_blocks) is not dict:
        raise _corrupt(f"the header's 'blocks' is not a JSON object: {brief(raw_blocks)}", where, R_HEADER)
    blocks: List[_BlockLayout] = []
    need = 0
    for name, raw in raw_blocks.items():
        at = f"{where}/{name}"
        if type(raw) is not dict or not raw.keys() <= _BLOCK_KEYS:
            _object(raw, _BLOCK_KEYS, at, "block entry")
        count = raw.get("count")
        if type(count) is not int or count < 0:
            raise _corrupt(f"block count {brief(count)} is not a non-negative JSON integer", at, R_HEADER)
        raw_columns = raw.get("columns", {})
        if type(raw_columns) is not dict:
            raise _corrupt(f"block 'columns' is not a JSON object: {brief(raw_columns)}", at, R_HEADER)
        columns: List[_Column] = []
        precision: Dict[str, float] = {}
        for column_name, entry in raw_columns.items():
            column, p = _column(entry, count, f"{at}/{column_name}")
            column.names.append(column_name)
            if p is not None:
                precision[column_name] = p
            if column.mask is not None:
                need = max(need, column.mask + count)
            if column.kind == "array":
                nbytes = column.count * column.dtype.itemsize
                need = max(need, column.start + nbytes)
                if len(column.shape) == 1 and column.mask is None and column.dtype.kind != "b":
                    column.kind = "run"
                    previous = columns[-1] if columns else None
                    # consecutive 1-D buffers of one dtype that touch: rows of one view
                    if (previous is not None and previous.kind == "run" and previous.dtype == column.dtype
                            and previous.count == column.count and nbytes % ALIGN == 0
                            and column.start == previous.start + len(previous.names) * nbytes):
                        previous.names.append(column_name)
                        continue
            columns.append(column)
        shape = raw.get("structural_shape")
        if shape is not None and (type(shape) is not list or not all(type(s) is int and s >= 0 for s in shape)):
            raise _corrupt(f"structural_shape {brief(shape)} is not a list of non-negative integers", at, R_HEADER)
        targets = raw.get("targets", {})
        if type(targets) is not dict or not all(type(t) is str for t in targets.values()):
            raise _corrupt(f"block 'targets' {brief(targets)} is not an object of strings", at, R_HEADER)
        attrs = raw.get("attributes", {})
        if type(attrs) is not dict:
            raise _corrupt(f"block 'attributes' {brief(attrs)} is not a JSON object", at, R_HEADER)
        blocks.append(_BlockLayout(name, count, None if shape is None else tuple(shape), dict(targets), attrs,
                                   columns, precision))
    return Layout(blocks, need)


def frame_layout(value: Any, where: str, cache: Optional[LayoutCache] = None,
                 strings: Optional[bool] = None) -> Tuple[Dict[str, Any], int, "Layout"]:
    """The parsed header, the payload's offset and the checked layout of a frame-bytes value:
    every rule :func:`decode_frame` checks except the bytes of bool and validity buffers (the
    buffers are checked to fit in the value; string values are the layout's to check when it
    builds, or the caller's).  ``strings``: whether the header may hold string columns (None:
    look; False only costs a missed share of the cache, never a wrong layout)."""
    text, payload = header_text(value, where)
    hit = cache.by_prefix(text) if cache is not None and cache.prefixes else None
    if hit is not None:
        header, layout = hit
        if not header.keys() <= _TOP_KEYS:
            _object(header, _TOP_KEYS, where, "the header")
    else:
        header = _parsed(text, where)
        if not header.keys() <= _TOP_KEYS:
            _object(header, _TOP_KEYS, where, "the header")
        raw_blocks: Any = header.get("blocks")
        if cache is None:
            layout = compile_layout(raw_blocks, where)
        else:
            layout = cache.get(raw_blocks, where, b"string" in text if strings is None else strings)
            cache.remember(text, raw_blocks, layout)
    if payload + layout.need > len(value):
        layout._past_end(payload, len(value), where)
    if "meta" in header and type(header["meta"]) is not dict:
        raise _corrupt(f"the header's 'meta' is not a JSON object: {brief(header['meta'])}", where, R_HEADER)
    meta_types = header.get("meta_types")
    if meta_types is not None and type(meta_types) is not dict:
        raise _corrupt(f"'meta_types' is not a JSON object: {brief(meta_types)}", where, R_HEADER)
    return header, payload, layout


def decode_frame(value: Any, where: str = "", cache: Optional[LayoutCache] = None,
                 strings: Optional[bool] = None) -> DecodedFrame:
    """Decode frame bytes (``bytes``, ``bytearray`` or ``memoryview``), checking every rule
    the module docstring lists; numeric columns are views of ``value``.  ``cache``: layouts
    already checked (a reader's), reused when a header's ``blocks`` are exactly one of theirs;
    ``strings`` as :func:`frame_layout`."""
    header, payload, layout = frame_layout(value, where, cache, strings)
    blocks = layout.build(value, payload, where, header["blocks"])  # a dict: compile_layout checked it
    box = read_box(header["box"], f"{where}/box") if header.get("box") is not None else None
    return DecodedFrame(blocks, header.get("meta") or {}, header.get("meta_types"), header.get("step"),
                        header.get("time"), box, layout)
