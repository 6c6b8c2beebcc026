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

from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.trajectory.layout import TrajectoryLayout
from molrec_raw.record.trajectory.meta import META_STORAGE, meta_value
from molrec_raw.record.trajectory.plan import FramePlan
from molrec_raw.record.trajectory.references import check_resolved

__all__ = ["assemble", "Chunks"]

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


def assemble(plan: FramePlan, chunks: Chunks, rows_of: Dict[str, int], own: bool,
             handover: Optional[Set[Tuple[str, int]]] = None,
             shared_cells: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]] = None) -> List[Frame]:
    """The planned frames (see the module docstring).  ``rows_of``: path -> rows per inner
    chunk; ``handover``: chunks decoded for this read alone that a whole-chunk frame may take
    (``own``; each at most once); ``shared_cells``: the read-only cell arrays per update
    (views), filled as cells are met."""
    layout: TrajectoryLayout = plan.layout
    frames_list = plan.frame_list
    n = len(frames_list)
    blocks_out: List[Dict[str, Block]] = [{} for _ in range(n)]
    counts_out: List[Dict[str, int]] = [{} for _ in range(n)]
    for bp in plan.blocks:
        spec = bp.block.spec
        precision = {c: p for c in bp.names if (p := spec.columns[c].precision) is not None}
        targets = {c: t for c, t in spec.targets.items() if c in bp.names}
        shape = spec.structural_shape
        updates, los, his, singles = bp.updates, bp.lo, bp.hi, bp.single
        columns = [(c, arr, chunks.get(arr.path, {}), rows_of[arr.path]) for c, arr in bp.columns]
        masks = [(c, chunks.get(arr.path, {}), rows_of[arr.path]) for c, arr in bp.masks]
        name = bp.name
        for k in range(n):
            if updates[k] < 0:
                continue
            lo, hi = los[k], his[k]
            count = hi - lo
            values: Dict[str, np.ndarray] = {}
            for c, arr, held, rows in columns:
                if count <= 0:
                    values[c] = np.empty((0,) + tuple(arr.shape[1:]), arr.dtype)
                    continue
                piece = _piece(held, rows, lo, hi)
                first = lo // rows
                if (handover and count == rows and lo == first * rows and singles[k]
                        and (arr.path, first) in handover):
                    handover.discard((arr.path, first))  # the frame takes the chunk: its own, writable
                elif own:
                    piece = piece.copy()
                else:
                    piece.flags.writeable = False
                values[c] = piece
            flags: Dict[str, np.ndarray] = {}
            if count > 0:
                for c, held, rows in masks:
                    mask = _piece(held, rows, lo, hi)
                    if not mask.all():
                        if own:
                            mask = mask.copy()
                        else:
                            mask.flags.writeable = False
                        flags[c] = mask
            blocks_out[k][name] = Block(values, flags, dict(precision), dict(targets), shape, {}, count)
            counts_out[k][name] = count
    meta = _meta_values(plan, chunks, rows_of)
    cells = plan.cells
    box_cells = layout.box.cells
    out: List[Frame] = []
    for k in range(n):
        j = cells[k]
        box: Optional[Box] = None
        if j >= 0:
            cell = box_cells[j]
            if own or shared_cells is None:
                box = cell.box()
            else:
                arrays = shared_cells.get(j)
                if arrays is None:
                    vectors, origin = cell.vectors.copy(), cell.origin.copy()
                    vectors.flags.writeable = origin.flags.writeable = False
                    arrays = shared_cells[j] = (vectors, origin)
                box = Box(arrays[0], arrays[1], cell.boundary, cell.defined)
        frame = Frame({key: values[k] for key, values in meta}, blocks_out[k], box)
        if layout.needs_check:
            blocks = blocks_out[k]
            check_resolved(layout.schema, counts_out[k],
                           lambda bn, c, blocks=blocks: (blocks[bn].columns[c], blocks[bn].masks.get(c)),
                           layout.section_rows, frames_list[k], writing=False, only=plan.wanted)
        out.append(frame)
    return out
