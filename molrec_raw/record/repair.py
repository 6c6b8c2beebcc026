"""``repair_mrec``: put a crashed record back in place so that every Zarr reader reads it
(issue 10; trajectory §10–§11; spec-notes/trajectory.md "Power cuts").

- **Trajectory**: the state molrec_raw's reader chooses (``trajectory/recovery.py``) is
  written back — the checkpoint's ``zarr.json`` files and tail-shard index pages, shards cut
  back to their durable size, nodes no commit owns and chunks past the committed rows
  removed, arrays cut to their committed rows; temporary files removed; then everything
  under ``trajectory/`` is fsynced and the checkpoint removed (the record is then durable as
  it stands, like one closed cleanly).
- **Metrics**: the WAL past the watermark is cut at its first NUL byte (an append a power
  cut left as zeros) or at a torn last line, as the next writer would — or at its first
  complete line that is not a well-formed event: readers and writers refuse such a line
  (README decision 9), and past the watermark, where nothing was made durable yet, it is
  what a power cut leaves on a device without powersafe overwrite (a torn sector garbles
  earlier lines of the same sector; spec-notes/metrics.md "Power cuts").

``dry_run`` lists the changes and makes none.  Running it twice changes nothing the second
time (the first run leaves no checkpoint, nothing to cut and nothing to remove).

Truthful (spec-notes/safety.md): repair restores what a crash left, never bytes that rotted or
were overwritten — every stored chunk readers read is decoded afterwards (in a dry run: as
readers read it now), and each one that fails (a checksum, torn bytes) is reported in
``damaged``, with metadata that does not parse, nodes no group reaches and committed data
that is gone (record/damage.py); the record is then not ``sound``.  A trajectory found
damaged is left as it lies (no cut, no removal: what reads would drop is not thrown away).  A repair holds the record's writer lock from
before it reads anything (record/locking.py); a dry run is a reader and takes none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, MolrecError
from molrec_raw.record.damage import Damage, as_damage, distinct, record_damage, structure_damage
from molrec_raw.record.doors import check_record_path, open_record, require_record_directory, settle_swap
from molrec_raw.record.locking import lock_writer
from molrec_raw.record.metrics import dense
from molrec_raw.record.metrics.wal import WalFile, complete_part, parse_wal
from molrec_raw.record.trajectory import recovery
from molrec_raw.record.trajectory.common import TRAJ
from molrec_raw.record.trajectory.reader import MrecReader
from molrec_raw.zarr import DirectoryStore, Group, open_group
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.snapshot import apply_plan
from molrec_raw.zarr.store import PathLike

__all__ = ["RepairReport", "repair_mrec"]


@dataclass
class RepairReport:
    """What ``repair_mrec`` found and did: ``changes`` (one line each), ``nstep`` (committed
    frames of the trajectory, None without one), where they were read from, and whether
    the record is ``sound`` afterwards (every reader reads it as molrec_raw does, and no
    chunk fails to decode); ``damaged`` lists the stored chunks no repair can restore."""

    path: str
    changes: List[str] = field(default_factory=list)
    nstep: Optional[int] = None
    source: Optional[str] = None
    reason: Optional[str] = None
    sound: bool = False
    dry_run: bool = False
    damaged: List[Damage] = field(default_factory=list)


def _wal_cut(store: DirectoryStore, group: Optional[Group]) -> Optional[int]:
    """Where the next writer would cut the metrics WAL (None: nothing to cut)."""
    key = f"metrics/{dense.WAL_NAME}"
    size = store.size(key)
    if size is None or group is None:
        return None
    catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
    floor = catalog.wal[1] if catalog.wal is not None else 0
    tail = complete_part(store.get_range(key, floor) or b"")
    keep = floor + len(tail)
    bad = parse_wal(tail, source=key, first_offset=floor, lenient=True).skipped
    if bad:
        keep = bad[0][1]  # the byte offset of the first line that is not a well-formed event
    return keep if keep < size else None


def repair_mrec(path: PathLike, *, dry_run: bool = False, fileops: Optional[FileOps] = None,
                lock: Optional[bool] = None) -> RepairReport:
    """Restore a crashed record in place (see the module docstring); ``dry_run`` only says
    what it would change.  Either way ``damaged`` lists the chunks that do not decode.
    Raises MolrecError when the record cannot be read at all, and WriterLockedError while
    another writer holds the record (``lock`` False: the caller coordinates writers)."""
    target = check_record_path(path)
    ops = fileops if fileops is not None else FileOps()
    if dry_run:
        return _repair(target, True, ops, scan=True)
    with lock_writer(target, writer="repair", lock=lock, fileops=ops):
        settle_swap(target.absolute(), ops)  # an interrupted swap settled first: the record a reader sees
        return _repair(target, False, ops, scan=True)


def _repair(target: Path, dry_run: bool, fileops: FileOps, *, scan: bool) -> RepairReport:
    require_record_directory(target, "repair")
    report = RepairReport(str(target), dry_run=dry_run)
    found: List[Damage] = []  # damage met on the way: reported, never "repaired"
    try:
        open_record(target)  # the version check of a read
    except (InvalidMetadataError, CorruptDataError) as exc:  # meta/ damaged: its version unknown
        found.append(as_damage(exc, "meta"))
    store = DirectoryStore(target, read_only=dry_run, fileops=fileops)
    root = open_group(store, mode="r" if dry_run else "r+", threads=1)
    view: Optional[Tuple[Group, Dict[str, int], Dict[str, MolrecError]]] = None  # the trajectory as readers read it
    found += structure_damage(root)
    if store.size(recovery.CHECKPOINT) is not None or store.size(f"{TRAJ}/zarr.json") is not None:
        try:
            state = recovery.open_state(root)
            state.ranges.close()
            report.nstep, report.source, report.reason = state.nstep, state.source, state.reason
            view = (state.layout.root, state.logical_rows(), state.layout.damage())
            hurt = bool(found) or bool(view[2])  # a damaged trajectory is left as it lies: cutting it would lose data
            if not hurt:
                plan = recovery.plan_recovery(root, state.source, state.reason, state.nstep, state.logical_rows())
        except MolrecError as exc:
            found.append(as_damage(exc, TRAJ))
            hurt = True
        if not hurt:
            report.changes += [f"{a.verb} {a.key}: {a.why}" for a in plan.actions]
            report.changes += [f"remove {p}: a temporary file of an interrupted write" for p in plan.temporary]
            if plan.has_checkpoint:
                report.changes.append(f"remove {recovery.CHECKPOINT}: the record is durable as it stands")
            if not dry_run:
                apply_plan(store, plan.actions)
                for p in plan.temporary:
                    store.remove_temporary(p)
                if plan.actions or plan.temporary or plan.has_checkpoint:
                    store.sync_tree(f"{TRAJ}/")
                if plan.has_checkpoint:
                    store.delete(recovery.CHECKPOINT)
                    store.sync_all()
    try:
        group = root.get("metrics")
        cut = _wal_cut(store, group if isinstance(group, Group) else None)
    except MolrecError as exc:
        found.append(as_damage(exc, "metrics"))
        cut = None
    if cut is not None:
        report.changes.append(f"cut metrics/{dense.WAL_NAME} to {cut} bytes: a torn, zero-filled or damaged "
                              "tail past the watermark")
        if not dry_run:
            wal = WalFile(store, f"metrics/{dense.WAL_NAME}")
            try:
                wal.cut(cut)
            finally:
                wal.close()
    if scan:
        scanned = _damage(target) if not dry_run else _damage_of(root, view)
        report.damaged = distinct(found + scanned)
    if dry_run:
        report.sound = not report.changes and not report.damaged
    else:
        report.sound = not report.damaged and _sound(target)
    return report


def _damage_of(root: Group, trajectory: Optional[Tuple[Group, Dict[str, int], Dict[str, MolrecError]]]
               ) -> List[Damage]:
    """The chunks readers read from ``root`` that fail (the trajectory as read: the root of
    its chosen state, the committed rows of each array, what its reader met damaged)."""
    return record_damage(root, trajectory)


def _damage(target: Path) -> List[Damage]:
    """The damage of the record as it now lies on disk."""
    root = open_group(target, mode="r", threads=1)
    return structure_damage(root) + _scanned(target, root)


def _scanned(target: Path, root: Group) -> List[Damage]:
    """Every chunk readers read that fails, and what the trajectory reader meets damaged."""
    try:
        if not isinstance(root.get(TRAJ), Group):
            return _damage_of(root, None)
        with MrecReader(target) as reader:
            return _damage_of(root, (reader.root, reader.logical_rows(), reader.damaged()))
    except MolrecError as exc:  # the trajectory cannot be opened at all: that, and every other section's
        return [as_damage(exc, TRAJ)] + _damage_of(root, None)


def _sound(target: Path) -> bool:
    """Nothing left to repair, and molrec_raw reads the trajectory from the live state."""
    try:
        again = _repair(target, True, FileOps(), scan=False)
        if again.changes:
            return False
        if not isinstance(open_group(target, mode="r", threads=1).get(TRAJ), Group):
            return True
        with MrecReader(target) as reader:
            return reader.source == "live"
    except MolrecError:
        return False
