"""``CollectionReader.batch``: many records' frame ``k`` gathered into flat arrays out of one
read transaction (lmdb.md).  Records whose values share a layout the reader has checked
(``LayoutCache.quick``) are gathered by the layout's flat columns, straight out of the map,
concatenated once; any other record is read one by one as a single read reads it (every
refusal is a single read's: the value's rules ``lmdb#L9``–``lmdb#L17``, the pair of a system
block and its trajectory block ``collection#C9``/``#C10``).  The result is the reader's view:
``"<block>/<column>"``, ``"n_<block>"``, per-step meta, ``step``, ``time``, the cells, ``record``.
"""
from __future__ import annotations

import operator
import struct
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError
from molrec_raw.record import typed_json
from molrec_raw.record.columns import column_dtype_of
from molrec_raw.record.model import Block, Box
from molrec_raw.record.trajectory.meta import META_STORAGE
from molrec_raw.collection.binding import FRAME, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import _OBJECT, _strings, frame_layout, made_block
from molrec_raw.collection.layout_cache import LayoutCache, joined_text, string_lists
from molrec_raw.collection.model import C2, C9, C10
from molrec_raw.collection.records import RecordTrajectory, _check_pair
from molrec_raw.collection.transaction import Getter, _Reading

if TYPE_CHECKING:
    from molrec_raw.collection.reader import CollectionReader

__all__: List[str] = []

_NO_META: Dict[str, Any] = {"meta": {}}  # a system header's members when it has no meta (compared, never handed out)
_UNFILLED = np.empty(0, object)  # a batch column made whole later (never handed out)
_KEY = struct.Struct(">cQ").pack  # a record's key: its prefix, a big-endian u64 (binding.key, lmdb#L2)


class _Batch:
    """``CollectionReader.batch``: gathers each record's arrays out of one transaction (views
    into the map, checked as every read is), concatenates once at the end."""

    def __init__(self, reader: CollectionReader, numbers: List[int], frame: Optional[int]) -> None:
        if frame is not None:
            frame = operator.index(frame)
        self.c, self.numbers, self.frame = reader, numbers, frame

    def gather(self, reading: _Reading) -> Dict[str, np.ndarray]:
        if self.frame in (0, None) and not self.c._resolved_check:
            fast = self._by_layout(reading)
            if fast is not None:
                return fast
        return self._one_by_one(reading)

    def _by_layout(self, reading: _Reading) -> Optional[Dict[str, np.ndarray]]:
        """The batch when every record's system and first frame have layouts without bools,
        masks or targets (None otherwise: :meth:`_one_by_one` reads it).  Each value's header
        is checked as a single read checks it (the layout's own checks once per layout, by
        the same code; a value whose header matches a checked layout's text by
        :meth:`LayoutCache.quick`); the payloads of the records sharing a pair of layouts
        are joined into one buffer and each column is one strided copy out of it."""
        c, frame, numbers = self.c, self.frame, self.numbers
        txn_get, where = reading.txn.get, c._where
        s_quick, f_quick = c._layouts.quick, c._frame_layouts.quick
        trajectory = frame is not None
        pairs: Dict[Tuple[Any, Any], List[int]] = {}
        payloads: Tuple[List[Any], List[Any]] = ([], [])
        strings: Tuple[List[Any], List[Any]] = ([], [])
        meta: List[Dict[str, Any]] = []
        steps: List[int] = []
        times: List[Optional[float]] = []
        boxes: List[Optional[Box]] = []
        counts = c._count[numbers].tolist() if trajectory else ()
        firsts = c._first[numbers].tolist() if trajectory else ()
        tags = c._meta_tags.keys()
        update: Tuple[Dict[str, Any], int, Optional[float], Optional[Box]]
        last: Any = None
        group: List[int] = []
        s_raws = [txn_get(_KEY(SYSTEM, r)) for r in numbers]
        s_hits: List[Any] = [None if raw is None else s_quick(raw, False) for raw in s_raws]
        flat = _parse_strings(s_hits)
        f_raws: List[Any] = []
        f_hits: List[Any] = []
        if trajectory:
            f_raws = [txn_get(_KEY(FRAME, first)) for first in firsts]
            f_hits = [None if raw is None else f_quick(raw) for raw in f_raws]
            if numbers and 0 not in counts:
                done = self._uniform(s_raws, s_hits, f_raws, f_hits, flat)
                if done is not None:
                    return done
        for i, r in enumerate(numbers):
            s_layout = f_layout = s_part = f_part = s_strings = f_strings = None
            raw = s_raws[i]
            if raw is not None:
                hit = s_hits[i]
                if hit is not None and "system" in hit[0].makers and (not hit[1] or hit[1] == _NO_META or (
                        hit[1].get("step") is None and hit[1].get("time") is None and hit[1].get("box") is None)):
                    s_layout, _, s_strings, at = hit
                else:
                    s_layout, s_strings, at = self._system_value(raw, r)
                    if s_layout is None:
                        return None
                s_part = raw[at:at + s_layout.need]
            if trajectory:
                if counts[i] == 0:
                    raise InvalidValueError(f"batch: record {r} has 0 frames, no frame {frame}", store=where,
                                            node=f"/records/{r}/trajectory")
                raw = f_raws[i]
                hit = f_hits[i]
                if hit is not None and "trajectory" in hit[0].makers:
                    f_layout, head, f_strings, at = hit
                    step, f_meta = head.get("step"), head.get("meta")
                    if type(step) is int and -(2**53) <= step <= 2**53 and type(f_meta) is dict and \
                            f_meta.keys() == tags and len(head) == 2:  # meta, step: nothing to decode
                        update = (f_meta, step, None, None)
                    else:
                        fk = FRAME + firsts[i].to_bytes(8, "big")
                        try:
                            update = c._header_update(head, f_layout, r, 0, f"/records/{r}/trajectory")
                        except MolrecError as exc:
                            raise exc.add_context(store=where, key=key_name(fk)) from None
                else:
                    f_layout, f_strings, at, update = self._frame_value(raw, r, FRAME + firsts[i].to_bytes(8, "big"),
                                                                        txn_get)
                    if f_layout is None:
                        return None
                f_part = raw[at:at + f_layout.need]
                meta.append(update[0])
                steps.append(update[1])
                times.append(update[2])
                boxes.append(update[3])
            pair = (s_layout, f_layout)
            if pair != last:
                found = pairs.get(pair)
                if found is None:
                    found = pairs[pair] = []
                    if s_layout is not None and f_layout is not None:
                        c._check_layout_pair(s_layout, f_layout, r)
                group, last = found, pair
            group.append(i)
            payloads[0].append(s_part)
            payloads[1].append(f_part)
            strings[0].append(s_strings)
            strings[1].append(f_strings)
        return self._assemble(pairs, payloads, strings, meta, steps, times, boxes, flat)

    def _uniform(self, s_raws: List[Any], s_hits: List[Any], f_raws: List[Any], f_hits: List[Any],
                 flat: Optional[str], first: Optional[Tuple[CollectionReader, int]] = None
                 ) -> Optional[Dict[str, np.ndarray]]:
        """:meth:`_by_layout` of a batch whose systems all matched one layout checked as a
        system's, with one header (``LayoutCache.quick`` hands the same members for the same
        text), and whose first frames all matched one layout checked as a trajectory's, each
        with its step and the declared meta keys only — what the per-record loop does, a
        column of checks at a time.  None when the batch is otherwise.  ``first``: the
        reader and record the pair of layouts is checked at (``collection#C9``/``#C10``; by
        default this batch's reader and first record)."""
        s_hit, f_hit = s_hits[0], f_hits[0]
        if s_hit is None or f_hit is None:
            return None
        s_layout, s_head, f_layout = s_hit[0], s_hit[1], f_hit[0]
        if "system" not in s_layout.makers or "trajectory" not in f_layout.makers or not (
                not s_head or s_head == _NO_META) or not all(
                hit is not None and hit[0] is s_layout and hit[1] is s_head for hit in s_hits) or not all(
                hit is not None and hit[0] is f_layout and len(hit[1]) == 2 for hit in f_hits):
            return None
        heads = [hit[1] for hit in f_hits]
        steps = [head.get("step") for head in heads]
        meta = [head.get("meta") for head in heads]
        tags = self.c._meta_tags.keys()
        if not all(type(step) is int and -(2**53) <= step <= 2**53 for step in steps) or not all(
                type(m) is dict and m.keys() == tags for m in meta):
            return None
        n = len(s_hits)
        need = f_layout.need
        f_parts = [raw[hit[3]:hit[3] + need] for raw, hit in zip(f_raws, f_hits)]
        need = s_layout.need
        s_parts = [raw[hit[3]:hit[3] + need] for raw, hit in zip(s_raws, s_hits)] if need else [b""] * n
        reader, r = (self.c, self.numbers[0]) if first is None else first
        reader._check_layout_pair(s_layout, f_layout, r)
        nothing: List[Any] = [None] * n
        return self._assemble({(s_layout, f_layout): list(range(n))}, (s_parts, f_parts),
                              ([hit[2] for hit in s_hits], nothing), meta, steps, nothing, nothing, flat)

    def _system_value(self, raw: Any, r: int) -> Tuple[Any, Any, int]:
        """A system value of a batch read through :func:`frame_layout` (a layout not yet
        checked, or a header text not remembered): (its layout, its header, the payload's
        offset) — a layout None when the batch is to be read one by one."""
        c, sk = self.c, SYSTEM + r.to_bytes(8, "big")
        try:
            header, at, layout = frame_layout(raw, f"/records/{r}/system", c._layouts, True)
        except MolrecError as exc:
            raise exc.add_context(store=c._where, key=key_name(sk)) from None
        if not layout.checked.get("system") or len(header) > 1 and (
                header.get("step") is not None or header.get("time") is not None or header.get("box") is not None):
            c._system_blocks(raw, r)  # the single read's checks (they refuse, or mark the layout)
        return (None if layout.flat() is None else layout), header, at

    def _frame_value(self, raw: Any, r: int, fk: bytes,
                     txn_get: Getter) -> Tuple[Any, Any, int, Tuple[Dict[str, Any], int, Optional[float], Optional[Box]]]:
        """A first frame of a batch read through :func:`frame_layout`: (its layout or None as
        :meth:`_system_value`'s, its header, the payload's offset, (meta, step, time, cell))."""
        c = self.c
        if raw is None:
            c._update(txn_get, r, 0)  # refuses: the frame is missing
        node = f"/records/{r}/trajectory"
        try:
            header, at, layout = frame_layout(raw, node, c._frame_layouts, c._strings_in_frames)
            update = c._header_update(header, layout, r, 0, node)
        except MolrecError as exc:
            raise exc.add_context(store=c._where, key=key_name(fk)) from None
        if not layout.checked.get("trajectory"):
            c._update(txn_get, r, 0)  # the single read's checks (they refuse, or mark the layout)
        return (None if layout.flat() is None else layout), header, at, update

    def _assemble(self, pairs: Dict[Tuple[Any, Any], List[int]], payloads: Tuple[List[Any], List[Any]],
                  headers: Tuple[List[Any], List[Any]], meta: List[Dict[str, Any]], steps: List[int],
                  times: List[Optional[float]], boxes: List[Optional[Box]],
                  flat_strings: Optional[str] = None) -> Dict[str, np.ndarray]:
        """The flat arrays of :meth:`_by_layout` (inside the transaction: the parts are views
        into the map; every array made here is new).  ``flat_strings``: every system's string values
        in record order, joined, as :func:`_parse_strings` gives them."""
        c, numbers = self.c, self.numbers
        n = len(numbers)
        rows: Dict[str, np.ndarray] = {}  # block -> rows per batch position
        kinds: Dict[Tuple[str, str], Tuple[Any, Tuple[int, ...]]] = {}
        for (s_layout, f_layout), group in pairs.items():
            for layout in (s_layout, f_layout):
                if layout is None:
                    continue
                for b in layout.blocks:
                    counts = rows.get(b.name)
                    if counts is None:
                        counts = rows[b.name] = np.zeros(n, np.int64)
                    if len(group) == n:
                        counts[:] = b.count
                    else:
                        counts[group] = b.count
                for col in layout.flat():
                    kind = (_OBJECT if col.strings else col.dtype, col.trailing)
                    have = kinds.setdefault((col.block, col.name), kind)
                    if have != kind:
                        r = numbers[group[0]]
                        raise SpecViolationError(f"batch: column {col.block}/{col.name} is {_kind_name(kind)} in record "
                                                 f"{r} and {_kind_name(have)} in another", store=c._where,
                                                 node=f"/records/{r}/{col.block}/{col.name}", rule=C2)
        starts = {name: np.concatenate([[0], np.cumsum(counts)]) for name, counts in rows.items()}
        out: Dict[str, np.ndarray] = {}
        for (block, column), (dtype, trailing) in kinds.items():
            total = int(starts[block][-1])
            out[f"{block}/{column}"] = _UNFILLED if dtype is _OBJECT and len(pairs) == 1 and not trailing else \
                np.empty((total,) + trailing, dtype)  # (a string column of one group: made whole below)
        filled: Dict[str, int] = {}
        for (s_layout, f_layout), group in pairs.items():
            whole = len(group) == n
            for side, layout in ((0, s_layout), (1, f_layout)):
                if layout is None:
                    continue
                flat = layout.flat()
                numeric = [col for col in flat if not col.strings]
                if numeric:
                    width = layout.need
                    parts = payloads[side]
                    joined = np.frombuffer(b"".join(parts if whole else [parts[i] for i in group]), np.uint8).reshape(
                        len(group), width)
                for col in flat:
                    label = f"{col.block}/{col.name}"
                    target = out[label]
                    filled[label] = filled.get(label, 0) + len(group) * col.rows
                    if col.strings:
                        values: List[str] = []
                        if side == 0 and flat_strings is not None:  # (split here: no list of them held long)
                            values = flat_strings.split('","')
                            if not whole:
                                values = [v for i in group for v in values[i * col.count:(i + 1) * col.count]]
                        else:
                            for i in group:  # (a list: the values LayoutCache.quick checked; else the header)
                                held = headers[side][i]
                                values += held if type(held) is list else _string_values(held, col, c._where,
                                                                                         numbers[i], side)
                        source = np.fromiter(values, _OBJECT, len(values))
                        if whole and not col.trailing:
                            out[label] = source
                            continue
                    else:
                        nbytes = col.count * col.dtype.itemsize
                        source = joined[:, col.start:col.start + nbytes].view(col.dtype)
                    source = source.reshape((len(group) * col.rows,) + col.trailing)
                    if whole:
                        target[...] = source
                    else:
                        lo = starts[col.block][group]
                        index = (lo[:, None] + np.arange(col.rows)).ravel()
                        target[index] = source
        for label, target in out.items():
            if filled.get(label, 0) != target.shape[0]:  # some record's block has rows but not this column
                block, column = label.split("/", 1)
                lacking = next(numbers[i] for (s_l, f_l), group in pairs.items() for i in group
                               if rows[block][i] and not any(col.block == block and col.name == column
                                                             for layout in (s_l, f_l) if layout is not None
                                                             for col in layout.flat()))
                raise SpecViolationError(f"batch: record {lacking}'s block {block!r} has no column {column!r}, "
                                         "which other records' have", store=c._where,
                                         node=f"/records/{lacking}/{block}/{column}", rule=C2)
        for name, counts in rows.items():
            out[f"n_{name}"] = counts
        if self.frame is not None:
            _per_step(out, c, meta, steps, times, boxes)
        out["record"] = np.asarray(numbers, dtype=np.int64)
        return out

    def _one_by_one(self, reading: _Reading) -> Dict[str, np.ndarray]:
        c, frame = self.c, self.frame
        get = reading.get
        pieces: Dict[Tuple[str, str], List[np.ndarray]] = {}
        present: Dict[Tuple[str, str], List[int]] = {}  # the batch positions that have the column
        masks: Dict[Tuple[str, str], Dict[int, np.ndarray]] = {}
        kinds: Dict[Tuple[str, str], Tuple[np.dtype, Tuple[int, ...]]] = {}
        rows: Dict[str, List[int]] = {}
        meta: List[Dict[str, Any]] = []
        steps: List[int] = []
        times: List[Optional[float]] = []
        boxes: List[Optional[Box]] = []
        n = len(self.numbers)
        trusted: Set[Any] = set()  # (system layout, frame layout) pairs whose columns were checked in this batch
        for i, r in enumerate(self.numbers):
            system = c._system_blocks(get(key(SYSTEM, r)), r)
            blocks: Dict[str, Block] = {} if system is None else system.blocks
            pair: Any = None
            if frame is not None:
                count = int(c._count[r])
                k = frame + count if frame < 0 else frame
                if not 0 <= k < count:
                    raise InvalidValueError(f"batch: record {r} has {count} frames, no frame {frame}", store=c._where,
                                            node=f"/records/{r}/trajectory")
                if k == 0:
                    update = c._update(get, r, 0)
                    own, box = update.blocks, update.box
                    meta.append(update.meta)
                    steps.append(update.step)
                    times.append(update.time)
                    if c._resolved_check:
                        RecordTrajectory(c, r, None)._check(own, 0)
                    if update.layout is not None:
                        pair = (None if system is None else system.layout, update.layout)
                else:
                    trajectory = RecordTrajectory(c, r, None)
                    resolved = trajectory._resolve(reading, k, meta=False)
                    own, box = resolved.blocks, resolved.box
                    meta.append(resolved.meta)
                    steps.append(trajectory._steps[k])
                    times.append(trajectory._times[k])
                boxes.append(box)
                for name, block in own.items():  # the reader's view (``blocks`` is this decode's own dict)
                    base = blocks.get(name)
                    if base is not None:
                        _check_pair(base, block, c._where, r, name)
                        block = made_block({**base.columns, **block.columns}, {**base.masks, **block.masks}, {}, {},
                                           None, {}, base.nrows)
                    blocks[name] = block
            elif system is not None:
                pair = (system.layout, None)
            checked = pair is not None and pair in trusted
            for name, block in blocks.items():
                counts = rows.get(name)
                if counts is None:
                    counts = rows[name] = [0] * n
                counts[i] = block.nrows
                block_masks = block.masks
                for column, values in block.columns.items():
                    label = (name, column)
                    if not checked:
                        kind = (values.dtype, values.shape[1:])
                        have = kinds.setdefault(label, kind)
                        if have != kind:
                            raise SpecViolationError(f"batch: column {name}/{column} is {column_dtype_of(values)}"
                                                     f"{list(kind[1])} in record {r} and {have[0]}{list(have[1])} in "
                                                     "an earlier one", store=c._where,
                                                     node=f"/records/{r}/{name}/{column}", rule=C2)
                    found = pieces.get(label)
                    if found is None:
                        found = pieces[label] = []
                        present[label] = []
                    if block_masks and column in block_masks:
                        masks.setdefault(label, {})[len(found)] = block_masks[column]
                    found.append(values)
                    present[label].append(i)
            if pair is not None:
                trusted.add(pair)
        out: Dict[str, np.ndarray] = {}
        for label, arrays in pieces.items():
            name, column = label
            counts = rows[name]
            if len(arrays) != n:
                has = set(present[label])
                lacking = [self.numbers[j] for j, count in enumerate(counts) if count and j not in has]
                if lacking:
                    raise SpecViolationError(f"batch: record {lacking[0]}'s block {name!r} has no column {column!r}, "
                                             "which other records' have", store=c._where,
                                             node=f"/records/{lacking[0]}/{name}/{column}", rule=C2)
            out[f"{name}/{column}"] = np.concatenate(arrays)
            if label in masks:
                flags = [masks[label].get(at, np.ones(a.shape[0], bool)) for at, a in enumerate(arrays)]
                out[f"{name}/_validity/{column}"] = np.concatenate(flags)
        for name, counts in rows.items():
            out[f"n_{name}"] = np.asarray(counts, dtype=np.int64)
        if frame is not None:
            _per_step(out, c, meta, steps, times, boxes)
        out["record"] = np.asarray(self.numbers, dtype=np.int64)
        return out


def gather_across(readers: List[CollectionReader], which: np.ndarray, records: np.ndarray,
                  numbers: List[int]) -> Optional[Dict[str, np.ndarray]]:
    """``CollectionReader.batch`` of frame 0 over many readers of one declaration that share
    one pair of layout caches (a dataset's shards, ``dataset#D3``), assembled once: the
    batch's record ``i`` is record ``records[i]`` of ``readers[which[i]]``, ``numbers`` the
    batch's ``"record"`` column.  The values are read in the batch's order, in one
    transaction per reader (all open until the assembly has copied them); when every record
    is what :meth:`_Batch._uniform` reads (one checked system layout without meta, one
    checked trajectory layout with its step and the declared meta keys), its checks and its
    assembly are one batch's over all of them — the arrays one collection's batch of these
    values gives (the pair of layouts checked at ``readers[0]``'s first record in the
    batch).  None otherwise (nothing is refused here: the caller reads reader by reader,
    whose checks name what is wrong)."""
    c = readers[0]
    if any(reader._layouts is not c._layouts or reader._frame_layouts is not c._frame_layouts
           or reader._resolved_check for reader in readers):
        return None
    firsts = np.empty(len(numbers), np.int64)
    gets: List[Getter] = []
    readings: List[_Reading] = []
    try:
        for j, reader in enumerate(readers):
            mine = which == j
            own = records[mine]
            if not reader._count[own].all():
                return None
            firsts[mine] = reader._first[own]
            reading = _Reading(reader._env(), False)
            readings.append(reading)
            gets.append(reading.txn.get)
        s_quick, f_quick = c._layouts.quick, c._frame_layouts.quick
        at = which.tolist()
        # each value matched while it is in the CPU's cache; a missing value has no hit (_uniform: None)
        s_raws = [gets[j](_KEY(SYSTEM, r)) for j, r in zip(at, records.tolist())]
        s_hits = [None if raw is None else s_quick(raw, False) for raw in s_raws]
        f_raws = [gets[j](_KEY(FRAME, first)) for j, first in zip(at, firsts.tolist())]
        f_hits = [None if raw is None else f_quick(raw) for raw in f_raws]
        flat = _parse_strings(s_hits)
        first = (c, int(records[at.index(0)]))
        return _Batch(c, numbers, 0)._uniform(s_raws, s_hits, f_raws, f_hits, flat, first)
    finally:
        for reading in readings:
            reading.close()


def _parse_strings(hits: List[Any]) -> Optional[str]:
    """The string values of a batch's ``LayoutCache.quick(value, parse=False)`` hits parsed
    and checked (by the layouts' counts): a hit whose values are not ``count`` strings
    becomes None (its value is read the general way, which names what is wrong).  When
    every record is a hit of one count read by :func:`joined_text`: that text (split at
    ``","``, record ``i``'s strings are ``[i * count:(i + 1) * count]``), the hits keep their
    texts."""
    layout = hits[0][0] if hits and hits[0] is not None else None
    if layout is not None and layout.strings_count is not None and all(
            hit is not None and hit[0] is layout for hit in hits):
        flat = joined_text([hit[2] for hit in hits], layout.strings_count)
        if flat is not None:
            return flat
    texts: Dict[int, List[int]] = {}
    for i, hit in enumerate(hits):
        if hit is not None and hit[2] is not None:
            texts.setdefault(hit[0].strings_count, []).append(i)
    for count, where in texts.items():
        for i, values in zip(where, string_lists([hits[i][2] for i in where], count)):
            hit = hits[i]
            hits[i] = None if values is None else (hit[0], hit[1], values, hit[3])
    return None


def _per_step(out: Dict[str, np.ndarray], c: CollectionReader, meta: List[Dict[str, Any]], steps: List[int],
              times: List[Optional[float]], boxes: List[Optional[Box]]) -> None:
    """A batch's per-step arrays: each declared meta key, ``step``, ``time`` (when every
    record has one), the cells (when a record has one)."""
    for name, tag in c._meta_tags.items():
        out[name] = _meta_array(tag, [m[name] for m in meta], name)
    out["step"] = np.asarray(steps, dtype=np.int64)
    if times and all(t is not None for t in times):
        out["time"] = np.asarray(times, dtype=np.float64)
    if any(b is not None for b in boxes):
        out["box/vectors"] = np.stack([np.eye(3) if b is None else b.vectors for b in boxes])
        out["box/origin"] = np.stack([np.zeros(3) if b is None else b.origin for b in boxes])
        out["box/boundary"] = np.asarray([(False,) * 3 if b is None else b.boundary for b in boxes], bool)
        out["box/cell_defined"] = np.asarray([b is not None and b.defined for b in boxes], bool)


def _kind_name(kind: Tuple[Any, Tuple[int, ...]]) -> str:
    return f"{'string' if kind[0] == _OBJECT else column_dtype_of(np.empty(0, kind[0]))}{list(kind[1])}"


def _string_values(header: Dict[str, Any], col: Any, where: str, r: int, side: int) -> List[str]:
    """A string column's header values in a batch, checked as a single read checks them."""
    values: List[str] = header["blocks"][col.block]["columns"][col.name].get("values")
    try:
        good = type(values) is list and len(values) == col.count and type("".join(values)) is str
    except TypeError:  # a non-string among them
        good = False
    if not good:
        node = f"/records/{r}/{'trajectory' if side else 'system'}/{col.block}/{col.name}"
        try:
            _strings(values, col.count, (col.rows,) + col.trailing, node)
        except MolrecError as exc:
            raise exc.add_context(store=where) from None
    return values


def _meta_array(tag: str, raw: List[Any], name: str) -> np.ndarray:
    """One per-step meta key over a batch (typed JSON forms decoded), shaped by its tag."""
    dtype, trailing = META_STORAGE[tag]
    if tag == "f64" and set(map(type, raw)) <= {float}:
        return np.asarray(raw, dtype=np.float64)
    values = [typed_json.decode_value(tag, v, f"/meta/{name}") for v in raw]
    if tag == "json":
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = v
        return out
    return np.asarray(values, dtype=dtype).reshape((len(values),) + trailing)
