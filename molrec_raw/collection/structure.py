"""The structure of an LMDB data file, checked in Python before liblmdb maps it
(``lmdb#L18``, ``lmdb#L19``; spec-notes/safety.md "Opening any collection file").

liblmdb trusts its file: it maps it and follows the page numbers it finds, so a file cut short
or a damaged page number makes it touch memory past the file's end (SIGBUS) or trip its own
assertions (SIGABRT) — no Python runs there to turn that into an error.  :func:`check_file`
reads, with ordinary ``pread`` calls (never a map of the unchecked file), everything a read
transaction will follow:

* both meta pages (pages 0 and 1: the ``P_META`` flag, magic ``0xBEEFC0DE``, data version 1,
  a page size LMDB writes), and the one a reader takes — the larger transaction id, page 0 on
  a tie, as liblmdb picks it; the file holds the ``last_pg + 1`` pages that meta page claims
  (``lmdb#L18``: else the file looks cut short);
* every branch and leaf page reachable from the main database's root: the page number inside
  the snapshot and the page saying it is that page, its flags (branch above the leaf level the
  meta page's depth names, leaf there; no ``P_LEAF2``/``P_SUBP``), its node pointers and nodes
  inside the page, at least two children per branch page (liblmdb asserts it), keys strictly
  in order across the whole tree, plain or ``F_BIGDATA`` values only (a collection's one
  unnamed database has no sub-databases or duplicates), each big value's overflow run inside
  the snapshot, no page reached twice (no tree page twice, no two runs or a run and a tree page
  sharing a page), the depth at most 32 (liblmdb's cursor stack), and the database's page and
  entry counts matching the tree (``lmdb#L19``).

The free-page database is not walked: a read transaction never reads it (liblmdb reads it
only to allocate pages in a write transaction, and a collection is never opened for writing
once written: its writer creates the file).  Overflow runs are bounds-checked, never read (not
even their first page's header: a reader takes a big value's length from its leaf node and its
bytes from after that header, and never looks at the rest): the cost grows with the tree's
pages, not with the values' bytes.  Once the size is checked the file is mapped read-only and each level
of the tree is parsed in blocks of pages with numpy: one gather of fixed-width byte windows
per pass (page headers; each node's header with its key; big values' page numbers), the keys
compared as rows of big-endian words, no Python object per page or node.

The layout is the platform's own (liblmdb's files are not portable across word sizes or byte
orders): 64-bit page numbers and a 16-byte page header on a 64-bit build, 32-bit and 12 bytes
on a 32-bit one, in native byte order.
"""
from __future__ import annotations

import functools
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, UnsupportedFeatureError

__all__ = ["check_file", "Structure", "WHOLE", "PAGES", "MAGIC", "PAGE_HEADER", "META"]

WHOLE = "lmdb#L18"  # the file is an LMDB data file, whole: meta pages, size
PAGES = "lmdb#L19"  # every page a reader follows is one LMDB writes

MAGIC = 0xBEEFC0DE
DATA_VERSION = 1
NUM_METAS = 2
P_INVALID_64, P_INVALID_32 = (1 << 64) - 1, (1 << 32) - 1
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 0x01, 0x02, 0x04, 0x08
F_BIGDATA = 0x01
NODE_HEADER = 8  # mn_lo, mn_hi, mn_flags, mn_ksize (u16 each)
MAX_DEPTH = 32  # liblmdb's CURSOR_STACK
MAX_KEY = 64  # a collection's keys have at most 9 bytes (lmdb#L2); longer ones are not a collection's
_BLOCK = 4096  # pages parsed together
_READ_WHOLE = 1 << 18  # a snapshot of at most this many bytes is read whole, a larger one mapped
_NODE_READ = 32  # bytes read at each node: its header and, for keys of at most 24 bytes, its key
PAGE_SIZES = frozenset(1 << n for n in range(9, 17))  # 512 .. 65536 (liblmdb writes the OS page size, <= 32 KiB)

_WORD = struct.calcsize("P")
_PGNO = "Q" if _WORD == 8 else "I"
P_INVALID = P_INVALID_64 if _WORD == 8 else P_INVALID_32
# MDB_page: mp_pgno (pgno_t), mp_pad (u16), mp_flags (u16), mp_lower / mp_upper (u16) — or mp_pages (u32)
PAGE_HEADER = struct.Struct(f"={_PGNO}HHHH")
_OVERFLOW_HEADER = struct.Struct(f"={_PGNO}HHI")
# MDB_meta after the page header: magic, version, address, mapsize, the free and the main MDB_db
# (md_pad u32, md_flags u16, md_depth u16, branch, leaf, overflow pages, entries, root), last_pg, txnid
_DB = f"IHH{_PGNO * 5}"
META = struct.Struct(f"=II{_PGNO}{_PGNO}{_DB}{_DB}{_PGNO}{_PGNO}")
_NODE = struct.Struct("=HHHH")
_PGNO_AT = struct.Struct(f"={_PGNO}")
_HEADER = PAGE_HEADER.size
_HEADER_DTYPE = np.dtype([("pgno", f"={_PGNO}"), ("pad", "=u2"), ("flags", "=u2"), ("lower", "=u2"), ("upper", "=u2")])
_META_READ = _HEADER + META.size


def _flat(mask: "np.ndarray[Any, Any]") -> "np.ndarray[Any, Any]":
    """The places of a 1-D mask's True values (``np.flatnonzero`` without its wrappers)."""
    return mask.nonzero()[0]


def _gather(data: "np.ndarray[Any, Any]", start: "np.ndarray[Any, Any]", width: int) -> "np.ndarray[Any, Any]":
    """The ``width`` bytes at each offset of ``start`` as rows of a (len(start), width) u8
    matrix: one gather of ``width``-byte windows (a void dtype over the bytes, stride 1);
    bytes past the file's end read as 0 (callers bounds-check what they use)."""
    last = len(data) - width
    rows = np.empty((len(start), width), dtype=np.uint8)
    if last >= 0:
        windows = np.ndarray((last + 1,), dtype=f"V{width}", buffer=data, strides=(1,))
        rows.view(f"V{width}").ravel()[:] = windows[np.minimum(start, last)]
    near_end = _flat(start > last)  # fewer than width bytes left in the file: byte by byte
    if near_end.size:
        at = start[near_end, None] + np.arange(width)
        rows[near_end] = np.where(at < len(data), data[np.minimum(at, len(data) - 1)], 0)
    return rows


@dataclass(frozen=True)
class _Meta:
    number: int  # 0 or 1
    page_size: int
    last_page: int
    txnid: int
    flags: int  # the main database's
    depth: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int
    root: int


@dataclass(frozen=True)
class Structure:
    """What the check found: the meta page a reader takes, its page size and last page, the
    pages it walked (branch, leaf, overflow) and the entries."""

    meta_page: int
    txnid: int
    page_size: int
    last_page: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int


class _Check:
    """One walk over one open file (``fd``, ``size`` bytes) named ``where``."""

    def __init__(self, fd: int, size: int, where: str) -> None:
        self.fd, self.size, self.where = fd, size, where

    # -- errors ----------------------------------------------------------------------------
    def bad(self, message: str, page: Optional[int] = None, page_size: int = 0) -> CorruptDataError:
        """A damaged page (``lmdb#L19``), naming the file and the page."""
        at = f"page {page}: " if page is not None else ""
        return CorruptDataError(f"{self.where}: damaged LMDB file: {at}{message}; restore it from a copy",
                                store=self.where, rule=PAGES,
                                offset=None if page is None else page * page_size)

    def short(self, needed: int, what: str) -> CorruptDataError:
        """A file smaller than its meta pages say (``lmdb#L18``)."""
        return CorruptDataError(f"{self.where}: the file looks cut short (an incomplete copy, download or "
                                f"disk-full write): it has {self.size} bytes, but {what} needs {needed}; restore "
                                "it from a whole copy", store=self.where, rule=WHOLE)

    def not_lmdb(self, why: str) -> CorruptDataError:
        return CorruptDataError(f"{self.where}: not a collection: not an LMDB data file ({why})",
                                store=self.where, rule=WHOLE, offset=0)

    # -- meta pages ------------------------------------------------------------------------
    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def meta(self, number: int, offset: int) -> _Meta:
        """Meta page ``number`` at ``offset``, as liblmdb's ``mdb_env_read_header`` accepts it."""
        raw = self.read(offset, _META_READ)
        if len(raw) < _META_READ:
            if number == 0 and not self._magic_at_start(raw):
                raise self.not_lmdb(f"{len(raw)} bytes, no meta page")
            raise self.short(offset + _META_READ, f"meta page {number}")
        _, _, flags, _, _ = PAGE_HEADER.unpack_from(raw)
        fields = META.unpack_from(raw, _HEADER)
        magic, version = fields[0], fields[1]
        if number == 0 and (magic != MAGIC or not flags & P_META):
            raise self.not_lmdb(self._foreign_layout(raw))
        if not flags & P_META:
            raise self.bad(f"meta page {number} lacks the meta flag (flags {flags:#x})", number, offset)
        if magic != MAGIC:
            raise self.bad(f"meta page {number} has magic {magic:#x}, not {MAGIC:#x}", number, offset)
        if version != DATA_VERSION:
            raise UnsupportedFeatureError(f"{self.where}: LMDB data version {version} (meta page {number}); this "
                                          f"LMDB reads version {DATA_VERSION}", store=self.where, rule=WHOLE)
        page_size = fields[4]  # the free database's md_pad holds the page size
        if page_size not in PAGE_SIZES:
            raise self.bad(f"meta page {number} names page size {page_size}, not a power of two in 512..65536",
                           number, offset)
        main = fields[12:20]
        last_page, txnid = fields[20], fields[21]
        return _Meta(number, page_size, last_page, txnid, main[1], main[2], main[3], main[4], main[5], main[6],
                     main[7])

    @staticmethod
    def _magic_at_start(raw: bytes) -> bool:
        return len(raw) >= _HEADER + 4 and struct.unpack_from("=I", raw, _HEADER)[0] == MAGIC

    @staticmethod
    def _foreign_layout(raw: bytes) -> str:
        """Why page 0 is no meta page here: another word size's layout, or not LMDB at all."""
        other = 12 if _HEADER == 16 else 16
        if len(raw) >= other + 4 and struct.unpack_from("=I", raw, other)[0] == MAGIC:
            return (f"written by a {'32' if other == 12 else '64'}-bit build of LMDB; this platform reads "
                    f"{_WORD * 8}-bit LMDB files")
        swapped = struct.unpack_from(">I" if struct.pack("=I", 1)[0] else "<I", raw, _HEADER)[0] \
            if len(raw) >= _HEADER + 4 else 0
        if swapped == MAGIC:
            return "written on a machine of the other byte order"
        return "no LMDB meta page at its start"

    def pick(self) -> _Meta:
        """Both meta pages checked, the one a reader takes returned: the larger transaction
        id, page 0 on a tie (liblmdb's ``mdb_env_pick_meta``); the file holds its pages."""
        first = self.meta(0, 0)
        second = self.meta(1, first.page_size)
        if second.page_size != first.page_size:
            raise self.bad(f"the meta pages disagree on the page size ({first.page_size}, {second.page_size})", 1,
                           first.page_size)
        chosen = second if second.txnid > first.txnid else first
        if chosen.last_page < NUM_METAS - 1 or chosen.last_page >= P_INVALID // chosen.page_size:
            raise self.bad(f"meta page {chosen.number} names last page {chosen.last_page}", chosen.number,
                           chosen.page_size)
        needed = (chosen.last_page + 1) * chosen.page_size
        if self.size < needed:
            raise self.short(needed, f"its newest meta page (page {chosen.number}, transaction {chosen.txnid}: "
                                     f"{chosen.last_page + 1} pages of {chosen.page_size} bytes)")
        return chosen

    # -- the tree --------------------------------------------------------------------------
    def walk(self, meta: _Meta) -> Structure:
        """Every page reachable from the main database's root (see the module docstring)."""
        psize, last, depth = meta.page_size, meta.last_page, meta.depth
        summary = [0, 0, 0, 0]  # branch, leaf, overflow pages, entries
        if meta.flags != 0:
            raise self.bad(f"the main database has flags {meta.flags:#x}; a collection's has none (no "
                           "sub-databases, no duplicates)", meta.number, psize)
        if meta.root == P_INVALID:
            if depth != 0 or meta.entries or meta.branch_pages or meta.leaf_pages or meta.overflow_pages:
                raise self.bad("the main database is empty but counts pages or entries", meta.number, psize)
        else:
            if not 1 <= depth <= MAX_DEPTH:
                raise self.bad(f"the main database's depth {depth} is not in 1..{MAX_DEPTH}", meta.number, psize)
            if not NUM_METAS <= meta.root <= last:
                raise self.bad(f"the main database's root, page {meta.root}, is not a page of the file "
                               f"(pages {NUM_METAS}..{last})", meta.number, psize)
            self._tree(meta, summary)
        counted = (meta.branch_pages, meta.leaf_pages, meta.overflow_pages, meta.entries)
        if (summary[0], summary[1], summary[3]) != (counted[0], counted[1], counted[3]) or summary[2] > counted[2]:
            raise self.bad(f"the main database counts {counted[0]} branch, {counted[1]} leaf and {counted[2]} "
                           f"overflow pages and {counted[3]} entries, its tree has {summary[0]}, {summary[1]}, "
                           f"{summary[2]} and {summary[3]}", meta.number, psize)
        return Structure(meta.number, meta.txnid, psize, last, *summary)

    def _tree(self, meta: _Meta, summary: List[int]) -> None:
        """Level by level from the root, each level's pages in key order, parsed together
        (numpy) in blocks of pages: per page, per node, per key."""
        psize, last, depth = meta.page_size, meta.last_page, meta.depth
        length = (last + 1) * psize
        if length <= _READ_WHOLE:  # a small file is read (a map costs more than the copy)
            raw = self.read(0, length)
            if len(raw) < length:  # (cut short since its size was read)
                raise self.short(length, f"meta page {meta.number}")
            self._levels(np.frombuffer(raw, dtype=np.uint8), meta, summary)
            return
        # mapped only now: the file holds every page up to last_page (checked), and every page
        # number is bounds-checked against last_page before it is touched
        mapping = mmap.mmap(self.fd, length, access=mmap.ACCESS_READ)
        try:
            data = np.frombuffer(mapping, dtype=np.uint8)
            self._levels(data, meta, summary)
            del data
        finally:
            try:
                mapping.close()
            except BufferError:  # a view still held by a traceback: closed when it goes
                pass

    def _levels(self, data: "np.ndarray[Any, Any]", meta: _Meta, summary: List[int]) -> None:
        psize, last, depth = meta.page_size, meta.last_page, meta.depth
        pages = np.array([meta.root], dtype=np.int64)
        bounds = _Keys.none(2)  # page j's keys lie in [bounds[j], bounds[j + 1]); none: unbounded
        walked = [pages]
        for level in range(1, depth + 1):
            leaf = level == depth
            runs: List[Tuple["np.ndarray[Any, Any]", ...]] = []  # the leaf level's overflow runs: first, end, owner
            children: List["np.ndarray[Any, Any]"] = []
            next_bounds: List[_Keys] = []
            previous: Optional[_Keys] = None  # the last key of the block before
            for at in range(0, len(pages), _BLOCK):
                block = pages[at:at + _BLOCK]
                page_of, base, lo, hi, node_flags, key_start, ksize, ahead = self._nodes(data, block, psize, leaf,
                                                                                         level, depth)
                first = np.searchsorted(page_of, np.arange(len(block)))
                if leaf:
                    rows = first
                    keys = self._keys(data, key_start, ksize, block, page_of, psize, ahead)
                else:  # a branch page's first key is never compared (liblmdb leaves it empty)
                    separator = np.ones(len(page_of), dtype=bool)
                    separator[first] = False
                    rows = first - np.arange(len(block))
                    keys = self._keys(data, key_start[separator], ksize[separator], block, page_of[separator],
                                      psize, ahead[separator])
                self._in_order(keys, previous, rows, bounds.rows(at, at + len(block) + 1), block, psize)
                previous = keys.rows(len(keys) - 1, len(keys))
                if leaf:
                    summary[2] += self._values(data, (page_of, base, lo, hi, node_flags, key_start, ksize), block,
                                               psize, meta, runs)
                    summary[3] += len(page_of)
                    continue
                child = lo.astype(np.int64) | hi.astype(np.int64) << 16
                if _WORD == 8:
                    child |= node_flags.astype(np.int64) << 32
                bad = _flat((child < NUM_METAS) | (child > last))
                if bad.size:
                    raise self.bad(f"a child page number {int(child[bad[0]])} is not a page of the file (pages "
                                   f"{NUM_METAS}..{last}, transaction {meta.txnid})", int(block[page_of[bad[0]]]),
                                   psize)
                children.append(child)
                # the next level's bounds: child 0 of a page inherits the page's low bound, child i its separator i
                inherit = bounds.rows(at, at + len(block)).take(page_of[first])
                next_bounds.append(_Keys.interleave(inherit, first, keys, len(page_of)))
            if leaf:
                summary[1] += len(pages)
                self._overflow_runs(runs, np.sort(np.concatenate(walked)), psize)
                return
            summary[0] += len(pages)
            pages = np.concatenate(children)
            seen = np.concatenate(walked)
            again = _flat(np.isin(pages, seen))
            if again.size or np.unique(pages).size != pages.size:
                raise self.bad(f"a page is reached twice (a page number in the tree repeats, level {level + 1})",
                               int(pages[again[0]]) if again.size else int(pages[0]), psize)
            walked.append(pages)
            bounds = _Keys.concatenate([*next_bounds, bounds.rows(len(bounds) - 1, len(bounds))])

    def _nodes(self, data: "np.ndarray[Any, Any]", pages: "np.ndarray[Any, Any]", psize: int, leaf: bool, level: int,
               depth: int) -> Tuple["np.ndarray[Any, Any]", ...]:
        """Every node of the pages, checked inside its page: (page index, node offset in the
        file, mn_lo, mn_hi, mn_flags, key offset, key size)."""
        n = len(pages)
        page_base = pages * psize
        head = _gather(data, page_base, _HEADER).view(_HEADER_DTYPE).ravel()
        wrong = _flat(head["pgno"].astype(np.int64) != pages)
        if wrong.size:
            j = int(wrong[0])
            raise self.bad(f"its header says it is page {int(head['pgno'][j])}", int(pages[j]), psize)
        kind = "leaf" if leaf else "branch"
        wrong = _flat(head["flags"] != (P_LEAF if leaf else P_BRANCH))
        if wrong.size:
            j = int(wrong[0])
            raise self.bad(f"flags {int(head['flags'][j]):#x} where the tree (depth {depth}) has a {kind} page "
                           f"(level {level})", int(pages[j]), psize)
        lower, upper = head["lower"].astype(np.int64), head["upper"].astype(np.int64)
        counts = (lower - _HEADER) >> 1
        wrong = _flat((lower < _HEADER) | (lower > upper) | (upper > psize) | ((lower - _HEADER) & 1)
                               | (counts < (1 if leaf else 2)))
        if wrong.size:
            j = int(wrong[0])
            raise self.bad(f"free-space bounds {int(lower[j])}..{int(upper[j])} ({int(counts[j])} nodes) are not "
                           f"those of a {kind} page", int(pages[j]), psize)
        total = int(counts.sum())
        page_of = np.repeat(np.arange(n), counts)
        slot = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        words = data[: len(data) & ~1].view("=u2")
        node_base = page_base[page_of]
        pointer = words[(node_base + _HEADER) // 2 + slot].astype(np.int64)
        wrong = _flat((pointer < upper[page_of]) | (pointer & 1) | (pointer + NODE_HEADER > psize))
        if wrong.size:
            i = int(wrong[0])
            raise self.bad(f"node pointer {int(pointer[i])} is not inside the page's nodes "
                           f"({int(upper[page_of[i]])}..{psize})", int(pages[page_of[i]]), psize)
        base = node_base + pointer
        node = _gather(data, base, _NODE_READ)  # header and (most) keys in one pass over the nodes
        header = node[:, :NODE_HEADER].view("=u2")
        lo, hi, node_flags, ksize = header[:, 0], header[:, 1], header[:, 2], header[:, 3].astype(np.int64)
        key_start = base + NODE_HEADER
        wrong = _flat(key_start + ksize > node_base + psize)
        if wrong.size:
            i = int(wrong[0])
            raise self.bad(f"a node at {int(pointer[i])} runs past the page's end", int(pages[page_of[i]]), psize)
        return page_of, base, lo, hi, node_flags, key_start, ksize, node

    def _keys(self, data: "np.ndarray[Any, Any]", start: "np.ndarray[Any, Any]", size: "np.ndarray[Any, Any]",
              pages: "np.ndarray[Any, Any]", page_of: "np.ndarray[Any, Any]", psize: int,
              ahead: "np.ndarray[Any, Any]") -> "_Keys":
        longest = int(size.max()) if size.size else 0
        if longest > MAX_KEY:
            i = int(np.argmax(size))
            raise CorruptDataError(f"{self.where}: not a collection: page {int(pages[page_of[i]])} holds a key of "
                                   f"{longest} bytes (a collection's keys have at most {MAX_KEY}, lmdb#L2)",
                                   store=self.where, rule=PAGES, offset=int(pages[page_of[i]]) * psize)
        return _Keys.gather(data, start, size, longest, ahead)

    def _in_order(self, keys: "_Keys", previous: Optional["_Keys"], rows: "np.ndarray[Any, Any]", bounds: "_Keys",
                  pages: "np.ndarray[Any, Any]", psize: int) -> None:
        """The keys strictly increasing in tree order (liblmdb's default order: bytes, a prefix
        first), also after the block before's last key; page ``j``'s (from row ``rows[j]``)
        inside ``[bounds[j], bounds[j + 1])``."""
        wrong = _flat(~keys.rows(0, len(keys) - 1).less(keys.rows(1, len(keys))))
        if wrong.size or (previous is not None and not previous.less(keys.rows(0, 1))[0]):
            i = int(wrong[0]) + 1 if wrong.size else 0
            j = max(int(np.searchsorted(rows, i, side="right")) - 1, 0)
            raise self.bad("keys out of order", int(pages[j]), psize)
        ends = np.append(rows[1:], len(keys)) - 1
        low, high = bounds.rows(0, len(pages)), bounds.rows(1, len(pages) + 1)
        wrong = _flat((low.valid & keys.take(rows).less(low))
                               | (high.valid & ~keys.take(ends).less(high)))
        if wrong.size:
            raise self.bad("its keys are not inside the range its parent's separators give it",
                           int(pages[int(wrong[0])]), psize)

    def _values(self, data: "np.ndarray[Any, Any]", nodes: Tuple["np.ndarray[Any, Any]", ...],
                pages: "np.ndarray[Any, Any]", psize: int, meta: _Meta,
                runs: List[Tuple["np.ndarray[Any, Any]", ...]]) -> int:
        """Leaf values: plain ones inside their page; big ones (``F_BIGDATA``) in overflow runs
        inside the snapshot (bounds only: a reader takes the value's length from its node and
        its bytes from the run's first page on), added to ``runs`` for :meth:`_overflow_runs`.
        Returns the overflow pages the values need."""
        page_of, base, lo, hi, node_flags, key_start, ksize = nodes
        size = lo.astype(np.int64) | hi.astype(np.int64) << 16
        key_end = key_start + ksize
        page_end = pages[page_of] * psize + psize
        big = node_flags == F_BIGDATA
        wrong = _flat(~big & (node_flags != 0))
        if wrong.size:
            i = int(wrong[0])
            raise self.bad(f"a node with flags {int(node_flags[i]):#x} (a sub-database or duplicates; a collection's "
                           "database has neither)", int(pages[page_of[i]]), psize)
        wrong = _flat(np.where(big, key_end + _WORD, key_end + size) > page_end)
        if wrong.size:
            i = int(wrong[0])
            raise self.bad(f"a node at {int(base[i] - pages[page_of[i]] * psize)} runs past the page's end",
                           int(pages[page_of[i]]), psize)
        if not big.any():
            return 0
        owners = _flat(big)
        first = _gather(data, key_end[big], _WORD).view(f"={_PGNO}").ravel().astype(np.uint64)
        needed = (_HEADER - 1 + size[big]) // psize + 1
        wrong = _flat((first < NUM_METAS) | (first > np.uint64(meta.last_page)))
        start = first.astype(np.int64) if not wrong.size else first.astype(np.int64) * 0
        end = start + needed
        if not wrong.size:
            wrong = _flat(end > meta.last_page + 1)
        if wrong.size:
            i = int(wrong[0])
            raise self.bad(f"a value's overflow run (page {int(first[i])}, {int(needed[i])} pages) is not inside the "
                           f"file (pages {NUM_METAS}..{meta.last_page}, transaction {meta.txnid})",
                           int(pages[page_of[owners[i]]]), psize)
        runs.append((start, end, pages[page_of[owners]]))
        return int(needed.sum())

    def _overflow_runs(self, runs: List[Tuple["np.ndarray[Any, Any]", ...]], tree: "np.ndarray[Any, Any]",
                       psize: int) -> None:
        """No two overflow runs of the whole tree share a page and no run holds a tree page
        (``tree``: sorted): one sort of every run by its first page."""
        if not runs:
            return
        start, end, owner = (np.concatenate(part) for part in zip(*runs))
        order = np.argsort(start, kind="stable")
        start, end, owner = start[order], end[order], owner[order]
        overlap = _flat(start[1:] < end[:-1])
        inside = _flat(np.searchsorted(tree, end) != np.searchsorted(tree, start))
        if overlap.size or inside.size:
            i = int(overlap[0] + 1) if overlap.size else int(inside[0])
            raise self.bad(f"the overflow run at page {int(start[i])} overlaps "
                           f"{'another run' if overlap.size else 'a tree page'} (a page reached twice)",
                           int(owner[i]), psize)


@functools.lru_cache(maxsize=None)
def _key_masks(count: int) -> "np.ndarray[Any, Any]":
    """Row ``k``: the masks of a key of ``k`` bytes' bytes in each of ``count`` big-endian
    words (a constant per ``count``; read-only)."""
    keep = np.clip(np.arange(8 * count + 1)[:, None] - np.arange(0, 8 * count, 8), 0, 8)  # bytes per word
    masks = np.array([[((1 << 8 * k) - 1) << 8 * (8 - k) for k in row] for row in keep.tolist()], dtype=np.uint64)
    masks.flags.writeable = False
    return masks


class _Keys:
    """Keys as rows: each zero-padded to ``8 * words`` bytes read as big-endian u64 words, with
    its length; ``valid`` False for an absent bound.  (padded bytes, length) orders as liblmdb's
    default comparison does (bytes, a prefix first)."""

    __slots__ = ("words", "length", "valid")

    def __init__(self, words: "np.ndarray[Any, Any]", length: "np.ndarray[Any, Any]",
                 valid: "np.ndarray[Any, Any]") -> None:
        self.words, self.length, self.valid = words, length, valid

    @staticmethod
    def none(n: int) -> "_Keys":
        return _Keys(np.zeros((n, 1), dtype=np.uint64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool))

    @staticmethod
    def gather(data: "np.ndarray[Any, Any]", start: "np.ndarray[Any, Any]", size: "np.ndarray[Any, Any]",
               longest: int, ahead: Optional["np.ndarray[Any, Any]"] = None) -> "_Keys":
        """The keys at ``start`` of ``size`` bytes (at most ``longest``) as big-endian words, the
        bytes past a key's end zeroed: one gather of ``8 * words`` bytes per key, or taken from
        ``ahead``, the bytes already read from each key's node (its header, then the key)."""
        count = max(1, (longest + 7) // 8)
        if ahead is not None and ahead.shape[1] >= NODE_HEADER + 8 * count:
            words = ahead.view(">u8")[:, NODE_HEADER // 8:NODE_HEADER // 8 + count].astype(np.uint64)
        else:
            words = _gather(data, start, 8 * count).view(">u8").astype(np.uint64)
        words &= _key_masks(count)[size]
        return _Keys(words, size, np.ones(len(size), dtype=bool))

    @staticmethod
    def concatenate(parts: List["_Keys"]) -> "_Keys":
        words = max(p.words.shape[1] for p in parts)
        return _Keys(np.concatenate([p.widened(words) for p in parts]), np.concatenate([p.length for p in parts]),
                     np.concatenate([p.valid for p in parts]))

    @staticmethod
    def interleave(inherit: "_Keys", first: "np.ndarray[Any, Any]", separators: "_Keys", total: int) -> "_Keys":
        """Rows for ``total`` children: ``inherit`` at rows ``first`` (each page's child 0), the
        separators, in order, elsewhere."""
        words = max(inherit.words.shape[1], separators.words.shape[1])
        out = _Keys(np.zeros((total, words), dtype=np.uint64), np.zeros(total, dtype=np.int64), np.ones(total, dtype=bool))
        rest = np.ones(total, dtype=bool)
        rest[first] = False
        for mask, part in ((~rest, inherit), (rest, separators)):
            out.words[mask] = part.widened(words)
            out.length[mask] = part.length
            out.valid[mask] = part.valid
        return out

    def widened(self, words: int) -> "np.ndarray[Any, Any]":
        have = self.words.shape[1]
        if have == words:
            return self.words
        out = np.zeros((len(self.words), words), dtype=np.uint64)
        out[:, :have] = self.words
        return out

    def __len__(self) -> int:
        return len(self.length)

    def rows(self, start: int, stop: int) -> "_Keys":
        return _Keys(self.words[start:stop], self.length[start:stop], self.valid[start:stop])

    def take(self, rows: "np.ndarray[Any, Any]") -> "_Keys":
        return _Keys(self.words[rows], self.length[rows], self.valid[rows])

    def less(self, other: "_Keys") -> "np.ndarray[Any, Any]":
        """Row-wise ``self < other`` (both valid rows): word by word from the last, the length
        deciding between equal words."""
        words = max(self.words.shape[1], other.words.shape[1])
        a, b = self.widened(words), other.widened(words)
        result = self.length < other.length
        for word in range(words - 1, -1, -1):
            x, y = a[:, word], b[:, word]
            result = (x < y) | ((x == y) & result)
        return result


def check_file(path: str) -> Structure:
    """Check the LMDB data file at ``path`` as a reader's snapshot will see it (see the module
    docstring); raise a CorruptDataError naming the file, the page and what is wrong
    (``lmdb#L18``: empty, not LMDB, cut short; ``lmdb#L19``: a damaged page)."""
    with open(path, "rb", buffering=0) as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        if size == 0:
            raise CorruptDataError(f"{path}: not a collection (empty file)", store=path, rule=WHOLE)
        check = _Check(fd, size, path)
        return check.walk(check.pick())
