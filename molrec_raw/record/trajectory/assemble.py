"""Frames built from decoded inner chunks (the read engine's last part; trajectory §9).

:func:`assemble` turns a :class:`~molrec_raw.record.trajectory.plan.FramePlan` and the
decoded chunks it needs into ``Frame`` objects, one Python pass over the frames with the
arithmetic done beforehand, vectorised.  Two ways to hand out values:

- ``own`` (``reader[i]``, ``read_frame``, ``read_columns``, ``read_frames``): every array is
  the caller's — copied out of its chunk, except a frame whose rows are exactly one inner
  chunk decoded for this read and kept nowhere else, which gets that chunk (no copy).
- views (``for frame in reader``, ``iter_frames``): column and mask arrays are read-only
  views of the decoded chunks (frames of one chunk share it; numpy refuses a write,
  ``np.array(view)`` copies), the cell's arrays read-only arrays shared by the frames of
  one cell update; a frame that fills an inner chunk alone gets that chunk, writable.

Row references and alignments are checked on each frame when the pin has any (R16/R17).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.trajectory.layout import TrajectoryLayout
from molrec_raw.record.trajectory.meta import META_STORAGE, meta_value
from molrec_raw.record.trajectory.plan import FramePlan
from molrec_raw.record.trajectory.references import check_resolved

__all__ = ["assemble", "frames_in_order", "Chunks", "FrameRecipe", "Located"]

Chunks = Dict[str, Dict[int, np.ndarray]]  # array path -> chunk -> decoded inner chunk
# tags whose stored value is already the caller's plain value (typed_json.infer_tag agrees)
_PLAIN_TAGS = frozenset({"f64", "i64", "bool", "string"})


def _piece(chunks: Dict[int, np.ndarray], rows: int, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo:hi`` of an array from its inner chunks (a view when one chunk holds them)."""
    first, last = lo // rows, (hi - 1) // rows
    if first == last:
        return chunks[first][lo - first * rows:hi - first * rows]
    parts = [chunks[c][max(lo - c * rows, 0):min(hi, (c + 1) * rows) - c * rows] for c in range(first, last + 1)]
    return np.concatenate(parts)


def _meta_values(plan: FramePlan, chunks: Chunks, rows_of: Dict[str, int]) -> List[Tuple[str, List[Any]]]:
    """Per meta key, its value at every planned frame (the caller's plain or tagged value)."""
    frames = plan.frames
    out = []
    for mp in plan.meta:
        arr = mp.array
        if arr is None:
            continue
        rows = rows_of[arr.path]
        held = chunks[arr.path]
        dtype, trailing = META_STORAGE[mp.tag]
        raw = np.empty((frames.size,) + trailing, dtype=dtype)
        if frames.size == 1:
            i = int(frames[0])
            raw[0] = held[i // rows][i % rows]
            which = None
        else:
            which = frames // rows
        if which is None:
            pass
        elif which.size and which.min() == which.max():
            raw[...] = held[int(which[0])][frames - int(which[0]) * rows]
        else:
            for c in np.unique(which).tolist():
                pick = which == c
                raw[pick] = held[c][frames[pick] - c * rows]
        where = f"/trajectory/meta/{mp.key}"
        if mp.tag in _PLAIN_TAGS:
            values: List[Any] = raw.tolist()
        else:
            values = [meta_value(mp.tag, raw[k], where) for k in range(frames.size)]
        out.append((mp.key, values))
    return out


def _block_values(bp: Any, chunks: Chunks, rows_of: Dict[str, int], own: bool, n: int,
                  offered: Optional[Set[Tuple[str, int]]], blocks_out: List[Dict[str, Block]]) -> None:
    """Each planned frame's ``Block`` of one block into ``blocks_out`` (see :func:`assemble`)."""
    spec = bp.block.spec
    precision = {c: p for c in bp.names if (p := spec.columns[c].precision) is not None}
    targets = {c: t for c, t in spec.targets.items() if c in bp.names}
    shape = spec.structural_shape
    updates, los, his, singles = bp.updates, bp.lo, bp.hi, bp.single
    columns = [(c, arr, chunks.get(arr.path, {}), rows_of[arr.path]) for c, arr in bp.columns]
    masks = [(c, chunks.get(arr.path, {}), rows_of[arr.path]) for c, arr in bp.masks]
    name = bp.name
    shared = {rows for _, _, _, rows in columns}
    rows_all = shared.pop() if len(shared) == 1 else 0  # the rows per chunk every column shares
    pairs = [(c, held) for c, _, held, _ in columns]
    if offered is None and not masks and rows_all and _one_chunk_each(bp, rows_all, updates, los, his, n,
                                                                     blocks_out, pairs, own, precision, targets):
        return
    for k in range(n):
        if updates[k] < 0:
            continue
        lo, hi = los[k], his[k]
        count = hi - lo
        flags: Dict[str, np.ndarray] = {}
        first = lo // rows_all if rows_all else 0
        start = lo - first * rows_all
        if count > 0 and offered is None and rows_all and start + count <= rows_all:
            # the common case: every column's rows in one chunk, no chunk to hand over
            end = start + count
            if own:
                values = {c: held[first][start:end].copy() for c, held in pairs}
            else:
                values = {c: held[first][start:end] for c, held in pairs}
        else:
            values = {}
            for c, arr, held, rows in columns:
                values[c] = _column(arr, held, rows, lo, count, own, offered, singles[k])
        if masks and count > 0:
            for c, held, rows in masks:
                mask = _piece(held, rows, lo, hi)
                if not mask.all():
                    flags[c] = mask.copy() if own else mask
        blocks_out[k][name] = Block(values, flags, dict(precision) if precision else {},
                                    dict(targets) if targets else {}, shape, {}, count)


def _one_chunk_each(bp: Any, rows: int, updates: List[int], los: List[int], his: List[int], n: int,
                    blocks_out: List[Dict[str, Block]], pairs: List[Tuple[str, Dict[int, np.ndarray]]], own: bool,
                    precision: Dict[str, float], targets: Dict[str, str]) -> bool:
    """The common case of :func:`_block_values` at the per-frame floor: every present
    frame's rows inside one inner chunk of every column (they share their rows per chunk),
    no mask, no chunk to hand over — per frame a slice of each column's chunk and one
    ``Block``, the chunk looked up once per run of frames in it.  False (nothing done)
    when a frame is not of that case."""
    spans = _inside_one_chunk(los, his, updates, rows)
    if spans is None:
        return False
    name, shape = bp.name, bp.block.spec.structural_shape
    held: List[Tuple[str, np.ndarray]] = []
    at = -1
    for blocks, f, s, m, here in zip(blocks_out, *spans):
        if not here:
            continue
        if f != at:
            held, at = [(c, chunks[f]) for c, chunks in pairs], f
        e = s + m
        values = {c: chunk[s:e].copy() for c, chunk in held} if own else {c: chunk[s:e] for c, chunk in held}
        blocks[name] = Block(values, {}, dict(precision) if precision else {}, dict(targets) if targets else {},
                             shape, {}, m)
    return True


def _inside_one_chunk(los: Any, his: Any, updates: Any, rows: int
                      ) -> Optional[Tuple[List[int], List[int], List[int], List[bool]]]:
    """Per frame of a block (rows ``los[k]:his[k]``, present where ``updates[k] >= 0``): the
    inner chunk its rows lie in, where they start in it, how many, whether present — when
    every present frame's rows lie inside one chunk of ``rows`` rows (0: no stored column,
    the row count only).  None when a frame's rows are empty or cross a chunk boundary."""
    lo = np.asarray(los, np.int64)
    count = np.asarray(his, np.int64) - lo
    present = np.asarray(updates, np.int64) >= 0
    if rows:
        first = lo // rows
        start = lo - first * rows
        if not bool(np.all(~present | ((count > 0) & (start + count <= rows)))):
            return None
    else:
        first = start = np.zeros_like(lo)
    return first.tolist(), start.tolist(), count.tolist(), present.tolist()


def _column(arr: Any, held: Dict[int, np.ndarray], rows: int, lo: int, count: int, own: bool,
            offered: Optional[Set[Tuple[str, int]]], single: bool) -> np.ndarray:
    """One column's rows ``lo:lo+count`` of one frame (see :func:`assemble`)."""
    if count <= 0:
        return np.empty((0,) + tuple(arr.shape[1:]), arr.dtype)
    first = lo // rows
    start = lo - first * rows
    if start + count > rows:  # the rows span chunks: a new array
        piece = _piece(held, rows, lo, lo + count)
        if not own:
            piece.flags.writeable = False
        return piece
    chunk = held[first]
    piece = chunk[start:start + count]
    if offered is not None and (arr.path, first) in offered:  # a writable chunk
        if count == rows and single:
            offered.discard((arr.path, first))
            return chunk  # the frame takes the chunk: its own, writable
        if own:
            return piece.copy()
        piece.flags.writeable = False
        return piece
    return piece.copy() if own else piece  # the chunk is shared (read-only): the caller's copy


def assemble(plan: FramePlan, chunks: Chunks, rows_of: Dict[str, int], own: bool,
             handover: Optional[Set[Tuple[str, int]]] = None,
             shared_cells: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]] = None) -> List[Frame]:
    """The planned frames (see the module docstring).  ``chunks`` are read-only but for
    those in ``handover``: decoded for this read alone, a frame whose rows are exactly one
    of them (its update in effect at that frame only) takes it, each at most once (the set
    loses what is taken).  ``rows_of``: path -> rows per inner chunk; ``shared_cells``: the
    read-only cell arrays per update (views), filled as cells are met."""
    layout: TrajectoryLayout = plan.layout
    frames_list = plan.frame_list
    n = len(frames_list)
    blocks_out: List[Dict[str, Block]] = [{} for _ in range(n)]
    offered = handover if handover else None
    for bp in plan.blocks:
        _block_values(bp, chunks, rows_of, own, n, offered, blocks_out)
    meta = _meta_values(plan, chunks, rows_of)
    boxes = _boxes(plan, own, shared_cells)
    if len(meta) == 1:
        key, values = meta[0]
        out = [Frame({key: value}, blocks, box) for value, blocks, box in zip(values, blocks_out, boxes)]
    elif meta:
        out = [Frame({key: values[k] for key, values in meta}, blocks_out[k], boxes[k]) for k in range(n)]
    else:
        out = [Frame({}, blocks, box) for blocks, box in zip(blocks_out, boxes)]
    if layout.needs_check:
        for k, frame in enumerate(out):
            _check(layout, frame, frames_list[k], plan.wanted)
    return out


def _boxes(plan: FramePlan, own: bool, shared_cells: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]]
           ) -> List[Optional[Box]]:
    """Each planned frame's cell: its own arrays (``own``), else read-only arrays shared by
    the frames of one cell update (kept in ``shared_cells``)."""
    n = len(plan.frame_list)
    cells = plan.cells
    box_cells = plan.layout.box.cells
    boxes: List[Optional[Box]] = [None] * n
    if box_cells:
        for k in range(n):
            j = cells[k]
            if j < 0:
                continue
            cell = box_cells[j]
            if own or shared_cells is None:
                boxes[k] = cell.box()
                continue
            arrays = shared_cells.get(j)
            if arrays is None:
                vectors, origin = cell.vectors.copy(), cell.origin.copy()
                vectors.flags.writeable = origin.flags.writeable = False
                arrays = shared_cells[j] = (vectors, origin)
            boxes[k] = Box(arrays[0], arrays[1], cell.boundary, cell.defined)
    return boxes


def frames_in_order(plan: FramePlan, chunks: Chunks, rows_of: Dict[str, int],
                    shared_cells: Dict[int, Tuple[np.ndarray, np.ndarray]]) -> Optional[Iterator[Frame]]:
    """The planned frames as :func:`assemble` makes them as views (``own=False``, nothing
    handed over), each built when the caller asks for it — a frame dropped before the next
    is built never outlives the young generation of the garbage collector — for the
    common case only: every present frame's rows inside one inner chunk of each column, no
    mask, no row reference or alignment to check (a pin without them).  None: not that
    case (call :func:`assemble`)."""
    layout: TrajectoryLayout = plan.layout
    if layout.needs_check:
        return None
    specs = []
    for bp in plan.blocks:
        if bp.masks:
            return None
        shared = {rows_of[arr.path] for _, arr in bp.columns}
        if len(shared) > 1:
            return None
        spans = _inside_one_chunk(bp.lo, bp.hi, bp.updates, shared.pop() if shared else 0)
        if spans is None:
            return None
        spec = bp.block.spec
        precision = {c: p for c in bp.names if (p := spec.columns[c].precision) is not None}
        targets = {c: t for c, t in spec.targets.items() if c in bp.names}
        pairs = [(c, chunks.get(arr.path, {})) for c, arr in bp.columns]
        specs.append((bp.name, pairs, *spans, precision, targets, spec.structural_shape))
    meta = _meta_values(plan, chunks, rows_of)
    boxes = _boxes(plan, False, shared_cells)
    return _in_order(specs, meta, boxes, len(plan.frame_list))


def _in_order(specs: List[Any], meta: List[Tuple[str, List[Any]]], boxes: List[Optional[Box]],
              n: int) -> Iterator[Frame]:
    if len(specs) == 1 and len(meta) == 1:
        return _one_block_in_order(specs[0], meta[0], boxes)
    return _blocks_in_order(specs, meta, boxes, n)


def _one_block_in_order(spec: Any, meta: Tuple[str, List[Any]], boxes: List[Optional[Box]]) -> Iterator[Frame]:
    """:func:`_blocks_in_order` of one block and one meta key (the common trajectory)."""
    name, pairs, first, start, count, present, precision, targets, shape = spec
    key, values = meta
    at = -1
    views: List[Tuple[str, np.ndarray]] = []
    for f, s, m, here, value, box in zip(first, start, count, present, values, boxes):
        if not here:
            yield Frame({key: value}, {}, box)
            continue
        if f != at:
            views, at = [(c, held[f]) for c, held in pairs], f
        e = s + m
        yield Frame({key: value}, {name: Block({c: chunk[s:e] for c, chunk in views}, {},
                                               precision.copy() if precision else {}, targets.copy() if targets else {},
                                               shape, {}, m)}, box)


def _blocks_in_order(specs: List[Any], meta: List[Tuple[str, List[Any]]], boxes: List[Optional[Box]],
                     n: int) -> Iterator[Frame]:
    at = [-1] * len(specs)
    views: List[List[Tuple[str, np.ndarray]]] = [[] for _ in specs]
    one_key = meta[0] if len(meta) == 1 else None
    for k in range(n):
        blocks: Dict[str, Block] = {}
        for b, (name, pairs, first, start, count, present, precision, targets, shape) in enumerate(specs):
            if not present[k]:
                continue
            f, s, m = first[k], start[k], count[k]
            if f != at[b]:  # a new chunk: its arrays looked up once for the frames in it
                views[b], at[b] = [(c, held[f]) for c, held in pairs], f
            e = s + m
            blocks[name] = Block({c: chunk[s:e] for c, chunk in views[b]}, {}, precision.copy() if precision else {},
                                 targets.copy() if targets else {}, shape, {}, m)
        if one_key is not None:
            yield Frame({one_key[0]: one_key[1][k]}, blocks, boxes[k])
        else:
            yield Frame({key: values[k] for key, values in meta}, blocks, boxes[k])


def _check(layout: TrajectoryLayout, frame: Frame, ordinal: int, wanted: Any) -> None:
    """Row references and alignments of one assembled frame (R16/R17)."""
    blocks = frame.blocks
    check_resolved(layout.schema, {name: int(b.count or 0) for name, b in blocks.items()},
                   lambda bn, c: (blocks[bn].columns[c], blocks[bn].masks.get(c)),
                   layout.section_rows, ordinal, writing=False, only=wanted)


# (path, chunk, rows it must prove) of each chunk a frame needs, and per array (its geometry,
# the rows the state trusts) — what ReadEngine.read_one fetches for FrameRecipe.build
Located = Tuple[List[Optional[Tuple[int, int]]], List[Tuple[str, int, int]], List[Tuple[Any, int]]]


class FrameRecipe:
    """One frame of every block, as ``reader[i]`` reads it, with the arithmetic of
    :class:`~molrec_raw.record.trajectory.plan.FramePlan` and :func:`assemble` worked out
    once per state: per block its update rule and its arrays (rows per inner chunk, the
    rows the state trusts), per meta key its array, the cells.  :meth:`locate` says which
    chunk of each array frame ``i`` needs (None: a frame this recipe does not serve — rows
    across two chunks, a frame that is one whole chunk, an empty block — read through the
    general path); :meth:`build` makes the ``Frame`` from those chunks, the caller's own
    arrays, exactly what :func:`assemble` makes of them (``own=True``)."""

    def __init__(self, layout: TrajectoryLayout, axis: Callable[[Any], Any], trusted: Callable[[Any], int]) -> None:
        self.layout = layout
        self.blocks: List[Tuple[str, Any, List[Tuple[str, bool, str, int, Any, int]], Dict[str, float],
                                Dict[str, str], Any]] = []
        for name, b in layout.blocks.items():
            spec = b.spec
            names = list(spec.columns)
            precision = {c: p for c in names if (p := spec.columns[c].precision) is not None}
            targets = {c: t for c, t in spec.targets.items() if c in names}
            arrays = [(c, False, arr) for c in names if (arr := b.columns.get(c)) is not None]
            arrays += [(c, True, arr) for c in names if (arr := b.masks.get(c)) is not None]
            placed = [(c, is_mask, arr.path, axis(arr).rows, axis(arr), trusted(arr)) for c, is_mask, arr in arrays]
            self.blocks.append((name, b, placed, precision, targets, spec.structural_shape))
        self.meta = [(key, tag, tag in _PLAIN_TAGS, arr.path, axis(arr).rows, axis(arr), trusted(arr))
                     for key, (tag, arr) in layout.meta.items() if arr is not None]
        self.cell_ordinals = layout.box.ordinals.tolist()
        self.cells = layout.box.cells

    def locate(self, i: int) -> Optional[Located]:
        """(per block its ``(lo, count)`` at frame ``i`` or None when absent, the chunks to
        fetch as ``(path, chunk, rows to prove)``, per chunk ``(axis, trusted rows)``)."""
        spans: List[Optional[Tuple[int, int]]] = []
        keys: List[Tuple[str, int, int]] = []
        where: List[Tuple[Any, int]] = []
        for _, b, placed, _, _, _ in self.blocks:
            if b.kind == "regular":
                count = b.count
                if not count:
                    spans.append(None)
                    continue
                u = b.uniform
                lo = (i if i < count else count - 1) * u
                hi = lo + u
            else:
                j = b.update_at(i)
                if j is None:
                    spans.append(None)
                    continue
                lo, hi = b.rows(j)
            n = hi - lo
            if n <= 0:
                return None
            spans.append((lo, n))
            for _, _, path, rows, axis, trusted in placed:
                c = lo // rows
                if n >= rows or (hi - 1) // rows != c:
                    return None
                start = c * rows
                keys.append((path, c, min(rows, trusted - start)))
                where.append((axis, trusted))
        for _, _, _, path, rows, axis, trusted in self.meta:
            c = i // rows
            keys.append((path, c, min(rows, trusted - c * rows)))
            where.append((axis, trusted))
        return spans, keys, where

    def build(self, i: int, spans: List[Optional[Tuple[int, int]]], chunks: List[Any]) -> Frame:
        """Frame ``i`` from the chunks :meth:`locate` named, in its order (arrays, or byte
        planes of which only the frame's rows are unshuffled)."""
        k = 0
        blocks: Dict[str, Block] = {}
        for (name, _, placed, precision, targets, shape), span in zip(self.blocks, spans):
            if span is None:
                continue
            lo, n = span
            values: Dict[str, np.ndarray] = {}
            flags: Dict[str, np.ndarray] = {}
            for column, is_mask, _, rows, _, _ in placed:
                start = lo % rows
                held = chunks[k]
                k += 1
                # a chunk kept as byte planes (zarr.codecs.quick.Planes): only these rows unshuffled
                piece = held[start:start + n].copy() if type(held) is np.ndarray else held.rows(start, start + n)
                if not is_mask:
                    values[column] = piece
                elif not piece.all():
                    flags[column] = piece
            blocks[name] = Block(values, flags, dict(precision) if precision else {}, dict(targets) if targets else {},
                                 shape, {}, n)
        meta: Dict[str, Any] = {}
        for key, tag, plain, _, rows, _, _ in self.meta:
            at = i % rows
            chunk = chunks[k]
            k += 1
            row = chunk[at:at + 1] if type(chunk) is np.ndarray else chunk.rows(at, at + 1)
            meta[key] = row.tolist()[0] if plain else meta_value(tag, row[0], f"/trajectory/meta/{key}")
        box = None
        if self.cells:
            j = bisect_right(self.cell_ordinals, i) - 1
            if j >= 0:
                box = self.cells[j].box()
        frame = Frame(meta, blocks, box)
        if self.layout.needs_check:
            _check(self.layout, frame, i, None)
        return frame
