"""A crash-state simulator for power cuts (issue 10), after SQLite's crash VFS and ALICE
(Pillai et al., OSDI 2014).  One implementation, used by the suite
(``tests/powercut/test_powercut.py``) and by the long campaign (``bench/powercut.py``).

1. **Record.**  A workload runs against the real file system through :class:`Recorder`, a
   :class:`~molrec_raw.zarr.fileops.FileOps` that performs every mutation and logs it
   (create, write at an offset, truncate, fsync of a file, fsync of a directory, rename,
   exchange, unlink, mkdir, rmdir).  Every mutation of a record goes through that seam, so
   the log is complete: replaying all of it reproduces the real tree byte for byte
   (:func:`check_replay` proves it for each workload).
2. **Model.**  :class:`CrashModel` replays the log over inodes and directory entries and
   builds post-crash trees under this persistence model:

   - a file's data writes become durable at that file's fsync; directory entries
     (create, rename, exchange, unlink, mkdir, rmdir) at the fsync of the directory holding
     the new name; everything after the last covering barrier may be kept, dropped, or kept
     out of order;
   - an in-place write may tear at 512-byte sectors (each sector old, new or garbage);
   - an append may persist the new length with zeros in place of the data;
   - a rename may persist while the renamed file's data does not (it falls out of the
     model: the rename is kept, the file's unsynced writes are dropped).
3. **Enumerate.**  :func:`enumerate_states` lists, per workload: every prefix of the log
   with its pending operations kept and dropped; omit-one reorderings inside each barrier
   window; every old/new sector mask of each in-place write plus one garbage sector; zeros
   for each append; then seeded random states on top.  Identical trees are checked once.
"""
from __future__ import annotations

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

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
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
    """How one kept op is damaged: a sector mask (torn in-place write) or zeros (append)."""

    op: int
    mask: Optional[Tuple[str, ...]] = None  # per in-place sector: "old" | "new" | "garbage"
    zeros: bool = False


@dataclass
class State:
    kind: str  # which enumeration produced it (prefix-keep, prefix-drop, omit-one, torn, zeros, random)
    t: int  # ops [0, t) happened
    dropped: frozenset = frozenset()  # pending ops (index < t) left out
    keep_pending: bool = True  # False: every pending op is dropped
    variant: Optional[Variant] = None
    seed: int = 0

    def describe(self) -> str:
        parts = [f"{self.kind} t={self.t}"]
        if not self.keep_pending:
            parts.append("pending dropped")
        if self.dropped:
            parts.append(f"dropped={sorted(self.dropped)}")
        if self.variant is not None:
            v = self.variant
            parts.append(f"op {v.op} " + ("zeros" if v.zeros else f"mask={','.join(m[0] for m in v.mask or ())}"))
        return " ".join(parts)


class CrashModel:
    """Post-crash trees of a recorded log over an initial (durable) tree."""

    def __init__(self, initial: Tree, log: Sequence[Op]) -> None:
        self.initial = initial
        self.log = list(log)
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
            if variant is not None:
                data = _damaged(bytes(buf), offset, data, variant, rng or random.Random(0))
            if offset > len(buf):
                buf.extend(b"\x00" * (offset - len(buf)))
            buf[offset:offset + len(data)] = data
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
            durable = 0 <= r.covered_by < state.t
            if not durable and (not state.keep_pending or i in state.dropped):
                continue
            variant = state.variant if state.variant is not None and state.variant.op == i else None
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
        """512-byte sectors an op overwrites in place (in the full replay)."""
        r = self.ops[i]
        if r.op.kind != "write":
            return 0
        lo, hi = r.op.arg, min(r.op.arg + len(r.op.data), r.old_size)
        return 0 if hi <= lo else (hi - 1) // SECTOR - lo // SECTOR + 1

    def appends(self, i: int) -> bool:
        r = self.ops[i]
        return r.op.kind == "write" and r.op.arg + len(r.op.data) > r.old_size and len(r.op.data) > 0


def _damaged(old: bytes, offset: int, data: bytes, variant: Variant, rng: random.Random) -> bytes:
    """The bytes a damaged write leaves at ``[offset, offset+len(data))``."""
    out = bytearray(data)
    in_place_end = min(len(old), offset + len(data))
    if variant.zeros:
        start = max(0, in_place_end - offset)
        out[start:] = b"\x00" * (len(out) - start)
        return bytes(out)
    mask = variant.mask or ()
    if in_place_end <= offset:
        return bytes(out)
    first = offset // SECTOR
    for k, choice in enumerate(mask):
        lo = max(offset, (first + k) * SECTOR)
        hi = min(in_place_end, (first + k + 1) * SECTOR)
        if hi <= lo:
            break
        if choice == "old":
            out[lo - offset:hi - offset] = old[lo:hi]
        elif choice == "garbage":
            out[lo - offset:hi - offset] = bytes(rng.getrandbits(8) for _ in range(hi - lo))
    return bytes(out)


def enumerate_states(model: CrashModel, *, seed: int, max_masks: int = 256, random_states: int = 0) -> List[State]:
    """The systematic states of a log (see the module docstring), then ``random_states``
    seeded random ones."""
    n = len(model.ops)
    states: List[State] = []
    for t in range(n + 1):
        states.append(State("prefix-keep", t))
        if model.pending(t):
            states.append(State("prefix-drop", t, keep_pending=False))
    for start, end in model.windows():
        pending = set(model.pending(end))
        for p in range(start, end):
            if p in pending:
                states.append(State("omit-one", end, dropped=frozenset([p])))
    rng = random.Random(seed)
    window_end = {}
    for start, end in model.windows():
        for i in range(start, end):
            window_end[i] = end
    for i in range(n):
        sectors = model.in_place_sectors(i)
        if sectors:
            masks: List[Tuple[str, ...]]
            if 2 ** sectors <= max_masks:
                masks = [tuple("new" if (m >> k) & 1 else "old" for k in range(sectors)) for m in range(2 ** sectors)]
            else:
                masks = [tuple(rng.choice(("old", "new")) for _ in range(sectors)) for _ in range(max_masks)]
            masks += [tuple("garbage" if k == g else "new" for k in range(sectors)) for g in range(sectors)]
            for t in sorted({i + 1, window_end.get(i, i + 1)}):
                for mask in masks:
                    states.append(State("torn", t, variant=Variant(i, mask=mask), seed=rng.getrandbits(32)))
        if model.appends(i):
            for t in sorted({i + 1, window_end.get(i, i + 1)}):
                states.append(State("zeros", t, variant=Variant(i, zeros=True)))
    states += random_sample(model, rng, random_states)
    return states


def random_sample(model: CrashModel, rng: random.Random, count: int) -> List[State]:
    """Seeded random states: a random crash point, a random half of its pending ops kept,
    sometimes a torn kept in-place write or an append left as zeros."""
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


@dataclass
class Outcome:
    """What a campaign found: per state kind, states run and distinct trees checked, and
    the violations by (symptom, state kind)."""

    states: Dict[str, int] = field(default_factory=dict)
    distinct: int = 0
    violations: Dict[Tuple[str, str], int] = field(default_factory=dict)
    examples: Dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, symptom: Optional[str], detail: str = "") -> None:
        self.states[kind] = self.states.get(kind, 0) + 1
        if symptom is not None:
            self.violations[(symptom, kind)] = self.violations.get((symptom, kind), 0) + 1
            self.examples.setdefault(symptom, detail)

    @property
    def total(self) -> int:
        return sum(self.states.values())

    @property
    def failed(self) -> int:
        return sum(self.violations.values())

    def merge(self, other: "Outcome") -> None:
        for k, v in other.states.items():
            self.states[k] = self.states.get(k, 0) + v
        for k, v in other.violations.items():
            self.violations[k] = self.violations.get(k, 0) + v
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)
        self.distinct += other.distinct

    def table(self) -> str:
        kinds = sorted(self.states)
        lines = [f"states {self.total} ({self.distinct} distinct trees checked), failing {self.failed}",
                 "  by state kind: " + ", ".join(f"{k} {self.states[k]}" for k in kinds)]
        symptoms = sorted({s for s, _ in self.violations})
        for symptom in symptoms:
            row = ", ".join(f"{k} {self.violations[(symptom, k)]}" for k in kinds if (symptom, k) in self.violations)
            lines.append(f"  {symptom}: {sum(v for (s, _), v in self.violations.items() if s == symptom)} ({row})")
            lines.append(f"      e.g. {self.examples[symptom][:300]}")
        return "\n".join(lines)


def run_states(model: CrashModel, states: Iterable[State], check: Callable[[Tree, State], Optional[Tuple[str, str]]],
               outcome: Outcome) -> None:
    """Build every state, check each distinct tree once (identical trees share a verdict)."""
    verdicts: Dict[str, Optional[Tuple[str, str]]] = {}
    for state in states:
        tree = model.build(state)
        digest = tree_digest(tree)
        if digest not in verdicts:
            verdicts[digest] = check(tree, state)
            outcome.distinct += 1
        verdict = verdicts[digest]
        if verdict is None:
            outcome.add(state.kind, None)
        else:
            outcome.add(state.kind, verdict[0], f"[{state.describe()}] {verdict[1]}")
