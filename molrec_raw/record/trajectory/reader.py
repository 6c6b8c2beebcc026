"""Random access over a committed trajectory (trajectory §9): ``MrecReader`` reads logical
lengths only (``nstep``; longer arrays are an uncommitted tail, ``trajectory#N1``) and
``read_mrec_trajectory`` loads a whole one.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.record import typed_json
from molrec_raw.record.columns import ZARR_TO_COLUMN
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import recovery
from molrec_raw.record.trajectory.blocks import BlockReader, block_layout, check_column_array
from molrec_raw.record.trajectory.cell import BoxReader
from molrec_raw.record.trajectory.common import TRAJ, is_int, spec_error
from molrec_raw.record.trajectory.meta import META_STORAGE, meta_value, open_meta_array
from molrec_raw.record.trajectory.progressions import check_progression, expand_progression
from molrec_raw.record.trajectory.references import (SystemCounterparts, check_resolved, refuse_aligned_system_names,
                                                     section_rows)
from molrec_raw.record.trajectory.schema import RESERVED_BLOCK_NAMES, SequenceSchema
from molrec_raw.record.trajectory.storage import open_root, read_nstep
from molrec_raw.record.violations import Violation
from molrec_raw.zarr import Array, Group, PathLike

__all__ = ["MrecReader", "Trajectory", "read_mrec_trajectory"]

_CACHED_CHUNKS = 2


class Trajectory:
    """A whole trajectory in memory: ``frames``, ``step`` (i64 array), ``time`` (f64 array or None)."""

    def __init__(self, frames: List[Frame], step: Optional[np.ndarray] = None, time: Optional[np.ndarray] = None) -> None:
        self.frames, self.step, self.time = frames, step, time

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> Frame:
        return self.frames[i]


class MrecReader:
    """Random access over a committed trajectory (§9): ``len``, ``[i]``, iteration."""

    def __init__(self, path: PathLike) -> None:
        self._root = open_root(path, "r")  # R1 version check
        self._open(self._root)

    @classmethod
    def over(cls, root: Group) -> "MrecReader":
        """A reader of the trajectory under an opened record root (its version checked)."""
        self = cls.__new__(cls)
        self._open(root)
        return self

    def _open(self, root: Group) -> None:
        """Open the live state, or the checkpoint's when the live one cannot prove its
        commit (a power cut; trajectory/recovery.py).  Nothing is written."""
        self.source, self.recovery_reason = "live", None
        attempts = recovery.candidates(root)
        for n, attempt in enumerate(attempts):
            try:
                self._load(attempt.root)
                tgroup = attempt.root.get(TRAJ)
                if isinstance(tgroup, Group):
                    recovery.verify_state(tgroup, self._logical, self._arrays, attempt.since, attempt.strict)
            except MolrecError as exc:
                if n == len(attempts) - 1:
                    raise
                self.recovery_reason = f"the live state is not what its commit says ({exc})"
                continue
            self._root, self.source = attempt.root, attempt.source
            return

    def _load(self, root: Group) -> None:
        self._root = root
        tgroup = root.get(TRAJ)
        self._blocks: Dict[str, BlockReader] = {}
        self._schema = SequenceSchema()
        self._nstep = 0
        self._steps: List[int] = []
        self._times: Optional[List[float]] = None
        self._box = BoxReader.__new__(BoxReader)
        self._box.ordinals, self._box.cells, self._box.lengths = np.zeros(0, np.int64), [], {}
        self._meta: Dict[str, Tuple[str, Optional[Array]]] = {}
        self._needs_check = False
        self._cache: Dict[str, "OrderedDict[int, np.ndarray]"] = {}
        self._logical: Dict[str, int] = {}  # array path -> committed rows this reader reads
        self._arrays: Dict[str, Array] = {}  # ... and the arrays it opened for them
        if not isinstance(tgroup, Group):
            return
        if tgroup.get("frames") is not None:
            raise spec_error("R2", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it with 0.13")
        attrs = dict(tgroup.attrs)
        nstep = read_nstep(tgroup, attrs)
        if "sequence_schema" in attrs:
            self._schema = SequenceSchema.from_json(attrs["sequence_schema"])
        else:
            self._schema = derive_schema(tgroup)
        self._nstep = nstep
        self._needs_check = any(self._schema.targets(b) or self._schema.aligned_with(b)
                                for b in self._schema.block_names())
        self._steps = self._series(tgroup, attrs, "step", False, nstep) or []
        self._times = self._series(tgroup, attrs, "time", True, nstep)
        for name in ("step", "time"):
            arr = tgroup.get(name)
            if isinstance(arr, Array) and f"{name}_progression" not in attrs:
                self._logical[arr.path], self._arrays[arr.path] = nstep, arr
        for name in self._schema.block_names():
            group = tgroup.get(name)
            if isinstance(group, Group):
                self._blocks[name] = self._open_block(name, group, nstep)
        refuse_aligned_system_names(self._schema, root, "R16")
        self._section_rows = section_rows(root)
        self._box = BoxReader(tgroup, nstep)
        self._logical.update(self._box.lengths)
        mgroup = tgroup.get("meta")
        for key, tag in self._schema.meta_keys():
            arr = mgroup.get(key) if isinstance(mgroup, Group) else None
            self._meta[key] = (tag, open_meta_array(arr, key, tag, nstep))
            if isinstance(arr, Array):
                self._logical[arr.path], self._arrays[arr.path] = nstep, arr

    @staticmethod
    def _series(tgroup: Group, attrs: Dict[str, Any], name: str, is_float: bool, nstep: int) -> Optional[List[Any]]:
        prog = check_progression(attrs, f"{name}_progression", nstep, is_float)
        if prog is not None:
            return expand_progression(prog, nstep, is_float)
        arr = tgroup.get(name)
        if isinstance(arr, Array):
            if arr.shape[0] < nstep:
                raise spec_error("R6", f"trajectory claims {nstep} committed frames but carries {arr.shape[0]} {name} values")
            return list(np.asarray(arr[0:nstep]).tolist())
        if name == "step":
            return list(range(nstep))
        return None

    def _open_block(self, name: str, group: Group, nstep: int) -> BlockReader:
        spec = self._schema.block_spec(name)
        b = BlockReader(name, spec)
        for column, cspec in spec.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                check_column_array(arr, name, column, cspec.dtype, cspec.trailing, "R12")
                b.columns[column] = arr
        validity = group.get("_validity")
        if isinstance(validity, Group):
            for column in spec.columns:
                arr = validity.get(column)
                if isinstance(arr, Array):
                    if arr.metadata.dtype.name != "bool" or arr.ndim != 1:
                        raise spec_error("R14", f"mask of {column!r} in block {name!r} is not bool[rows]",
                                         f"/trajectory/{name}/_validity/{column}")
                    b.masks[column] = arr
        kind, ordinals, offsets, _ = block_layout(group, name, spec, b.columns, nstep)
        total = int(offsets[-1])
        if len(ordinals) and len(b.columns) < len(spec.columns):
            missing = [c for c in spec.columns if c not in b.columns]
            raise spec_error("R6", f"block {name!r} has updates but no array for column(s) {missing}", f"/trajectory/{name}")
        for arr in list(b.columns.values()):
            if arr.shape[0] < total:
                raise spec_error("R6", f"block {name!r}: {arr.basename} has {arr.shape[0]} rows, offsets claim {total}",
                                 f"/trajectory/{name}/{arr.basename}")
        for arr in b.masks.values():
            if arr.shape[0] < total:
                raise spec_error("R14", f"block {name!r}: mask {arr.basename} is shorter than its {total} rows",
                                 f"/trajectory/{name}/_validity/{arr.basename}")
        b.kind, b.ordinals, b.offsets = kind, ordinals, offsets
        for arr in [*b.columns.values(), *b.masks.values()]:
            self._logical[arr.path], self._arrays[arr.path] = total, arr
        if kind == "indexed":
            self._logical[f"{group.path}/step_index"] = len(ordinals)
            self._logical[f"{group.path}/offset"] = len(ordinals) + 1
        return b

    # ------------------------------------------------------------------ API
    def logical_rows(self) -> Dict[str, int]:
        """Store path -> the committed rows this reader reads, for every array it reads
        (trajectory §11 logical lengths; recovery cuts arrays back to them)."""
        return dict(self._logical)

    def __len__(self) -> int:
        return self._nstep

    @property
    def schema(self) -> SequenceSchema:
        return self._schema.copy()

    @property
    def step(self) -> List[int]:
        return list(self._steps)

    @property
    def time(self) -> Optional[List[float]]:
        return None if self._times is None else list(self._times)

    def block_names(self) -> List[str]:
        return self._schema.block_names()

    def has_block(self, name: str) -> bool:
        """Declared and present with at least one committed update."""
        b = self._blocks.get(name)
        return b is not None and b.ordinals.size > 0

    def _index(self, i: int) -> int:
        if not is_int(i):
            raise TypeError(f"frame index must be an integer, got {type(i).__name__}")
        j = int(i) + self._nstep if i < 0 else int(i)
        if not 0 <= j < self._nstep:
            raise IndexError(f"frame {i} out of range for {self._nstep} frames")
        return j

    def block_update_at(self, name: str, i: int) -> Optional[int]:
        """The update of block ``name`` in effect at frame ``i`` (None before its first)."""
        if not self._schema.has_block(name):
            raise KeyError(f"block {name!r} is not declared")
        b = self._blocks.get(name)
        return None if b is None else b.update_at(self._index(i))

    def box_at(self, i: int) -> Any:
        """The cell at frame ``i``; None before the first cell or past the end."""
        if not is_int(i) or not -self._nstep <= i < self._nstep:
            return None
        return self._box.at(int(i) % self._nstep)

    def read_frame(self, i: int) -> Frame:
        return self._frame(self._index(i), None)

    def read_columns(self, i: int, pairs: Iterable[Tuple[str, str]]) -> Frame:
        """Frame ``i`` with only the named ``(block, column)`` pairs decoded."""
        wanted: Dict[str, List[str]] = {}
        for block, column in pairs:
            if not self._schema.has_block(block) or column not in self._schema.column_names(block):
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            wanted.setdefault(block, []).append(column)
        return self._frame(self._index(i), wanted)

    def _frame(self, i: int, wanted: Optional[Dict[str, List[str]]]) -> Frame:
        blocks: Dict[str, Block] = {}
        for name, b in self._blocks.items():
            if wanted is not None and name not in wanted:
                continue
            j = b.update_at(i)
            if j is None:
                continue
            lo, hi = b.rows(j)
            names = list(b.spec.columns) if wanted is None else [c for c in b.spec.columns if c in wanted[name]]
            columns = {c: self._rows(b.columns[c], lo, hi) for c in names}
            masks = {}
            for c in names:
                if c in b.masks:
                    m = self._rows(b.masks[c], lo, hi)
                    if not m.all():
                        masks[c] = m
            precision = {c: p for c in names if (p := b.spec.columns[c].precision) is not None}
            targets = {c: t for c, t in b.spec.targets.items() if c in names}
            blocks[name] = Block(columns, masks, precision, targets, b.spec.structural_shape, count=hi - lo)
        if self._needs_check:
            rows = {}
            for name, b in self._blocks.items():
                j = b.update_at(i)
                if j is not None:
                    lo, hi = b.rows(j)
                    rows[name] = hi - lo
            only = None if wanted is None else wanted
            check_resolved(self._schema, rows, lambda bn, c: (blocks[bn].columns[c], blocks[bn].masks.get(c)),
                           self._section_rows, i, writing=False, only=only)
        meta: Dict[str, Any] = {}
        for key, (tag, arr) in self._meta.items():
            if arr is not None:
                meta[key] = meta_value(tag, self._rows(arr, i, i + 1)[0], f"/trajectory/meta/{key}")
        return Frame(meta, blocks, self._box.at(i))

    def _rows(self, arr: Array, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi`` through a small cache of decoded inner chunks (2 per array, as the
        reference): consecutive frames usually share a chunk."""
        size = arr.chunks[0]
        first, last = lo // size, (hi - 1) // size
        if hi <= lo or last - first >= _CACHED_CHUNKS:
            return np.asarray(arr[lo:hi])
        cache = self._cache.setdefault(arr.path, OrderedDict())
        parts = []
        for c in range(first, last + 1):
            chunk = cache.get(c)
            if chunk is None:
                chunk = arr[c * size:min((c + 1) * size, arr.shape[0])]
                cache[c] = chunk
                if len(cache) > _CACHED_CHUNKS:
                    cache.popitem(last=False)
            else:
                cache.move_to_end(c)
            parts.append(chunk[max(lo - c * size, 0):min(hi, (c + 1) * size) - c * size])
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)).copy()

    def __getitem__(self, i: int) -> Frame:
        return self.read_frame(i)

    def __iter__(self) -> Iterator[Frame]:
        for i in range(self._nstep):
            yield self._frame(i, None)

    def describe(self) -> Dict[str, Any]:
        """A summary for people and tools (``molrec-raw inspect``): frames, step and time
        ranges, and per block its layout, committed updates, the rows of its last update
        and the rows stored past the committed ones (an uncommitted tail, ``trajectory#N1``);
        the cell's updates and the per-step meta keys."""
        n = self._nstep
        blocks: Dict[str, Any] = {}
        tail = False
        for name in self._schema.block_names():
            b = self._blocks.get(name)
            if b is None:
                blocks[name] = {"layout": "none", "updates": 0, "last_rows": None, "uncommitted_rows": 0}
                continue
            stored = max((a.shape[0] for a in [*b.columns.values(), *b.masks.values()]), default=0)
            extra = max(0, stored - int(b.offsets[-1]))
            tail = tail or extra > 0
            updates = len(b.ordinals)
            lo, hi = b.rows(updates - 1) if updates else (0, 0)
            blocks[name] = {"layout": b.kind, "updates": updates, "last_rows": hi - lo if updates else None,
                            "uncommitted_rows": extra}
        series_lengths = [arr.shape[0] for _, arr in self._meta.values() if arr is not None]
        tgroup = self._root.get(TRAJ)
        if isinstance(tgroup, Group):
            series_lengths += [a.shape[0] for a in (tgroup.get("step"), tgroup.get("time")) if isinstance(a, Array)]
        tail = tail or any(length > n for length in series_lengths)
        times = self._times
        return {"nstep": n, "steps": [self._steps[0], self._steps[-1]] if n else None,
                "times": [times[0], times[-1]] if n and times is not None else None,
                "blocks": blocks, "box_updates": len(self._box.cells), "meta_keys": list(self._meta),
                "uncommitted_tail": tail}

    def verify(self, progress: Optional[Callable[[int, int], None]] = None) -> List[Violation]:
        """Check the whole committed trajectory, not only what opening checks: resolve every
        frame (every stored chunk a frame uses is decoded, so checksums are verified, and row
        references and alignments are checked, ``trajectory#R16``/``#R17``) and every update
        of a block named like a system block (§8.8).  One violation per rule and node, saying
        how many frames share it; ``progress(done, total)`` is called as frames resolve."""
        found: Dict[Tuple[str, str], List[Any]] = {}

        def note(exc: MolrecError) -> None:
            key = (exc.rule or type(exc).__name__, exc.node or "/trajectory")
            found.setdefault(key, [exc.message, 0])[1] += 1

        system = SystemCounterparts(self._schema, self._root)
        for name, b in self._blocks.items():
            if name not in system:
                continue
            for j, ordinal in enumerate(b.ordinals.tolist()):
                lo, hi = b.rows(j)
                try:
                    ids = self._rows(b.columns["id"], lo, hi) if "id" in b.columns and hi > lo else None
                    system.check(name, hi - lo, ids, f"trajectory frame {ordinal}")
                except MolrecError as exc:
                    note(exc)
        for i in range(self._nstep):
            try:
                self._frame(i, None)
            except MolrecError as exc:
                note(exc)
            if progress is not None:
                progress(i + 1, self._nstep)
        return [Violation(rule, node, message if count == 1 else f"{message} (and {count - 1} more like it)")
                for (rule, node), (message, count) in found.items()]

    def recovery_violations(self) -> List[Violation]:
        """``trajectory#10``: the live state is damaged (a power cut) and other readers would
        not read what this one reads from the checkpoint — ``molrec-raw repair`` puts it
        back.  Empty when the live state is what the last commit says."""
        if self.source != "checkpoint":
            return []
        root = self._root
        base = getattr(root.store, "base", None)
        live = root if base is None else Group(base, root.path, root.metadata, read_only=True, threads=1)
        plan = recovery.plan_recovery(live, self.source, self.recovery_reason, self._nstep, self.logical_rows())
        if not plan.actions:
            return []
        return [Violation(recovery.RULE, "/trajectory",
                          f"the record needs repair: {self.recovery_reason or 'its live state is damaged'}; "
                          f"readers here use its checkpoint ({self._nstep} committed frames), other readers "
                          f"would not ({len(plan.actions)} change(s); run `molrec-raw repair`)")]

    def close(self) -> None:
        self._root.store.close()

    def __enter__(self) -> "MrecReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def derive_schema(tgroup: Group) -> SequenceSchema:
    """A store without a pin (``trajectory#N3``): blocks = non-reserved child groups,
    columns = their non-reserved arrays (stored dtype and trailing), nullable = a mask."""
    schema = SequenceSchema()
    for name, node in tgroup.members():
        if not isinstance(node, Group) or name in RESERVED_BLOCK_NAMES:
            continue
        schema.declare_block(name)
        validity = node.get("_validity")
        for column, arr in node.members():
            if not isinstance(arr, Array) or column in ("offset", "step_index"):
                continue
            dtype = ZARR_TO_COLUMN.get(arr.metadata.dtype.name)
            if dtype is None:
                raise spec_error("R12", f"column {column!r} of block {name!r} is stored as {arr.metadata.dtype.name}",
                                 f"/trajectory/{name}/{column}")
            schema.declare_column(name, column, dtype, arr.shape[1:])
            if isinstance(validity, Group) and validity.get(column) is not None:
                schema.declare_nullable(name, column)
        shape = node.attrs.get("structural_shape")
        if shape is not None:
            schema.declare_structural_shape(name, shape)
    mgroup = tgroup.get("meta")
    if isinstance(mgroup, Group):
        for key, arr in mgroup.members():
            if isinstance(arr, Array):
                tag = arr.attrs.get("meta_dtype")
                tag = typed_json.LEGACY_TAGS.get(tag, tag) if isinstance(tag, str) else tag
                if tag not in META_STORAGE:
                    raise spec_error("R10", f"meta array {key!r} has no valid meta_dtype ({tag!r})", f"/trajectory/meta/{key}")
                schema.declare_meta(key, tag)
    return schema


def read_mrec_trajectory(path: PathLike) -> Trajectory:
    """The whole trajectory (0 frames when the record has no trajectory section)."""
    with MrecReader(path) as reader:
        frames = list(reader)
        times = reader.time
        return Trajectory(frames, np.asarray(reader.step, dtype=np.int64),
                          None if times is None else np.asarray(times, dtype=np.float64))
