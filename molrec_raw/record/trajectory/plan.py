"""Planning a read of many frames at once (the read engine's first part; trajectory §9).

:class:`FramePlan` turns frame indices (any order, duplicates allowed) into what they need:
per wanted block the update in effect at each frame (§8: the latest update at or before
it, regular markers or a CSR index) and its row range, per frame the cell update; and
:meth:`FramePlan.needs` the inner chunks of every array those rows (and each per-step meta
key's row) lie in — each chunk once, however many frames share it.  The arithmetic is
vectorised over the frames (one frame: plain integers, cheaper than numpy's per-call
cost); the results are Python lists, what the assembly loops over.  Nothing is read here.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.record.trajectory.blocks import BlockReader
from molrec_raw.record.trajectory.layout import TrajectoryLayout
from molrec_raw.zarr import Array

__all__ = ["BlockPlan", "MetaPlan", "FramePlan", "chunks_of", "Wanted"]

Wanted = Optional[Dict[str, List[str]]]  # block -> columns (None: every column of every block)


class BlockPlan:
    """One block over the planned frames: per frame its update (-1: absent), rows
    ``lo``/``hi`` and ``single`` (the update is in effect at that frame only), as lists;
    the arrays of its wanted columns and of their masks."""

    __slots__ = ("name", "block", "names", "updates", "lo", "hi", "single", "columns", "masks", "span")

    def __init__(self, name: str, block: BlockReader, names: List[str], frames: np.ndarray, nstep: int) -> None:
        self.name, self.block, self.names = name, block, names
        self.columns: List[Tuple[str, Array]] = [(c, block.columns[c]) for c in names if c in block.columns]
        self.masks: List[Tuple[str, Array]] = [(c, block.masks[c]) for c in names if c in block.masks]
        count = block.count
        self.span: Optional[Tuple[int, int]] = None  # (first, end) row when the frames' rows follow each other
        if frames.size == 1:  # plain integers: cheaper than numpy's per-call cost
            i = int(frames[0])
            found = block.update_at(i)
            if found is None:
                self.updates, self.lo, self.hi, self.single = [-1], [0], [0], [False]
                return
            first, last = block.rows(found)
            until = (found + 1 if found + 1 < count else nstep) if block.kind == "regular" else \
                (int(block.ordinals[found + 1]) if found + 1 < count else nstep)
            start = found if block.kind == "regular" else int(block.ordinals[found])
            self.updates, self.lo, self.hi, self.single = [found], [first], [last], [until - start == 1]
            return
        js, lo, hi = block.updates_of(frames)
        present = js >= 0
        if not count:
            single = np.zeros(frames.shape, bool)
        elif block.kind == "regular":  # update j is frame j; the last one is in effect until nstep
            single = present & ((js < count - 1) | (nstep - js == 1))
        else:  # the update is in effect until the next one (the last: until nstep)
            ordinals = block.ordinals
            safe = np.maximum(js, 0)
            after = np.where(safe + 1 < count, ordinals[np.minimum(safe + 1, count - 1)], nstep)
            single = present & (after - ordinals[safe] == 1)
        if bool(present.all()) and bool(np.array_equal(lo[1:], hi[:-1])):
            self.span = (int(lo[0]), int(hi[-1]))
        self.updates, self.lo, self.hi, self.single = js.tolist(), lo.tolist(), hi.tolist(), single.tolist()


class MetaPlan:
    """One per-step meta key: its tag and array (None: declared, never committed)."""

    __slots__ = ("key", "tag", "array")

    def __init__(self, key: str, tag: str, array: Optional[Array]) -> None:
        self.key, self.tag, self.array = key, tag, array


class FramePlan:
    """What reading ``frames`` (in range, non-negative) with the ``wanted`` columns needs
    (see the module docstring); ``meta`` False: without the per-step meta."""

    def __init__(self, layout: TrajectoryLayout, frames: np.ndarray, wanted: Wanted, meta: bool = True) -> None:
        self.layout, self.frames, self.wanted = layout, frames, wanted
        self.frame_list: List[int] = frames.tolist()
        nstep = layout.nstep
        if layout.has_damage:  # a damaged block or column refuses the reads that need it, no other
            for name in layout.schema.block_names():
                if wanted is None or name in wanted:
                    layout.refuse_damaged(name, None if wanted is None else wanted[name])
        self.blocks = [BlockPlan(name, b, list(b.spec.columns) if wanted is None else
                                 [c for c in b.spec.columns if c in wanted[name]], frames, nstep)
                       for name, b in layout.blocks.items() if wanted is None or name in wanted]
        self.meta = [MetaPlan(key, tag, arr) for key, (tag, arr) in layout.meta.items()] if meta else []
        if layout.damaged_arrays:
            layout.refuse_damaged_arrays(mp.array for mp in self.meta if mp.array is not None)
        box = layout.box
        if not box.cells:
            self.cells = [-1] * len(self.frame_list)
        elif frames.size == 1:
            self.cells = [int(np.searchsorted(box.ordinals, self.frame_list[0], side="right")) - 1]
        else:
            self.cells = box.updates_at(frames).tolist()

    def arrays(self) -> List[Array]:
        """Every array the plan reads (columns, masks, meta)."""
        out = [arr for bp in self.blocks for _, arr in (*bp.columns, *bp.masks)]
        return out + [mp.array for mp in self.meta if mp.array is not None]

    def needs(self, rows_of: Dict[str, int]) -> Dict[str, Tuple[Array, List[int]]]:
        """Array path -> (array, the sorted inner chunks the frames need); ``rows_of``:
        path -> rows per inner chunk."""
        out: Dict[str, Tuple[Array, List[int]]] = {}
        one = len(self.frame_list) == 1
        for bp in self.blocks:
            found: Dict[int, List[int]] = {}  # rows per chunk -> chunks (the columns of a block share them)
            for _, arr in (*bp.columns, *bp.masks):
                rows = rows_of[arr.path]
                ids = found.get(rows)
                if ids is None:
                    span = (bp.lo[0], bp.hi[0]) if one else bp.span
                    if span is not None:  # one range of rows
                        ids = list(range(span[0] // rows, (span[1] - 1) // rows + 1)) if span[1] > span[0] else []
                    else:
                        ids = chunks_of(np.asarray(bp.lo, np.int64), np.asarray(bp.hi, np.int64), rows).tolist()
                    found[rows] = ids
                if ids:
                    out[arr.path] = (arr, ids)
        frames = self.frame_list
        ordered = one or (frames[-1] - frames[0] == len(frames) - 1 and bool(np.all(np.diff(self.frames) == 1)))
        for mp in self.meta:
            if mp.array is not None and frames:
                rows = rows_of[mp.array.path]
                if ordered:  # frames first..last in order
                    ids = list(range(frames[0] // rows, frames[-1] // rows + 1))
                else:
                    ids = np.unique(self.frames // rows).tolist()
                out[mp.array.path] = (mp.array, ids)
        return out


def chunks_of(lo: np.ndarray, hi: np.ndarray, rows: int) -> np.ndarray:
    """The sorted, distinct inner chunks (``rows`` rows each) that row ranges ``[lo, hi)``
    touch (empty ranges touch none)."""
    keep = hi > lo
    if not keep.all():
        lo, hi = lo[keep], hi[keep]
    if not lo.size:
        return np.zeros(0, np.int64)
    first, last = lo // rows, (hi - 1) // rows
    if np.array_equal(first, last):
        return np.unique(first)
    counts = last - first + 1
    starts = np.repeat(first - (np.cumsum(counts) - counts), counts)
    return np.unique(starts + np.arange(int(counts.sum()), dtype=np.int64))
