"""A crash-state simulator for power cuts (issues 10 and 23), after SQLite's crash VFS and
ALICE (Pillai et al., OSDI 2014).  One implementation, used by the suite
(``tests/powercut/test_powercut.py``) and by the long campaign (``bench/powercut.py``).

1. **Record.**  A workload runs against the real file system through :class:`Recorder`, a
   :class:`~molrec_raw.zarr.fileops.FileOps` that performs every mutation and logs it
   (create, write at an offset, truncate, fsync of a file, fsync of a directory, rename,
   exchange, unlink, mkdir, rmdir).  Every mutation of a record goes through that seam, so
   the log is complete: replaying all of it reproduces the real tree byte for byte
   (:func:`check_replay` proves it for each workload).  ``Recorder(exchange=False)`` refuses
   the atomic exchange as a file system without ``RENAME_EXCHANGE`` does (EINVAL).
2. **Model.**  :class:`CrashModel` replays the log over inodes and directory entries and
   builds post-crash trees under this persistence model, on a :class:`Device`:

   - a file's data writes become durable at that file's fsync; directory entries
     (create, rename, exchange, unlink, mkdir, rmdir) at the fsync of the directory holding
     the new name; everything after the last covering barrier may be kept, dropped, or kept
     out of order;
   - a write not yet durable may tear at the device's sectors (``Device.sector``), each
     sector it touches that held bytes before being old, new or garbage.  With *powersafe
     overwrite* (``Device.powersafe``, the issue-10 model) garbage covers only the bytes
     the write covered; without it (SQLite's pre-PSOW model) garbage covers the WHOLE
     sector, so a write that starts inside a sector holding earlier (even fsynced) bytes
     can destroy them — the sector an append shares with the file's old tail included;
   - an append may persist the new length with zeros in place of the data (sectors past
     the old end are never garbage: the file system does not expose stale blocks);
   - a rename may persist while the renamed file's data does not (it falls out of the
     model: the rename is kept, the file's unsynced writes are dropped).
3. **Enumerate.**  :func:`enumerate_states` lists the *state classes* of a log (its
   docstring defines each one); :func:`random_sample` adds seeded random states on top.
   :func:`run_states` checks each distinct tree once.
"""
from __future__ import annotations

import errno
import hashlib
import os
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from molrec_raw.zarr.fileops import FileOps

SECTOR = 512
BARRIERS = ("fsync", "fsync_dir")
ENTRY_OPS = ("create", "mkdir", "rename", "exchange", "unlink", "rmdir")
DATA_OPS = ("write", "truncate")


@dataclass(frozen=True)
class Device:
    """What a power cut can do to a write that is not yet durable: tear it at ``sector``
    bytes; ``powersafe`` (PSOW): a torn sector garbles only the bytes the write covered,
    else (pre-PSOW) every byte of it."""

    sector: int = SECTOR
    powersafe: bool = True

    @property
    def name(self) -> str:
        """``psow-512``, ``torn-4096``, ...: the key of ``DEVICES``."""
        return f"{'psow' if self.powersafe else 'torn'}-{self.sector}"


PSOW_512 = Device(512, True)  # the issue-10 model
TORN_4096 = Device(4096, False)  # pre-PSOW on a 4Kn device (or a 4 KiB file-system block)
TORN_512 = Device(512, False)  # pre-PSOW on 512-byte sectors (partial tears inside a 4 KiB page)
DEVICES = {d.name: d for d in (PSOW_512, TORN_4096, TORN_512)}


@dataclass
class Op:
    """One logged mutation; paths relative to the recorded root ('' is the root)."""

    kind: str
    path: str
    arg: Any = None  # write: offset; truncate: size; rename/exchange: the second path
    data: bytes = b""


class Recorder(FileOps):
    """Performs every file mutation (the real one) and logs it, with marks the workload
    adds (``mark(label, value)``) at the log position where they happen."""

    def __init__(self, root: str, *, exchange: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.exchange_works = exchange
        self.log: List[Op] = []
        self.marks: List[Tuple[int, str, Any]] = []
        self._fds: Dict[int, Tuple[str, bool]] = {}
        self._lock = threading.RLock()

    def rel(self, path: str) -> str:
        full = os.path.abspath(path)
        if full == self.root:
            return ""
        assert full.startswith(self.root + os.sep), f"a mutation outside the recorded root: {full}"
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    def mark(self, label: str, value: Any = None) -> None:
        with self._lock:
            self.marks.append((len(self.log), label, value))

    def open(self, path: str, flags: int, mode: int = 0o666) -> int:
        with self._lock:
            existed = os.path.lexists(path)
            fd = super().open(path, flags, mode)
            rel = self.rel(path)
            self._fds[fd] = (rel, bool(flags & os.O_APPEND))
            if not existed:
                self.log.append(Op("create", rel))
            elif flags & os.O_TRUNC:
                self.log.append(Op("truncate", rel, 0))
            return fd

    def write(self, fd: int, data: Any) -> int:
        with self._lock:
            rel, append = self._fds[fd]
            offset = os.fstat(fd).st_size if append else os.lseek(fd, 0, os.SEEK_CUR)
            n = super().write(fd, data)
            self.log.append(Op("write", rel, offset, bytes(memoryview(data).cast("B")[:n])))
            return n

    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        with self._lock:
            n = super().pwrite(fd, data, offset)
            self.log.append(Op("write", self._fds[fd][0], offset, bytes(memoryview(data).cast("B")[:n])))
            return n

    def truncate(self, fd: int, length: int) -> None:
        with self._lock:
            super().truncate(fd, length)
            self.log.append(Op("truncate", self._fds[fd][0], length))

    def fsync(self, fd: int) -> None:
        with self._lock:
            super().fsync(fd)
            self.log.append(Op("fsync", self._fds[fd][0]))

    def close(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)
            super().close(fd)

    def fsync_file(self, path: str) -> None:
        with self._lock:
            super().fsync_file(path)
            self.log.append(Op("fsync", self.rel(path)))

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            super().fsync_dir(path)
            self.log.append(Op("fsync_dir", self.rel(path)))

    def replace(self, src: str, dst: str) -> None:
        with self._lock:
            super().replace(src, dst)
            self.log.append(Op("rename", self.rel(src), self.rel(dst)))

    def exchange(self, a: str, b: str) -> None:
        if not self.exchange_works:  # as a file system without RENAME_EXCHANGE answers
            raise OSError(errno.EINVAL, "Invalid argument (exchange refused by the recorder)", a)
        with self._lock:
            super().exchange(a, b)
            self.log.append(Op("exchange", self.rel(a), self.rel(b)))

    def unlink(self, path: str) -> None:
        with self._lock:
            super().unlink(path)
            self.log.append(Op("unlink", self.rel(path)))

    def mkdir(self, path: str) -> None:
        with self._lock:
            super().mkdir(path)
            self.log.append(Op("mkdir", self.rel(path)))

    def rmdir(self, path: str) -> None:
        with self._lock:
            super().rmdir(path)
            self.log.append(Op("rmdir", self.rel(path)))


# -- trees ----------------------------------------------------------------------------------
Tree = Dict[str, Optional[bytes]]  # relative path -> file bytes, or None for a directory


def snapshot(root: str) -> Tree:
    """The tree under ``root`` (directories as None), symbolic links not followed."""
    tree: Tree = {}
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(directory, root).replace(os.sep, "/")
        if rel != ".":
            tree[rel] = None
        for name in sorted(filenames):
            path = os.path.join(directory, name)
            with open(path, "rb") as fh:
                tree[(name if rel == "." else f"{rel}/{name}")] = fh.read()
    return tree


def tree_digest(tree: Tree) -> str:
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(tree):
        value = tree[path]
        h.update(path.encode() + (b"\x00D" if value is None else b"\x00F" + len(value).to_bytes(8, "little")))
        if value is not None:
            h.update(value)
    return h.hexdigest()


def materialize(tree: Tree, root: str) -> None:
    """Write ``tree`` under the (new, empty) directory ``root``."""
    os.makedirs(root, exist_ok=True)
    for path in sorted(tree):
        full = os.path.join(root, *path.split("/"))
        value = tree[path]
        if value is None:
            os.makedirs(full, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as fh:
                fh.write(value)


# -- the model ------------------------------------------------------------------------------
@dataclass
class Resolved:
    """An op with the inodes it touches (from the full replay)."""

    op: Op
    inode: int = -1  # data ops and fsync: the file; fsync_dir: the directory
    entries: Tuple[Tuple[int, str, Optional[int], Optional[int]], ...] = ()  # (dir, name, old, new)
    new_dir: int = -1  # mkdir: the directory inode it creates
    old_size: int = 0  # data ops: the file's size before (in the full replay)
    covered_by: int = -1  # index of the barrier that makes it durable (-1: none)


@dataclass
class Variant:
    """How one kept op is damaged: a sector mask (a torn write: one choice per sector it
    touches that held bytes before) or zeros (an append whose length persisted, not its data)."""

    op: int
    mask: Optional[Tuple[str, ...]] = None  # per sector: "old" | "new" | "garbage"
    zeros: bool = False


@dataclass
class State:
    """One post-crash state: ops ``[0, t)`` happened; of those not yet durable, all are kept
    (``keep_pending``) minus ``dropped``, or none; the op of ``variant`` is kept (damaged)
    in any case."""

    kind: str  # the state class (enumerate_states) or "random"
    t: int  # ops [0, t) happened
    dropped: frozenset = frozenset()  # pending ops (index < t) left out
    keep_pending: bool = True  # False: every pending op but the variant's is dropped
    variant: Optional[Variant] = None
    seed: int = 0

    def describe(self) -> str:
        parts = [f"{self.kind} t={self.t}"]
        if not self.keep_pending:
            parts.append("other pending dropped" if self.variant is not None else "pending dropped")
        if self.dropped:
            parts.append(f"dropped={sorted(self.dropped)}")
        if self.variant is not None:
            v = self.variant
            parts.append(f"op {v.op} " + ("zeros" if v.zeros else f"mask={','.join(m[0] for m in v.mask or ())}"))
        return " ".join(parts)


class CrashModel:
    """Post-crash trees of a recorded log over an initial (durable) tree, on ``device``."""

    def __init__(self, initial: Tree, log: Sequence[Op], device: Device = PSOW_512) -> None:
        self.initial = initial
        self.log = list(log)
        self.device = device
        self._next = 1
        self.root = 0
        files: Dict[int, bytearray] = {}
        dirs: Dict[int, Dict[str, int]] = {0: {}}
        self._init_files, self._init_dirs = self._load(initial, files, dirs)
        self.ops = self._resolve()

    def _inode(self) -> int:
        self._next += 1
        return self._next

    def _load(self, tree: Tree, files: Dict[int, bytearray],
              dirs: Dict[int, Dict[str, int]]) -> Tuple[Dict[int, bytes], Dict[int, Dict[str, int]]]:
        for path in sorted(tree, key=lambda p: p.count("/")):
            parent = self._lookup(dirs, os.path.dirname(path))
            assert parent is not None, path
            ino = self._inode()
            dirs[parent][os.path.basename(path)] = ino
            if tree[path] is None:
                dirs[ino] = {}
            else:
                files[ino] = bytearray(tree[path] or b"")
        return {k: bytes(v) for k, v in files.items()}, {k: dict(v) for k, v in dirs.items()}

    def _lookup(self, dirs: Dict[int, Dict[str, int]], path: str) -> Optional[int]:
        node = self.root
        for part in [p for p in path.split("/") if p]:
            entries = dirs.get(node)
            if entries is None or part not in entries:
                return None
            node = entries[part]
        return node

    def _resolve(self) -> List[Resolved]:
        """Replay the whole log once: which inodes each op touches, and its barrier."""
        files = {k: bytearray(v) for k, v in self._init_files.items()}
        dirs = {k: dict(v) for k, v in self._init_dirs.items()}
        self.dir_inodes: Set[int] = set(dirs)
        out: List[Resolved] = []
        for op in self.log:
            r = Resolved(op)
            parent = self._lookup(dirs, os.path.dirname(op.path))
            name = os.path.basename(op.path)
            if op.kind == "create":
                assert parent is not None, op
                ino = self._inode()
                files[ino] = bytearray()
                r.entries = ((parent, name, dirs[parent].get(name), ino),)
                r.inode = ino
            elif op.kind == "mkdir":
                assert parent is not None, op
                ino = self._inode()
                dirs[ino] = {}
                r.entries = ((parent, name, dirs[parent].get(name), ino),)
                r.new_dir = ino
            elif op.kind in DATA_OPS or op.kind == "fsync":
                ino = self._lookup(dirs, op.path)
                assert ino is not None and ino in files, op
                r.inode = ino
                r.old_size = len(files[ino])
            elif op.kind == "fsync_dir":
                ino = self._lookup(dirs, op.path)
                assert ino is not None and ino in dirs, op
                r.inode = ino
            elif op.kind in ("unlink", "rmdir"):
                assert parent is not None, op
                r.entries = ((parent, name, dirs[parent].get(name), None),)
            elif op.kind == "rename":
                dst_parent = self._lookup(dirs, os.path.dirname(op.arg))
                assert parent is not None and dst_parent is not None, op
                ino = dirs[parent][name]
                dst = os.path.basename(op.arg)
                r.entries = ((parent, name, ino, None), (dst_parent, dst, dirs[dst_parent].get(dst), ino))
            elif op.kind == "exchange":
                other_parent = self._lookup(dirs, os.path.dirname(op.arg))
                assert parent is not None and other_parent is not None, op
                other = os.path.basename(op.arg)
                a, b = dirs[parent][name], dirs[other_parent][other]
                r.entries = ((parent, name, a, b), (other_parent, other, b, a))
            else:  # pragma: no cover - a verb the model does not know
                raise AssertionError(op)
            if op.kind == "mkdir":
                self.dir_inodes.add(r.new_dir)
            self._apply(r, files, dirs, None)
            out.append(r)
        # barriers: a data op is durable at the next fsync of its file; an entry op at the
        # next fsync of the directory that holds its (last) new name
        pending_data: Dict[int, List[int]] = {}
        pending_entries: Dict[int, List[int]] = {}
        for i, r in enumerate(out):
            kind = r.op.kind
            if kind in DATA_OPS:
                pending_data.setdefault(r.inode, []).append(i)
            elif kind in ENTRY_OPS:
                pending_entries.setdefault(r.entries[-1][0], []).append(i)
            elif kind == "fsync":
                for j in pending_data.pop(r.inode, []):
                    out[j].covered_by = i
            elif kind == "fsync_dir":
                for j in pending_entries.pop(r.inode, []):
                    out[j].covered_by = i
        return out

    def _exists(self, ino: Optional[int], files: Dict[int, bytearray], dirs: Dict[int, Dict[str, int]]) -> None:
        """A kept rename moves an inode whose creation may have been dropped: the inode
        exists anyway (empty), as a journaling file system orders the two."""
        if ino is not None and ino not in files and ino not in dirs:
            if ino in self.dir_inodes:
                dirs[ino] = {}
            else:
                files[ino] = bytearray()

    def _apply(self, r: Resolved, files: Dict[int, bytearray], dirs: Dict[int, Dict[str, int]],
               variant: Optional[Variant], rng: Optional[random.Random] = None) -> None:
        op = r.op
        kind = op.kind
        if kind == "write":
            buf = files.setdefault(r.inode, bytearray())
            data = op.data
            offset = op.arg
            before = len(buf)
            old = bytes(buf[offset // self.device.sector * self.device.sector:offset + len(data)]) \
                if variant is not None else b""
            if offset > len(buf):
                buf.extend(b"\x00" * (offset - len(buf)))
            buf[offset:offset + len(data)] = data
            if variant is not None:
                _damage(buf, before, old, offset, len(data), variant, self.device, rng or random.Random(0))
        elif kind == "truncate":
            buf = files.setdefault(r.inode, bytearray())
            if op.arg < len(buf):
                del buf[op.arg:]
            else:
                buf.extend(b"\x00" * (op.arg - len(buf)))
        elif kind == "create":
            files.setdefault(r.inode, bytearray())
            (d, name, _, new), = r.entries
            dirs.setdefault(d, {})[name] = new  # type: ignore[assignment]
        elif kind == "mkdir":
            dirs.setdefault(r.new_dir, {})
            (d, name, _, new), = r.entries
            dirs.setdefault(d, {})[name] = new  # type: ignore[assignment]
        elif kind in ("unlink", "rmdir"):
            (d, name, old, _), = r.entries
            entries = dirs.get(d, {})
            if old is not None and entries.get(name) == old:
                del entries[name]
        elif kind == "rename":
            (sd, sname, ino, _), (dd, dname, _, new) = r.entries
            self._exists(new, files, dirs)
            src = dirs.setdefault(sd, {})
            if src.get(sname) == ino:
                del src[sname]
            dirs.setdefault(dd, {})[dname] = new  # type: ignore[assignment]
        elif kind == "exchange":
            (da, na, _, to_a), (db, nb, _, to_b) = r.entries
            self._exists(to_a, files, dirs)
            self._exists(to_b, files, dirs)
            dirs.setdefault(da, {})[na] = to_a  # type: ignore[assignment]
            dirs.setdefault(db, {})[nb] = to_b  # type: ignore[assignment]

    # -- states -----------------------------------------------------------------------
    def pending(self, t: int) -> List[int]:
        """Ops before ``t`` that no barrier before ``t`` made durable."""
        return [i for i in range(t) if self.ops[i].op.kind in DATA_OPS + ENTRY_OPS
                and not (0 <= self.ops[i].covered_by < t)]

    def build(self, state: State) -> Tree:
        files = {k: bytearray(v) for k, v in self._init_files.items()}
        dirs = {k: dict(v) for k, v in self._init_dirs.items()}
        rng = random.Random(state.seed)
        for i in range(state.t):
            r = self.ops[i]
            kind = r.op.kind
            if kind in BARRIERS:
                continue
            variant = state.variant if state.variant is not None and state.variant.op == i else None
            durable = 0 <= r.covered_by < state.t
            if variant is None and not durable and (not state.keep_pending or i in state.dropped):
                continue
            self._apply(r, files, dirs, variant, rng)
        tree: Tree = {}

        def walk(node: int, prefix: str) -> None:
            for name, child in sorted(dirs.get(node, {}).items()):
                path = f"{prefix}{name}"
                if child in dirs:
                    tree[path] = None
                    walk(child, path + "/")
                elif child in files:
                    tree[path] = bytes(files[child])
        walk(self.root, "")
        return tree

    def live(self, t: int) -> Tree:
        return self.build(State("prefix-keep", t))

    def windows(self) -> List[Tuple[int, int]]:
        """Barrier windows ``[start, end)``: the ops between consecutive barriers."""
        cuts = [i for i, r in enumerate(self.ops) if r.op.kind in BARRIERS]
        out, start = [], 0
        for cut in cuts + [len(self.ops)]:
            if cut > start:
                out.append((start, cut))
            start = cut + 1
        return out

    def in_place_sectors(self, i: int) -> int:
        """Sectors of the device a write touches that held bytes before it (in the full
        replay): with powersafe overwrite those its in-place bytes lie in, without it also
        the sector an append shares with the file's old tail."""
        r = self.ops[i]
        if r.op.kind != "write" or not r.op.data:
            return 0
        size = self.device.sector
        lo = r.op.arg
        hi = min(r.op.arg + len(r.op.data), r.old_size) if self.device.powersafe else \
            min(r.op.arg + len(r.op.data), -(-r.old_size // size) * size)
        return 0 if hi <= lo else (hi - 1) // size - lo // size + 1

    def appends(self, i: int) -> bool:
        """The op writes past its file's old end (in the full replay)."""
        r = self.ops[i]
        return r.op.kind == "write" and r.op.arg + len(r.op.data) > r.old_size and len(r.op.data) > 0

    def last_pending(self, i: int) -> int:
        """The latest crash point ``t`` at which op ``i`` is still not durable: its covering
        barrier, or the end of the log."""
        covered = self.ops[i].covered_by
        return covered if covered >= 0 else len(self.ops)


def _damage(buf: bytearray, old_size: int, old: bytes, offset: int, length: int, variant: Variant,
            device: Device, rng: random.Random) -> None:
    """Damage a write just applied to ``buf``: ``old`` holds the bytes from the start of the
    write's first sector to its end as they were before it, ``old_size`` the file's length.
    Zeros: the appended part reads as zeros.  A mask: per touched sector that held bytes, the
    write's in-place bytes ``old`` again, ``new``, or garbage (the write's bytes in it, or
    without powersafe overwrite the whole sector)."""
    end = offset + length
    if variant.zeros:
        start = max(offset, old_size)
        buf[start:end] = b"\x00" * max(0, end - start)
        return
    size = device.sector
    first = offset // size
    base = first * size  # where ``old`` starts
    for k, choice in enumerate(variant.mask or ()):
        lo_sector = (first + k) * size
        hi_sector = lo_sector + size
        if lo_sector >= old_size:
            break
        lo, hi = max(offset, lo_sector), min(end, hi_sector, old_size)
        if choice == "old" and hi > lo:
            buf[lo:hi] = old[lo - base:hi - base]
        elif choice == "garbage":
            if not device.powersafe:
                lo, hi = lo_sector, min(hi_sector, len(buf))
            if hi > lo:
                buf[lo:hi] = rng.randbytes(hi - lo)


def _masks(sectors: int, max_masks: int, rng: random.Random) -> List[Tuple[str, ...]]:
    """Every old/new mask of ``sectors`` sectors (``max_masks`` random ones when there are
    more), then each single garbage sector among new ones."""
    if 2 ** sectors <= max_masks:
        masks = [tuple("new" if (m >> k) & 1 else "old" for k in range(sectors)) for m in range(2 ** sectors)]
    else:
        masks = [tuple(rng.choice(("old", "new")) for _ in range(sectors)) for _ in range(max_masks)]
    return masks + [tuple("garbage" if k == g else "new" for k in range(sectors)) for g in range(sectors)]


CLASSES = ("prefix-keep", "prefix-drop", "omit-one", "torn", "torn-alone", "zeros", "zeros-alone")


def enumerate_states(model: CrashModel, *, seed: int, max_masks: int = 256, random_states: int = 0) -> List[State]:
    """Every state of the systematic classes (``CLASSES``), then ``random_states`` seeded
    random ones:

    - ``prefix-keep`` — every crash point ``t`` (0 .. len(log)), every pending op kept;
    - ``prefix-drop`` — every crash point with pending ops, all of them dropped;
    - ``omit-one`` — at the end of every barrier window (the last op before a barrier),
      each op pending there dropped alone (a reordering: later ops persisted, it did not);
    - ``torn`` — each write that touches a sector holding earlier bytes, with every mask of
      its sectors (all old/new masks, at most ``max_masks``, plus each single garbage
      sector), at its crash points (just after it, at the end of its barrier window, and
      just before the barrier that makes it durable), the other pending ops kept;
    - ``torn-alone`` — the same states with every OTHER pending op dropped (the torn write
      persisted without the writes around it);
    - ``zeros`` / ``zeros-alone`` — each append left as zeros at the same crash points,
      other pending ops kept / dropped.

    Identical trees are frequent (a dropped op that changes nothing); :func:`run_states`
    checks each distinct one once."""
    n = len(model.ops)
    states: List[State] = []
    for t in range(n + 1):
        states.append(State("prefix-keep", t))
        if model.pending(t):
            states.append(State("prefix-drop", t, keep_pending=False))
    window_end: Dict[int, int] = {}
    for start, end in model.windows():
        pending = set(model.pending(end))
        for p in range(start, end):
            window_end[p] = end
        for p in sorted(pending):
            if p >= start:
                states.append(State("omit-one", end, dropped=frozenset([p])))
    rng = random.Random(seed)
    for i in range(n):
        points = sorted({i + 1, window_end.get(i, i + 1), model.last_pending(i)})
        sectors = model.in_place_sectors(i)
        if sectors:
            masks = _masks(sectors, max_masks, rng)
            for t in points:
                for mask in masks:
                    seed_i = rng.getrandbits(32)
                    states.append(State("torn", t, variant=Variant(i, mask=mask), seed=seed_i))
                    states.append(State("torn-alone", t, keep_pending=False, variant=Variant(i, mask=mask), seed=seed_i))
        if model.appends(i):
            for t in points:
                states.append(State("zeros", t, variant=Variant(i, zeros=True)))
                states.append(State("zeros-alone", t, keep_pending=False, variant=Variant(i, zeros=True)))
    states += random_sample(model, rng, random_states)
    return states


def random_sample(model: CrashModel, rng: random.Random, count: int) -> List[State]:
    """Seeded random states: a random crash point, a random half of its pending ops kept,
    sometimes a torn kept write or an append left as zeros."""
    out = []
    n = len(model.ops)
    for _ in range(count):
        t = rng.randint(0, n)
        pending = model.pending(t)
        dropped = frozenset(p for p in pending if rng.random() < 0.5)
        kept = [p for p in pending if p not in dropped]
        variant = None
        torn = [p for p in kept if model.in_place_sectors(p)]
        grown = [p for p in kept if model.appends(p)]
        roll = rng.random()
        if torn and roll < 0.3:
            p = rng.choice(torn)
            variant = Variant(p, mask=tuple(rng.choice(("old", "new", "new", "garbage"))
                                            for _ in range(model.in_place_sectors(p))))
        elif grown and roll < 0.6:
            variant = Variant(rng.choice(grown), zeros=True)
        out.append(State("random", t, dropped=dropped, variant=variant, seed=rng.getrandbits(32)))
    return out


def check_replay(model: CrashModel, root: str) -> None:
    """The recorded log, replayed whole, gives exactly the tree on disk: no mutation
    bypassed the seam."""
    live = model.live(len(model.ops))
    real = snapshot(root)
    assert live.keys() == real.keys(), sorted(set(live) ^ set(real))
    for path in live:
        assert live[path] == real[path], path


NOTE = "note: "  # a verdict that held in a documented way (counted, never a violation)


@dataclass
class Outcome:
    """What a campaign found: per state class, states run and distinct trees first seen in
    it, and the violations by (symptom, state class)."""

    states: Dict[str, int] = field(default_factory=dict)
    distinct: int = 0
    distinct_by_kind: Dict[str, int] = field(default_factory=dict)
    violations: Dict[Tuple[str, str], int] = field(default_factory=dict)
    examples: Dict[str, str] = field(default_factory=dict)
    notes: Dict[Tuple[str, str], int] = field(default_factory=dict)  # held, by a documented way (NOTE)
    ops: int = 0  # operations in the recorded log

    def add(self, kind: str, symptom: Optional[str], detail: str = "") -> None:
        """Count one state of class ``kind`` with its verdict (``symptom`` None: it held; a
        symptom starting with ``NOTE``: it held the way the note says, counted apart)."""
        self.states[kind] = self.states.get(kind, 0) + 1
        if symptom is not None and symptom.startswith(NOTE):
            self.notes[(symptom[len(NOTE):], kind)] = self.notes.get((symptom[len(NOTE):], kind), 0) + 1
            self.examples.setdefault(symptom, detail)
        elif symptom is not None:
            self.violations[(symptom, kind)] = self.violations.get((symptom, kind), 0) + 1
            self.examples.setdefault(symptom, detail)

    @property
    def total(self) -> int:
        """States run."""
        return sum(self.states.values())

    @property
    def failed(self) -> int:
        """States that violated a promise."""
        return sum(self.violations.values())

    def table(self) -> str:
        """The counts as text: per class states (distinct trees first seen there), then each
        symptom with its count per class and one example."""
        kinds = sorted(self.states, key=lambda k: (CLASSES + ("random",)).index(k) if k in CLASSES + ("random",) else 99)
        lines = [f"states {self.total} ({self.distinct} distinct trees checked), failing {self.failed}",
                 "  by state class (distinct): " + ", ".join(
                     f"{k} {self.states[k]} ({self.distinct_by_kind.get(k, 0)})" for k in kinds)]
        for table, prefix in ((self.violations, ""), (self.notes, NOTE)):
            for symptom in sorted({s for s, _ in table}):
                row = ", ".join(f"{k} {table[(symptom, k)]}" for k in kinds if (symptom, k) in table)
                lines.append(f"  {prefix}{symptom}: {sum(v for (s, _), v in table.items() if s == symptom)} ({row})")
                lines.append(f"      e.g. {self.examples[prefix + symptom][:300]}")
        return "\n".join(lines)


Check = Callable[[Tree, State], Optional[Tuple[str, str]]]
_FORKED: Dict[str, Any] = {}  # what forked workers of run_states read (set before the fork)


def _check_forked(index: int) -> Tuple[int, Optional[Tuple[str, str]]]:
    model, states, check = _FORKED["model"], _FORKED["states"], _FORKED["check"]
    return index, check(model.build(states[index]), states[index])


def _digest_forked(index: int) -> str:
    return tree_digest(_FORKED["model"].build(_FORKED["states"][index]))


def run_states(model: CrashModel, states: Sequence[State], check: Check, outcome: Outcome, *, jobs: int = 1,
               progress: Optional[Callable[[int, int], None]] = None) -> None:
    """Build every state and check each distinct tree once (identical trees share a
    verdict), in ``jobs`` forked processes; ``progress(done, distinct)`` now and then."""
    verdicts: Dict[str, Optional[Tuple[str, str]]] = {}
    first: Dict[str, int] = {}
    parallel = jobs > 1 and len(states) >= 4 * jobs
    pool: Any = None
    if parallel:
        import multiprocessing

        _FORKED.update(model=model, states=states, check=check)
        pool = multiprocessing.get_context("fork").Pool(jobs)
    try:
        if pool is not None:
            digests = list(pool.imap(_digest_forked, range(len(states)), chunksize=64))
        else:
            digests = [tree_digest(model.build(state)) for state in states]
        for i, digest in enumerate(digests):
            first.setdefault(digest, i)
        todo = sorted(first.values())
        if progress is not None:
            progress(0, len(todo))

        def done(index: int, verdict: Optional[Tuple[str, str]]) -> None:
            verdicts[digests[index]] = verdict
            if progress is not None and len(verdicts) % 200 == 0:
                progress(len(verdicts), len(todo))
        if pool is not None:
            for index, verdict in pool.imap_unordered(_check_forked, todo, chunksize=2):
                done(index, verdict)
        else:
            for index in todo:
                done(index, check(model.build(states[index]), states[index]))
    finally:
        if pool is not None:
            pool.close()
            pool.join()
        _FORKED.clear()
    for index in todo:
        kind = states[index].kind
        outcome.distinct_by_kind[kind] = outcome.distinct_by_kind.get(kind, 0) + 1
    outcome.distinct += len(todo)
    for state, digest in zip(states, digests):
        verdict = verdicts[digest]
        if verdict is None:
            outcome.add(state.kind, None)
        else:
            outcome.add(state.kind, verdict[0], f"[{state.describe()}] {verdict[1]}")
