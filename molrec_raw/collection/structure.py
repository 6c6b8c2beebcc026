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
  unnamed database has no sub-databases or duplicates), each overflow run inside the snapshot
  with its first page's header saying so, no page reached twice, the depth at most 32
  (liblmdb's cursor stack), and the database's page and entry counts matching the tree
  (``lmdb#L19``).

The free-page database is not walked: a read transaction never reads it (liblmdb reads it
only to allocate pages in a write transaction, and a collection is never opened for writing
once written: its writer creates the file).  Overflow values are bounds-checked, never read:
the cost grows with the tree's pages, not with the values' bytes.

The layout is the platform's own (liblmdb's files are not portable across word sizes or byte
orders): 64-bit page numbers and a 16-byte page header on a 64-bit build, 32-bit and 12 bytes
on a 32-bit one, in native byte order.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import List, Optional, Tuple

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
_META_READ = _HEADER + META.size


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
        if tuple(summary) != counted:
            raise self.bad(f"the main database counts {counted[0]} branch, {counted[1]} leaf and {counted[2]} "
                           f"overflow pages and {counted[3]} entries, its tree has {summary[0]}, {summary[1]}, "
                           f"{summary[2]} and {summary[3]}", meta.number, psize)
        return Structure(meta.number, meta.txnid, psize, last, *summary)

    def _tree(self, meta: _Meta, summary: List[int]) -> None:
        psize, last, depth = meta.page_size, meta.last_page, meta.depth
        seen = bytearray(last + 1)
        seen[0:NUM_METAS] = b"\x01" * NUM_METAS
        pread, fd, unpack_node, header = os.pread, self.fd, _NODE.unpack_from, PAGE_HEADER.unpack_from
        # (page, level, smallest key allowed or None, key every key is below or None)
        stack: List[Tuple[int, int, Optional[bytes], Optional[bytes]]] = [(meta.root, 1, None, None)]
        while stack:
            pgno, level, low, high = stack.pop()
            if seen[pgno]:
                raise self.bad("reached twice (a page number in the tree repeats or points at a meta page)",
                               pgno, psize)
            seen[pgno] = 1
            page = pread(fd, psize, pgno * psize)
            if len(page) < psize:
                raise self.short((pgno + 1) * psize, f"page {pgno}")
            number, _, flags, lower, upper = header(page)
            if number != pgno:
                raise self.bad(f"its header says it is page {number}", pgno, psize)
            leaf = level == depth
            if flags != (P_LEAF if leaf else P_BRANCH):
                raise self.bad(f"flags {flags:#x} where the tree (depth {depth}) has a "
                               f"{'leaf' if leaf else 'branch'} page (level {level})", pgno, psize)
            if not _HEADER <= lower <= upper <= psize or (lower - _HEADER) % 2:
                raise self.bad(f"free-space bounds {lower}..{upper} are not inside the page", pgno, psize)
            n = (lower - _HEADER) >> 1
            if n < (1 if leaf else 2):
                raise self.bad(f"a {'leaf' if leaf else 'branch'} page with {n} nodes", pgno, psize)
            pointers = struct.unpack_from(f"={n}H", page, _HEADER)
            keys: List[bytes] = []
            children: List[int] = []
            for pointer in pointers:
                if pointer < upper or pointer & 1 or pointer + NODE_HEADER > psize:
                    raise self.bad(f"node pointer {pointer} is not inside the page's nodes ({upper}..{psize})",
                                   pgno, psize)
                lo, hi, node_flags, ksize = unpack_node(page, pointer)
                start = pointer + NODE_HEADER
                end = start + ksize
                if leaf:
                    if node_flags == 0:
                        if end + (lo | hi << 16) > psize:
                            raise self.bad(f"a node at {pointer} runs past the page's end", pgno, psize)
                    elif node_flags == F_BIGDATA:
                        if end + _WORD > psize:
                            raise self.bad(f"a node at {pointer} runs past the page's end", pgno, psize)
                        self._overflow(_PGNO_AT.unpack_from(page, end)[0], lo | hi << 16, pgno, meta, seen, summary)
                    else:
                        raise self.bad(f"a node with flags {node_flags:#x} (a sub-database or duplicates; a "
                                       "collection's database has neither)", pgno, psize)
                else:
                    if end > psize:
                        raise self.bad(f"a node at {pointer} runs past the page's end", pgno, psize)
                    child = lo | hi << 16 | (node_flags << 32 if _WORD == 8 else 0)
                    if not NUM_METAS <= child <= last:
                        raise self.bad(f"a child page number {child} is not a page of the file (pages "
                                       f"{NUM_METAS}..{last}, transaction {meta.txnid})", pgno, psize)
                    children.append(child)
                keys.append(page[start:end])
            if not leaf:
                keys[0] = low if low is not None else b""  # a branch page's first key is never compared
            self._in_order(keys, low, high, leaf, pgno, psize)
            if leaf:
                summary[1] += 1
                summary[3] += n
            else:
                summary[0] += 1
                bounds = [low, *keys[1:], high]
                for i in range(n - 1, -1, -1):
                    stack.append((children[i], level + 1, bounds[i], bounds[i + 1]))

    def _in_order(self, keys: List[bytes], low: Optional[bytes], high: Optional[bytes], leaf: bool, pgno: int,
                  psize: int) -> None:
        """Keys strictly increasing (liblmdb's default order: bytes, a prefix first) and inside
        the range the parent branch gives this page."""
        first = 0 if leaf else 1
        for a, b in zip(keys[first:], keys[first + 1:]):
            if not a < b:
                raise self.bad(f"keys out of order ({a[:16]!r} before {b[:16]!r})", pgno, psize)
        if low is not None and keys[first] < low:
            raise self.bad(f"key {keys[first][:16]!r} is below its parent's separator {low[:16]!r}", pgno, psize)
        if high is not None and not keys[-1] < high:
            raise self.bad(f"key {keys[-1][:16]!r} is not below the next separator {high[:16]!r}", pgno, psize)

    def _overflow(self, first: int, length: int, pgno: int, meta: _Meta, seen: bytearray, summary: List[int]) -> None:
        """A value of ``length`` bytes in the overflow run starting at page ``first``: the run
        inside the snapshot, its first page's header saying so, no page of it reached before."""
        psize, last = meta.page_size, meta.last_page
        needed = (_HEADER - 1 + length) // psize + 1
        if not NUM_METAS <= first or first + needed - 1 > last:
            raise self.bad(f"a value's overflow run (page {first}, {needed} pages) is not inside the file (pages "
                           f"{NUM_METAS}..{last}, transaction {meta.txnid})", pgno, psize)
        raw = os.pread(self.fd, _HEADER, first * psize)
        if len(raw) < _HEADER:
            raise self.short(first * psize + _HEADER, f"overflow page {first}")
        number, _, flags, pages = _OVERFLOW_HEADER.unpack_from(raw)
        if number != first or flags != P_OVERFLOW or not needed <= pages <= last + 1 - first:
            raise self.bad(f"overflow page {first} (a value of {length} bytes) has header page {number}, flags "
                           f"{flags:#x}, {pages} pages", pgno, psize)
        if seen.find(1, first, first + pages) != -1:
            raise self.bad(f"the overflow run at page {first} ({pages} pages) overlaps a page reached before",
                           pgno, psize)
        seen[first:first + pages] = b"\x01" * pages
        summary[2] += pages


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
