"""``SequenceSchema``: the pinned declaration of a trajectory (trajectory §4).

The pin is the ``sequence_schema`` attribute of ``trajectory/``: blocks (columns with dtype,
trailing shape, ``nullable``, ``precision``; ``structural_shape``, ``targets``,
``aligned_with``) and per-step meta keys (tag, optional fill in typed JSON form).  It never
changes after creation (``trajectory#I13``).  Two ways to mint one: declare it
(``declare_*``, each returns ``self``) or derive it from frames (``from_frames``).

Every declaration refusal is a ``SpecViolationError`` citing the §18 checklist id
(``trajectory#W1`` … ``#W11``); names that are not valid Zarr node names cite
``trajectory#4``.  ``from_json`` is the strict reader of a stored pin: ``trajectory#R11``
(malformed pin or fill), ``#R16`` (invalid pinned alignment), ``#R13`` (canonical key pinned
at another dtype).  The representative row count per block sizes chunks only; it is not
pinned and equality ignores it.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import orjson

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError, brief
from molrec_raw.record import typed_json
from molrec_raw.record.columns import COLUMN_DTYPES, VOCABULARY, as_column, column_dtype_of
from molrec_raw.record.frame_io import is_target_syntax
from molrec_raw.zarr import is_valid_node_name
from molrec_raw.record.model import Frame, MetaValue
from molrec_raw.record.precision import check_precision

__all__ = [
    "ColumnSpec", "BlockSpec", "MetaSpec", "SequenceSchema",
    "RESERVED_BLOCK_NAMES", "RESERVED_COLUMN_NAMES", "SKIPPED_FRAME_META_KEYS",
]

RESERVED_BLOCK_NAMES = ("step", "time", "meta", "box")
RESERVED_COLUMN_NAMES = ("offset", "step_index", "_validity")
SKIPPED_FRAME_META_KEYS = ("step", "time")  # the sequence's own arrays, never meta (§4)

R_NAME = "trajectory#4"
R_PIN = "trajectory#R11"
R_PIN_CANONICAL = "trajectory#R13"
R_PIN_ALIGNED = "trajectory#R16"
W1, W2, W3, W4, W5, W6, W7, W8, W9, W10, W11 = (f"trajectory#W{n}" for n in range(1, 12))

_COLUMN_KEYS = ("dtype", "trailing", "nullable", "precision")
_BLOCK_KEYS = ("columns", "structural_shape", "targets", "aligned_with")
_META_KEYS = ("dtype", "fill")
_TOP_KEYS = ("blocks", "meta")


@dataclass(frozen=True)
class ColumnSpec:
    """One declared column: dtype (one of the 13), trailing shape, nullable, precision."""

    dtype: str
    trailing: Tuple[int, ...] = ()
    nullable: bool = False
    precision: Optional[float] = None


@dataclass
class BlockSpec:
    """One declared block (a copy when handed out by ``SequenceSchema.block_spec``)."""

    columns: Dict[str, ColumnSpec] = field(default_factory=dict)
    structural_shape: Optional[Tuple[int, ...]] = None
    targets: Dict[str, str] = field(default_factory=dict)
    aligned_with: Optional[str] = None


@dataclass(frozen=True, eq=False)
class MetaSpec:
    """One declared per-step meta key: ``tag``, whether it has a fill, the fill as a Python
    value (``fill``; vector tags as tuples, ``None`` = JSON null for ``json``) and in typed
    JSON form (``fill_json``, what the pin stores).  Unpacks as ``(tag, has_fill, fill)``."""

    tag: str
    has_fill: bool = False
    fill: Any = None
    fill_json: Any = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.tag, self.has_fill, self.fill))

    def _key(self) -> Tuple[str, bool, bytes]:
        # typed JSON compared as JSON: 1 vs 1.0 vs true differ, -0.0 vs 0.0 differ
        return self.tag, self.has_fill, orjson.dumps(self.fill_json, option=orjson.OPT_SORT_KEYS)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, MetaSpec) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _fail(rule: str, node: str, message: str) -> SpecViolationError:
    return SpecViolationError(message, node=node, rule=rule)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _check_name(kind: str, name: Any, node: str) -> str:
    """A block, column or meta key names a Zarr node (zarr-v3-subset §1)."""
    if not is_valid_node_name(name):
        raise _fail(R_NAME, node, f"{name!r} cannot name a {kind}: it is not a valid Zarr node name")
    return str(name)


def _node(block: str, column: Optional[str] = None) -> str:
    return f"/trajectory/{block}" if column is None else f"/trajectory/{block}/{column}"


def _shape(value: Any, minimum: int) -> Optional[Tuple[int, ...]]:
    """A tuple of ints >= minimum, or None when ``value`` is not one."""
    if not isinstance(value, (list, tuple)):
        return None
    if not all(_is_int(n) and int(n) >= minimum for n in value):
        return None
    return tuple(int(n) for n in value)


class SequenceSchema:
    """The blocks, columns and per-step meta keys a trajectory is pinned to (trajectory §4).

    Frames may present a subset of the declaration, never anything outside it.  Blocks,
    columns and meta keys keep declaration order.  ``==`` compares pins: row hints and
    declaration order are ignored (as the reference does).
    """

    def __init__(self) -> None:
        self._blocks: Dict[str, BlockSpec] = {}
        self._meta: Dict[str, MetaSpec] = {}
        self._rows: Dict[str, int] = {}

    # ------------------------------------------------------------------ declaring
    def declare_block(self, name: str, rows: Optional[int] = None) -> "SequenceSchema":
        """Declare block ``name``; ``rows`` raises its representative row count (chunk sizing
        only, never pinned).  Reserved names ``step time meta box``: ``#W1``."""
        _check_name("block", name, _node(str(name)))
        if name in RESERVED_BLOCK_NAMES:
            raise _fail(W1, _node(name), f"{name!r} is a reserved child of the trajectory group; "
                        "a block cannot take it (reserved: step, time, meta, box)")
        if rows is not None and (not _is_int(rows) or rows < 0):
            raise InvalidValueError(f"rows of block {name!r} must be a non-negative integer, got {rows!r}")
        self._blocks.setdefault(name, BlockSpec())
        if rows is not None:
            self._rows[name] = max(self._rows.get(name, 0), int(rows))
        return self

    def declare_column(
        self, block: str, column: str, dtype: str, trailing: Optional[Iterable[int]] = None
    ) -> "SequenceSchema":
        """Declare ``column`` of ``block`` (declaring the block too).  Same declaration twice
        is a no-op.  Refuses: reserved column names (``#W2``), a second dtype or trailing
        shape (``#W3``), an unknown dtype or malformed trailing shape (``#W5``), a name shared
        with the aligned partner block (``#W8``), a canonical key at another dtype or with
        trailing axes (``#W11``)."""
        node = _node(str(block), str(column))
        _check_name("column", column, node)
        if column in RESERVED_COLUMN_NAMES:
            raise _fail(W2, node, f"{column!r} is a reserved child of a block section; a column "
                        "cannot take it (reserved: offset, step_index, _validity)")
        if not isinstance(dtype, str) or dtype not in COLUMN_DTYPES:
            raise _fail(W5, node, f"column {column!r} of block {block!r}: unknown column dtype "
                        f"{dtype!r} (one of {', '.join(COLUMN_DTYPES)})")
        shape = () if trailing is None else _shape(trailing, 1)
        if shape is None:
            raise _fail(W5, node, f"column {column!r} of block {block!r}: trailing shape {trailing!r} "
                        "is not a sequence of integers >= 1")
        canonical = VOCABULARY.get(column)
        if canonical is not None and (dtype != canonical or shape):
            raise _fail(W11, node, f"column {column!r} is a canonical key: it is {canonical}[N] "
                        f"(no trailing axes), not {dtype} with trailing {list(shape)}")
        self.declare_block(block)
        spec = self._blocks[block]
        existing = spec.columns.get(column)
        if existing is None:
            partner = self._aligned_partner(block)
            if partner is not None and column in self._blocks[partner].columns:
                raise _fail(W8, node, f"column {column!r} cannot be declared on block {block!r}: it "
                            f"is aligned with block {partner!r}, which has a column of that name, "
                            "and an aligned pair's columns are disjoint")
            spec.columns[column] = ColumnSpec(dtype, shape)
        elif existing.dtype != dtype:
            raise _fail(W3, node, f"sequence schema conflict: column {column!r} of block {block!r} "
                        f"is {existing.dtype} in one declaration and {dtype} in another")
        elif existing.trailing != shape:
            raise _fail(W3, node, f"sequence schema conflict: column {column!r} of block {block!r} "
                        f"has trailing shape {list(existing.trailing)} in one declaration and "
                        f"{list(shape)} in another")
        return self

    def _declared(self, rule: str, what: str, block: str, column: str) -> ColumnSpec:
        spec = self._blocks.get(block)
        if spec is None or column not in spec.columns:
            missing = "the block is not declared" if spec is None else "the column is not declared"
            raise _fail(rule, _node(str(block), str(column)),
                        f"cannot declare {what} for column {column!r} of block {block!r}: {missing}")
        return spec.columns[column]

    def declare_nullable(self, block: str, column: str) -> "SequenceSchema":
        """Mark a declared column nullable (a union, never cleared).  Undeclared: ``#W9``."""
        spec = self._declared(W9, "nullable", block, column)
        self._blocks[block].columns[column] = replace(spec, nullable=True)
        return self

    def declare_precision(self, block: str, column: str, p: float) -> "SequenceSchema":
        """Declare the precision of an f64 column (§8.5).  Refuses an undeclared or non-f64
        column and a value that is not finite within [2^-1000, 2^1000] (``#W6``), a second
        value (``#W4``)."""
        spec = self._declared(W6, "a precision", block, column)
        node = _node(block, column)
        if spec.dtype != "f64":
            raise _fail(W6, node, f"column {column!r} of block {block!r} is {spec.dtype}; only an "
                        "f64 column declares a precision")
        for violation in check_precision(p, spec.dtype, node, write=True):
            raise _fail(W6, node, f"column {column!r} of block {block!r}: {violation.message}")
        value = float(p)
        if spec.precision is not None and spec.precision != value:
            raise _fail(W4, node, f"sequence schema conflict: column {column!r} of block {block!r} "
                        f"declares precision {spec.precision!r} and {value!r}")
        self._blocks[block].columns[column] = replace(spec, precision=value)
        return self

    def declare_target(self, block: str, column: str, target: str) -> "SequenceSchema":
        """Declare a row reference (§8.6): a u64 column holding rows of ``<block>`` (same
        resolved frame) or ``/<section>/<block>`` (never ``/trajectory/…``).  Refuses an
        undeclared or non-u64 column or a malformed target (``#W7``), a second target
        (``#W4``)."""
        spec = self._declared(W7, "a target", block, column)
        node = _node(block, column)
        if spec.dtype != "u64" or spec.trailing:
            raise _fail(W7, node, f"column {column!r} of block {block!r} is {spec.dtype} with "
                        f"trailing {list(spec.trailing)}; a row reference is a u64[N] column")
        if not is_target_syntax(target):
            raise _fail(W7, node, f"column {column!r} of block {block!r}: target {target!r} is not "
                        "'<block>' or '/<section>/<block>' (a trajectory block is never an "
                        "absolute target)")
        targets = self._blocks[block].targets
        if column in targets and targets[column] != target:
            raise _fail(W4, node, f"sequence schema conflict: column {column!r} of block {block!r} "
                        f"references {targets[column]!r} and {target!r}")
        targets[column] = target
        return self

    def declare_structural_shape(self, block: str, shape: Iterable[int]) -> "SequenceSchema":
        """Declare a block's structural shape (§8.2); its representative rows become the
        product.  Refuses an undeclared or aligned block, a shape that is not non-negative
        integers (``#W9``), a second shape (``#W4``)."""
        node = _node(str(block))
        spec = self._blocks.get(block)
        if spec is None:
            raise _fail(W9, node, f"block {block!r} is not declared; declare it before its "
                        "structural shape")
        if spec.aligned_with is not None:
            raise _fail(W9, node, f"block {block!r} is aligned with {spec.aligned_with!r} and "
                        "declares no structural shape")
        value = _shape(shape, 0)
        if value is None:
            raise _fail(W9, node, f"structural shape {shape!r} of block {block!r} is not a "
                        "sequence of non-negative integers")
        if spec.structural_shape is not None and spec.structural_shape != value:
            raise _fail(W4, node, f"sequence schema conflict: block {block!r} declares structural "
                        f"shape {list(spec.structural_shape)} and {list(value)}")
        spec.structural_shape = value
        self._rows[block] = math.prod(value)
        return self

    def declare_aligned(self, block: str, other: str) -> "SequenceSchema":
        """Declare ``block`` aligned with ``other`` (§8.7).  Refuses (``#W8``): either block
        undeclared, self-alignment, chains (either way round), a structurally shaped
        ``block``, a shared column name, re-alignment elsewhere.  Same pair again: no-op."""
        node = _node(str(block))

        def refuse(why: str) -> SpecViolationError:
            return _fail(W8, node, f"cannot align block {block!r} with {other!r}: {why}")

        aligned, target = self._blocks.get(block), self._blocks.get(other)
        if aligned is None or target is None:
            raise refuse("both blocks must be declared")
        if block == other:
            raise refuse("a block is not aligned with itself")
        if aligned.aligned_with == other:
            return self
        if aligned.aligned_with is not None:
            raise refuse(f"it is already aligned with {aligned.aligned_with!r}")
        if target.aligned_with is not None:
            raise refuse(f"{other!r} is itself aligned; alignments do not chain")
        if any(spec.aligned_with == block for spec in self._blocks.values()):
            raise refuse(f"{block!r} is the target of another alignment; alignments do not chain")
        if aligned.structural_shape is not None:
            raise refuse("an aligned block declares no structural shape")
        shared = [c for c in aligned.columns if c in target.columns]
        if shared:
            raise refuse(f"both declare column {shared[0]!r}, and an aligned pair's columns are disjoint")
        aligned.aligned_with = other
        return self

    def _check_meta(self, key: str, dtype: Any) -> Optional[MetaSpec]:
        """Refuse a bad key or tag (``#W5``) or a second tag (``#W4``); the existing spec."""
        node = f"/trajectory/meta/{key}"
        _check_name("meta key", key, node)
        if not isinstance(dtype, str) or dtype not in typed_json.TAGS:
            raise _fail(W5, node, f"meta key {key!r} cannot be stored per step: unknown dtype "
                        f"{dtype!r} (one of {', '.join(typed_json.TAGS)})")
        existing = self._meta.get(key)
        if existing is not None and existing.tag != dtype:
            raise _fail(W4, node, f"sequence schema conflict: meta key {key!r} is {existing.tag} "
                        f"in one declaration and {dtype} in another")
        return existing

    def declare_meta(self, key: str, dtype: str) -> "SequenceSchema":
        """Declare per-step meta ``key`` with one of the 16 tags (§5.1).  Unknown tag
        (``f16``, ``i64x6``, legacy ``float``): ``#W5``; a second tag: ``#W4``.  A fill
        declared earlier is kept."""
        if self._check_meta(key, dtype) is None:
            self._meta[key] = MetaSpec(dtype)
        return self

    def declare_meta_with_fill(self, key: str, fill: Any, dtype: Optional[str] = None) -> "SequenceSchema":
        """Declare ``key`` with the value written for steps that omit it (§5.2, §5.3).

        The tag is ``dtype``, else a ``MetaValue`` fill's tag, else inferred from the fill as
        typed meta does (``300.0``/NaN → f64, ``None`` → json).  The fill must be a valid
        value of the tag; ``None`` only for ``json`` (``#W10``).  A different tag (``#W4``)
        or a different fill (``#W4``, a pin is a pin) for a declared key is refused."""
        node = f"/trajectory/meta/{key}"
        if isinstance(fill, MetaValue):
            if dtype is not None and dtype != fill.tag:
                raise _fail(W10, node, f"meta key {key!r}: the fill is tagged {fill.tag!r} but "
                            f"dtype {dtype!r} was given")
            dtype, fill = fill.tag, fill.value
        if dtype is None:
            try:
                dtype = typed_json.infer_tag(fill)
            except MolrecError as exc:
                raise _fail(W10, node, f"meta key {key!r}: fill {fill!r}: {exc.message}") from None
        existing = self._check_meta(key, dtype)
        try:
            encoded = typed_json.encode_value(dtype, fill, node)
        except MolrecError as exc:
            raise _fail(W10, node, f"meta key {key!r}: fill {fill!r} is not a valid {dtype} "
                        f"value: {exc.message}") from None
        spec = MetaSpec(dtype, True, typed_json.decode_value(dtype, encoded, node), encoded)
        if existing is not None and existing.has_fill and existing != spec:
            raise _fail(W4, node, f"sequence schema conflict: meta key {key!r} declares fill "
                        f"{existing.fill_json!r} and {encoded!r}")
        self._meta[key] = spec
        return self

    # ------------------------------------------------------------------ deriving
    @classmethod
    def from_frame(cls, frame: Frame) -> "SequenceSchema":
        """``from_frames([frame])``."""
        return cls.from_frames([frame])

    @classmethod
    def from_frames(cls, frames: Iterable[Frame]) -> "SequenceSchema":
        """The union of ``frames`` (§4): blocks and columns in first-seen order; dtype,
        trailing, structural shape, precision, target or meta tag disagreeing between frames
        is refused naming both values; the largest row count is the representative rows;
        a column masked in any frame is nullable; frame meta ``step``/``time`` are skipped;
        meta tags are a ``MetaValue``'s or inferred as typed meta does."""
        schema = cls()
        shapes: Dict[str, Optional[Tuple[int, ...]]] = {}
        for frame in frames:
            if not isinstance(frame, Frame):
                raise InvalidValueError(f"from_frames needs Frame objects, got {type(frame).__name__}")
            for name, block in frame.blocks.items():
                schema.declare_block(name, block.nrows)
                shape = None if block.structural_shape is None else _shape(block.structural_shape, 0)
                if block.structural_shape is not None and shape is None:
                    raise _fail(W9, _node(name), f"structural shape {block.structural_shape!r} of "
                                f"block {name!r} is not a sequence of non-negative integers")
                if name in shapes and shapes[name] != shape:
                    show = [None if s is None else list(s) for s in (shapes[name], shape)]
                    raise _fail(W4, _node(name), f"sequence schema conflict: block {name!r} "
                                f"declares structural shape {show[0]} in one frame and {show[1]} "
                                "in another")
                shapes[name] = shape
                for column, values in block.columns.items():
                    dtype, trailing = _frame_column(name, column, values)
                    schema.declare_column(name, column, dtype, trailing)
                    if column in block.masks:
                        schema.declare_nullable(name, column)
                    if column in block.precision:
                        schema.declare_precision(name, column, block.precision[column])
                    if column in block.targets:
                        schema.declare_target(name, column, block.targets[column])
            for key, value in frame.meta.items():
                if key in SKIPPED_FRAME_META_KEYS:
                    continue
                schema.declare_meta(key, _frame_meta_tag(key, value))
        for name, shape in shapes.items():
            if shape is not None:
                schema.declare_structural_shape(name, shape)
        return schema

    # ------------------------------------------------------------------ reading
    def block_names(self) -> List[str]:
        """The declared blocks in declaration order, the order frames come back in (trajectory#4)."""
        return list(self._blocks)

    def has_block(self, name: str) -> bool:
        """Whether ``name`` is a declared block (only declared blocks are blocks, trajectory#N5)."""
        return name in self._blocks

    def _block(self, name: str) -> BlockSpec:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"block {name!r} is not declared") from None

    def block_spec(self, name: str) -> BlockSpec:
        """A copy of the declared block (``KeyError`` when undeclared)."""
        spec = self._block(name)
        return BlockSpec(dict(spec.columns), spec.structural_shape, dict(spec.targets), spec.aligned_with)

    def columns(self, block: str) -> Dict[str, ColumnSpec]:
        """Column → ``ColumnSpec`` in declaration order (a copy)."""
        return dict(self._block(block).columns)

    def column_names(self, block: str) -> List[str]:
        """The declared columns of ``block`` in declaration order; an undeclared block is refused."""
        return list(self._block(block).columns)

    def structural_shape(self, block: str) -> Optional[Tuple[int, ...]]:
        """The structural shape pinned for ``block`` (every update has its product of rows,
        trajectory#8.2), or None."""
        return self._block(block).structural_shape

    def targets(self, block: str) -> Dict[str, str]:
        """``{column: target}`` row references pinned for ``block`` (trajectory#8.6)."""
        return dict(self._block(block).targets)

    def rows(self, block: str) -> int:
        """Representative row count (0 when unknown); sizes chunks, never pinned."""
        self._block(block)
        return self._rows.get(block, 0)

    def precision(self, block: str, column: str) -> Optional[float]:
        """Declared precision, or None (also when not declared), as the reference does."""
        spec = self._blocks.get(block)
        col = spec.columns.get(column) if spec is not None else None
        return col.precision if col is not None else None

    def target(self, block: str, column: str) -> Optional[str]:
        """The pinned target of ``block``'s ``column`` (trajectory#8.6); None when it has none or
        the block is not declared."""
        spec = self._blocks.get(block)
        return spec.targets.get(column) if spec is not None else None

    def aligned_with(self, block: str) -> Optional[str]:
        """The block ``block`` is aligned with (same row count wherever it is present,
        trajectory#8.7); None when it is not aligned or not declared."""
        spec = self._blocks.get(block)
        return spec.aligned_with if spec is not None else None

    def _aligned_partner(self, block: str) -> Optional[str]:
        if self._blocks[block].aligned_with is not None:
            return self._blocks[block].aligned_with
        return next((n for n, s in self._blocks.items() if s.aligned_with == block), None)

    def meta_keys(self) -> List[Tuple[str, str]]:
        """``[(key, tag)]`` in declaration order (the reference's form)."""
        return [(key, spec.tag) for key, spec in self._meta.items()]

    def meta_spec(self, key: str) -> MetaSpec:
        """``MetaSpec`` of a declared key; unpacks as ``(tag, has_fill, fill)``."""
        try:
            return self._meta[key]
        except KeyError:
            raise KeyError(f"meta key {key!r} is not declared") from None

    # ------------------------------------------------------------------ JSON form
    def to_json(self) -> Dict[str, Any]:
        """The pinned form (§4): optional keys only when set, ``trailing`` and ``meta``
        always written, declaration order kept.  A fresh document."""
        blocks: Dict[str, Any] = {}
        for name, spec in self._blocks.items():
            columns: Dict[str, Any] = {}
            for column, col in spec.columns.items():
                entry: Dict[str, Any] = {"dtype": col.dtype, "trailing": list(col.trailing)}
                if col.nullable:
                    entry["nullable"] = True
                if col.precision is not None:
                    entry["precision"] = col.precision
                columns[column] = entry
            block: Dict[str, Any] = {"columns": columns}
            if spec.structural_shape is not None:
                block["structural_shape"] = list(spec.structural_shape)
            if spec.targets:
                block["targets"] = dict(spec.targets)
            if spec.aligned_with is not None:
                block["aligned_with"] = spec.aligned_with
            blocks[name] = block
        meta: Dict[str, Any] = {}
        for key, m in self._meta.items():
            meta[key] = {"dtype": m.tag, "fill": copy.deepcopy(m.fill_json)} if m.has_fill else {"dtype": m.tag}
        return {"blocks": blocks, "meta": meta}

    @classmethod
    def from_json(cls, doc: Any, *, allow_legacy: bool = True) -> "SequenceSchema":
        """Read a stored pin strictly: anything malformed is refused (``#R11``; an invalid
        alignment ``#R16``; a canonical key pinned at another dtype ``#R13``).  Legacy tags
        ``float``/``int``/``uint`` read as ``f64``/``i32``/``u64`` when ``allow_legacy``
        (decision 17); a missing ``trailing`` reads as ``[]``; a missing ``meta`` as ``{}``."""
        schema = cls()
        try:
            _read_pin(schema, doc, allow_legacy)
        except SpecViolationError as exc:
            rule = {W8: R_PIN_ALIGNED, R_PIN_ALIGNED: R_PIN_ALIGNED, W11: R_PIN_CANONICAL}.get(
                exc.rule or "", R_PIN)
            raise SpecViolationError(f"sequence_schema: {exc.message}", node=exc.node or "/trajectory",
                                     rule=rule) from None
        return schema

    # ------------------------------------------------------------------ misc
    def copy(self) -> "SequenceSchema":
        """An independent copy (through the pinned JSON form, so it is exactly what a store
        would pin), representative row counts included."""
        other = type(self).from_json(self.to_json())
        other._rows = dict(self._rows)
        return other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SequenceSchema):
            return NotImplemented
        return self._blocks == other._blocks and self._meta == other._meta

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SequenceSchema({orjson.dumps(self.to_json()).decode()})"


# ---------------------------------------------------------------------- helpers
def _frame_column(block: str, column: str, values: Any) -> Tuple[str, Tuple[int, ...]]:
    """(dtype, trailing) a frame's column is pinned at; a canonical key of another width of
    its family is pinned at its canonical dtype (the writer converts it, ``as_column``)."""
    node = _node(block, column)
    array = np.asarray(values)
    if array.ndim == 0:
        raise _fail(W5, node, f"column {column!r} of block {block!r} has no leading axis")
    dtype = column_dtype_of(array)
    if dtype is None:
        raise _fail(W5, node, f"column {column!r} of block {block!r} has dtype {array.dtype}, "
                    "which is not one of the 13 column dtypes")
    canonical = VOCABULARY.get(column)
    if canonical is not None and canonical != dtype:
        try:
            dtype = column_dtype_of(as_column(column, array, node)) or dtype
        except SpecViolationError as exc:
            raise _fail(W11, node, exc.message) from None
    return dtype, tuple(int(n) for n in array.shape[1:])


def _frame_meta_tag(key: Any, value: Any) -> str:
    node = f"/trajectory/meta/{key}"
    if isinstance(value, MetaValue):
        return value.tag  # checked by declare_meta (#W5)
    try:
        return typed_json.infer_tag(value)
    except MolrecError as exc:
        raise _fail(W5, node, f"meta key {key!r}: {exc.message}") from None


def _object(value: Any, where: str, allowed: Tuple[str, ...], required: Tuple[str, ...]) -> Dict[str, Any]:
    if type(value) is not dict:
        raise _fail(R_PIN, where, f"expected a JSON object, got {type(value).__name__} {brief(value)}")
    unknown = [k for k in value if k not in allowed]
    if unknown:
        raise _fail(R_PIN, where, f"unknown key(s) {unknown} (allowed: {', '.join(allowed)})")
    missing = [k for k in required if k not in value]
    if missing:
        raise _fail(R_PIN, where, f"missing key(s) {missing}")
    return value


def _json_ints(value: Any, minimum: int, where: str, what: str) -> List[int]:
    if type(value) is not list or not all(type(n) is int and n >= minimum for n in value):
        raise _fail(R_PIN, where, f"{what} {brief(value)} is not a JSON array of integers >= {minimum}")
    return value


def _read_pin(schema: SequenceSchema, doc: Any, allow_legacy: bool) -> None:
    top = _object(doc, "/trajectory", _TOP_KEYS, ("blocks",))
    blocks = top["blocks"]
    if type(blocks) is not dict:
        raise _fail(R_PIN, "/trajectory", "blocks is not a JSON object")
    aligned: List[Tuple[str, str]] = []
    for name, raw in blocks.items():
        where = _node(name)
        entry = _object(raw, where, _BLOCK_KEYS, ("columns",))
        schema.declare_block(name)
        columns = entry["columns"]
        if type(columns) is not dict:
            raise _fail(R_PIN, where, "columns is not a JSON object")
        for column, raw_col in columns.items():
            cnode = _node(name, column)
            col = _object(raw_col, cnode, _COLUMN_KEYS, ("dtype",))
            dtype = col["dtype"]
            if allow_legacy and isinstance(dtype, str) and dtype in typed_json.LEGACY_TAGS:
                dtype = typed_json.LEGACY_TAGS[dtype]
            trailing = _json_ints(col.get("trailing", []), 1, cnode, "trailing")
            schema.declare_column(name, column, dtype, trailing)
            nullable = col.get("nullable", False)
            if type(nullable) is not bool:
                raise _fail(R_PIN, cnode, f"nullable {brief(nullable)} is not a JSON boolean")
            if nullable:
                schema.declare_nullable(name, column)
            if "precision" in col:
                p = col["precision"]
                if type(p) not in (int, float):
                    raise _fail(R_PIN, cnode, f"precision {brief(p)} is not a JSON number")
                schema.declare_precision(name, column, p)
        if "structural_shape" in entry:
            schema.declare_structural_shape(
                name, _json_ints(entry["structural_shape"], 0, where, "structural_shape"))
        targets = entry.get("targets", {})
        if type(targets) is not dict:
            raise _fail(R_PIN, where, f"targets {brief(targets)} is not a JSON object")
        for column, target in targets.items():
            schema.declare_target(name, column, target)
        if "aligned_with" in entry:
            other = entry["aligned_with"]
            if type(other) is not str:
                raise _fail(R_PIN_ALIGNED, where, f"aligned_with {brief(other)} is not a block name")
            aligned.append((name, other))
    for name, other in aligned:
        schema.declare_aligned(name, other)
    meta = top.get("meta", {})
    if type(meta) is not dict:
        raise _fail(R_PIN, "/trajectory", f"meta {brief(meta)} is not a JSON object")
    for key, raw in meta.items():
        where = f"/trajectory/meta/{key}"
        entry = _object(raw, where, _META_KEYS, ("dtype",))
        tag = entry["dtype"]
        if allow_legacy and isinstance(tag, str) and tag in typed_json.LEGACY_TAGS:
            tag = typed_json.LEGACY_TAGS[tag]
        schema.declare_meta(key, tag)
        if "fill" in entry:
            try:
                value = typed_json.decode_value(tag, entry["fill"], where)
            except SpecViolationError as exc:
                raise _fail(R_PIN, where, f"the fill of meta key {key!r} is not a {tag}: "
                            f"{exc.message}") from None
            schema.declare_meta_with_fill(key, value, tag)
