"""Crash recovery of a trajectory (trajectory §10–§11; spec-notes/trajectory.md "Power cuts").

The commit protocol survives a killed process by ordering alone.  A power cut also loses
unsynced bytes in any order, so three more pieces close what it could break:

- **The manifest** (``molrec_raw_commit`` in ``trajectory/zarr.json``, written in the same
  atomic replace as ``nstep``): every group and array the commit relies on, with each
  array's committed rows, and the end of the index of every shard landed in since the last
  durable point (``index_ends``).  A reader checks a live state against it — every node
  present, every array long enough, the layout it derives accounting for exactly those rows,
  and each of those shard indexes at least as new as the commit wrote it
  (``Array.check_landed``) — so a marker that persisted without its data is detected, never
  read as fill values.  Another writer that extends the record rewrites ``nstep`` without
  the manifest, which then no longer applies (:meth:`Manifest.from_attrs`).
- **The checkpoint** (``trajectory/__molrec_checkpoint``, a :class:`~molrec_raw.zarr.snapshot.Snapshot`
  written durably at every durable point: creation, ``flush()``, reopening): the
  ``zarr.json`` of every committed node and the index page of every tail shard, which are
  the only bytes later automatic commits change in place.  It is removed by ``close()``
  (the closed record is durable as it stands) and by ``repair``.
- **The choice** (:func:`candidates`): with a checkpoint, a live marker newer than it is
  read only after the rows committed since the checkpoint decode; otherwise (or when that
  fails) the record is read through a :class:`~molrec_raw.zarr.snapshot.SnapshotView` of
  the checkpoint — without writing, so a zip or a read-only mount works.
  :func:`open_state` makes the choice and returns a :class:`CommittedState`: the layout
  chosen, where it comes from, the rows no recovery can roll back (``durable``) and the
  shard index pages the checks proved — what the reader (``reader.py``) consumes.

:func:`plan_recovery` lists what puts the chosen state back in place on disk (for
``MrecWriter.open`` and ``molrec-raw repair``): the checkpoint's files restored, or the
live state cut to its manifest; nodes no commit owns and temporary files removed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.record.trajectory.common import TRAJ
from molrec_raw.record.trajectory.layout import TrajectoryLayout, load_layout
from molrec_raw.record.trajectory.storage import tail_shards
from molrec_raw.zarr import Array, Group, Store, open_group
from molrec_raw.zarr.chunkread import INDEX_CACHE_BYTES, ShardIndexes, check_landed
from molrec_raw.zarr.handles import RangeReader, range_reader
from molrec_raw.zarr.metadata import ArrayMetadata, GroupMetadata, parse_metadata
from molrec_raw.zarr.snapshot import Action, Snapshot, SnapshotView, capture, restore_plan

__all__ = ["CHECKPOINT", "MANIFEST", "Manifest", "read_checkpoint", "candidates", "verify_state",
           "write_checkpoint", "plan_recovery", "recover_in_place", "Recovery", "CommittedState", "open_state"]

CHECKPOINT = f"{TRAJ}/__molrec_checkpoint"  # "__" names are never Zarr nodes (zarr-v3-subset#1)
MANIFEST = "molrec_raw_commit"
RULE = "trajectory#10"
_VERIFY_ROWS_BYTES = 64 << 20  # rows verified per read when checking what landed since a checkpoint


@dataclass
class Manifest:
    """What the commit of ``nstep`` frames relies on: group paths and array path ->
    committed rows (relative to ``trajectory/``), and array path -> {shard key relative to
    the array -> the end of the index the commit's landings left in it} for the shards
    landed in since the last durable point (the only index pages a power cut can leave
    older than the marker; a durable commit has none)."""

    nstep: int = 0
    groups: List[str] = field(default_factory=list)
    arrays: Dict[str, int] = field(default_factory=dict)
    index_ends: Dict[str, Dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"nstep": self.nstep, "groups": sorted(self.groups),
                               "arrays": dict(sorted(self.arrays.items()))}
        ends = {path: dict(sorted(shards.items())) for path, shards in sorted(self.index_ends.items()) if shards}
        if ends:
            out["index_ends"] = ends
        return out

    @classmethod
    def from_attrs(cls, attrs: Dict[str, Any]) -> Optional["Manifest"]:
        """The manifest of the commit ``attrs`` describe; None when there is none, or when
        it describes another ``nstep`` (another writer committed since, or the marker was
        edited by hand: the manifest is not about these frames)."""
        raw = attrs.get(MANIFEST)
        if raw is None:
            return None
        get = raw.get if isinstance(raw, dict) else (lambda key: None)
        nstep, groups, arrays, ends = get("nstep"), get("groups"), get("arrays"), get("index_ends")
        if ends is None:
            ends = {}
        if not (type(nstep) is int and isinstance(groups, list) and all(isinstance(g, str) for g in groups)
                and isinstance(arrays, dict)
                and all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in arrays.items())
                and isinstance(ends, dict)
                and all(isinstance(path, str) and isinstance(shards, dict) for path, shards in ends.items())
                and all(isinstance(k, str) and type(v) is int and v >= 0
                        for shards in ends.values() for k, v in shards.items())):
            raise CorruptDataError(f"malformed {MANIFEST} attribute", node="/trajectory", rule=RULE)
        if nstep != attrs.get("nstep", 0):
            return None
        return cls(nstep, list(groups), dict(arrays), {path: dict(shards) for path, shards in ends.items()})

    def nodes(self) -> List[str]:
        """Store paths of every node, the trajectory group first."""
        return [TRAJ] + [f"{TRAJ}/{p}" for p in sorted(set(self.groups) | set(self.arrays))]

    def lengths(self) -> Dict[str, int]:
        return {f"{TRAJ}/{p}": n for p, n in self.arrays.items()}


def _attrs_of(raw: Optional[bytes]) -> Optional[Dict[str, Any]]:
    """The attributes of a group zarr.json, or None when it is missing or unreadable."""
    if raw is None:
        return None
    try:
        meta = parse_metadata(raw)
    except MolrecError:
        return None
    return dict(meta.attributes) if isinstance(meta, GroupMetadata) else None


def _nstep_of(attrs: Optional[Dict[str, Any]]) -> Optional[int]:
    if attrs is None:
        return None
    n = attrs.get("nstep", 0)
    return n if type(n) is int and n >= 0 else None


def read_checkpoint(store: Store) -> Optional[Snapshot]:
    """The trajectory's checkpoint, or None: a record closed cleanly has none, and an
    unreadable one is a *first* checkpoint a power cut caught before its sync — every
    later one replaces its predecessor durably — written after everything it would
    describe was synced, so the live state stands on its own."""
    raw = store.get(CHECKPOINT)
    if raw is None:
        return None
    try:
        return Snapshot.from_bytes(raw, CHECKPOINT)
    except CorruptDataError:
        return None


def checkpoint_attrs(snapshot: Snapshot) -> Dict[str, Any]:
    attrs = _attrs_of(snapshot.metadata.get(f"{TRAJ}/zarr.json"))
    if attrs is None:
        raise CorruptDataError("the checkpoint holds no trajectory metadata", key=CHECKPOINT, rule=RULE)
    return attrs


@dataclass
class Candidate:
    """A state to open: ``root`` (live, or over the checkpoint), where it comes from, and
    the checkpoint's committed rows when the live state must prove what landed since;
    ``strict``: checked against its manifest (a checkpoint exists)."""

    root: Group
    source: str  # "live" | "checkpoint"
    since: Optional[Dict[str, int]] = None
    strict: bool = True


def candidates(root: Group) -> List[Candidate]:
    """The states a reader tries, in order (see the module docstring)."""
    store = root.store
    snapshot = read_checkpoint(store)
    if snapshot is None:
        return [Candidate(root, "live", strict=False)]
    attrs = checkpoint_attrs(snapshot)
    view = open_group(SnapshotView(store, snapshot, f"{TRAJ}/"), mode="r", threads=root.threads, limits=root.limits)
    live = _nstep_of(_attrs_of(store.get(f"{TRAJ}/zarr.json")))
    ckpt = _nstep_of(attrs) or 0
    if live is not None and live > ckpt:
        manifest = Manifest.from_attrs(attrs)
        since = manifest.arrays if manifest is not None else {}
        return [Candidate(root, "live", since), Candidate(view, "checkpoint")]
    return [Candidate(view, "checkpoint")]


def verify_state(tgroup: Group, logical: Dict[str, int], opened: Dict[str, Array],
                 since: Optional[Dict[str, int]], strict: bool, ranges: Optional[RangeReader] = None,
                 indexes: Optional[ShardIndexes] = None, damaged: Optional[Dict[str, MolrecError]] = None,
                 partial: Optional[Dict[str, MolrecError]] = None) -> None:
    """Check an opened state against its manifest (see the module docstring).  ``logical``:
    array path -> the rows the reader derived (``opened``: the arrays it opened for them);
    ``since``: the checkpoint's committed rows (the rows past them are decoded).  Raises
    CorruptDataError naming what is missing.  Not ``strict`` (no checkpoint: a record
    closed cleanly, written with ``durable=False``, or edited by hand): only each array's
    tail shard index is checked, the reader stays as lenient as trajectory §11 asks.
    ``ranges`` reads the shards' index pages (default: the store's own reader), ``indexes``
    keeps them, trusted for the rows committed.  ``damaged`` (no other state to fall back
    on): an array whose index pages fail is noted there (path -> error) instead of refusing
    the whole state — every read of it checks its pages again and refuses (spec-notes/safety.md
    "Damage costs only the reads that need it"); an index page that is whole but has entries
    past the end of its shard (a shard cut short) costs only those inner chunks, noted in
    ``partial`` (path -> the error naming them)."""
    manifest = Manifest.from_attrs(dict(tgroup.attrs)) if strict else None
    for rel in manifest.groups if manifest is not None else []:
        if not isinstance(tgroup.get(rel), Group):
            raise CorruptDataError(f"the commit relies on group {rel!r}, which is missing",
                                   node=f"/{TRAJ}/{rel}", rule=RULE)
    for rel, rows in manifest.arrays.items() if manifest is not None else []:
        node = opened.get(f"{TRAJ}/{rel}") or tgroup.get(rel)
        where = f"/{TRAJ}/{rel}"
        if not isinstance(node, Array) or not node.shape or node.shape[0] < rows:
            raise CorruptDataError(f"the commit relies on {rows} rows of {rel!r}, which it does not hold",
                                   node=where, rule=RULE)
        derived = logical.get(node.path)
        if derived != rows:
            raise CorruptDataError(f"the commit holds {rows} rows of {rel!r}, the layout accounts for {derived}",
                                   node=where, rule=RULE)
        opened.setdefault(node.path, node)
    # each shard landed in since the last durable point holds an index at least as new as
    # the commit wrote it; older shards were durable and untouched since
    ends = manifest.index_ends if manifest is not None else {}
    for rel in ends:
        if f"{TRAJ}/{rel}" not in opened:
            raise CorruptDataError(f"the commit landed in {rel!r}, which it does not name among its arrays",
                                   node=f"/{TRAJ}/{rel}", rule=RULE)
    # a commit with a manifest was written by a writer that stores every positional shard it
    # lands rows in: such a shard of committed rows that is not stored was deleted since (its
    # rows are never fill values); with ``damaged`` the array's reads refuse, the others read.
    # Reads take the same rule when every array read is still as that writer made it
    # (start-indexed shards); a store rewritten by another writer keeps Zarr's fill values.
    stored_all = manifest is not None or (damaged is not None and Manifest.from_attrs(dict(tgroup.attrs)) is not None)
    if indexes is not None:
        indexes.strict = manifest is not None or (stored_all and _positional(tgroup, logical, opened))
    # and every tail shard's index is checked now (checksum, entries inside the shard; under
    # ``stored_all`` it must be stored), the others when a read first reads them
    pages = ranges if ranges is not None else range_reader(tgroup.store)
    try:
        for path, rows in logical.items():
            array = opened.get(path)
            if array is None:
                node = tgroup.get(path[len(TRAJ) + 1:])
                array = node if isinstance(node, Array) else None
            if array is None:
                continue
            tail: Optional[int] = 0 if stored_all else None  # 0: stored, whatever its index's end
            landed: Dict[str, Optional[int]] = dict.fromkeys(tail_shards(array, rows), tail)
            landed.update({f"{path}/{key}": end for key, end in ends.get(path[len(TRAJ) + 1:], {}).items()})
            try:
                cut = check_landed(array, landed, pages, indexes, trusted=rows, lenient=damaged is not None)
            except CorruptDataError as exc:
                if damaged is None:
                    raise
                damaged[path] = exc
                continue
            if cut and partial is not None:
                partial[path] = _cut_short(array, cut)
    finally:
        if ranges is None:
            pages.close()
    if manifest is None:
        return
    if since is not None:
        for rel, rows in manifest.arrays.items():
            _decode_rows(opened[f"{TRAJ}/{rel}"], since.get(rel, 0), rows)


def _cut_short(array: Array, cut: Dict[str, List[int]]) -> CorruptDataError:
    """The damage of an array whose shards hold index entries past their end (``cut``: shard
    key -> those entries): the rows of each inner chunk lost, named."""
    sharding = array.pipeline.sharding
    assert sharding is not None
    rows, per = int(sharding.chunk_shape[0]), int(sharding.chunks_per_shard[0])
    named = []
    for key, slots in sorted(cut.items()):
        shard = int(key.rsplit("/c/", 1)[1].split("/")[0])
        first, last = shard * per + slots[0], shard * per + slots[-1]
        named.append(f"{key}: {len(slots)} inner chunk(s) from {first} to {last} (rows {first * rows} to "
                     f"{min((last + 1) * rows, array.shape[0]) - 1})")
    return CorruptDataError("shard index points past the end of the shard: " + "; ".join(named)
                            + " - reads of those rows refuse, the other rows read", node=f"/{array.path}",
                            key=sorted(cut)[0], rule="zarr-v3-subset#7")


def _positional(tgroup: Group, logical: Dict[str, int], opened: Dict[str, Array]) -> bool:
    """Every array read is stored in start-indexed shards (the positional writer's form)."""
    for path in logical:
        array = opened.get(path)
        if array is None:
            node = tgroup.get(path[len(TRAJ) + 1:])
            array = node if isinstance(node, Array) else None
        sharding = None if array is None else array.pipeline.sharding
        if sharding is None or sharding.index_location != "start":
            return False
    return True


def _decode_rows(array: Array, start: int, stop: int) -> None:
    """Decode rows ``[start, stop)`` (every chunk checksum verified), a bounded piece at a time."""
    per_row = max(1, (array.metadata.dtype.itemsize or 16) * max(1, array.size // max(1, array.shape[0])))
    step = max(array.chunks[0], _VERIFY_ROWS_BYTES // per_row)
    for lo in range(start, stop, step):
        array[lo:min(stop, lo + step)]


def write_checkpoint(store: Store, manifest: Manifest, durable: bool = True) -> None:
    """Capture the committed state (the marker on disk, the manifest's nodes and tail
    shards) and write it; ``durable``: its bytes are synced before its name moves (needed
    when it replaces an older checkpoint, which protects the state until then)."""
    raw = capture(store, manifest.nodes(), manifest.lengths()).to_bytes()
    if durable:
        store.replace_durable(CHECKPOINT, raw)
    else:
        store.replace_atomic(CHECKPOINT, raw)


@dataclass
class Recovery:
    """What recovering a record in place involves: the state chosen (``source``, ``nstep``),
    why the live one was not (``reason``), and the changes (``actions``)."""

    source: str
    nstep: int
    reason: Optional[str]
    actions: List[Action]
    temporary: List[str]
    has_checkpoint: bool

    @property
    def needs_repair(self) -> bool:
        """Other readers would not see what molrec_raw reads: the live state is damaged."""
        return self.source == "checkpoint" and bool(self.actions)


def plan_recovery(root: Group, source: str, reason: Optional[str], nstep: int,
                  logical: Dict[str, int]) -> Recovery:
    """The changes that put the state a reader chose back in place: the checkpoint's files
    (``source`` "checkpoint"), or the live state cut to what the reader reads (``logical``:
    array path -> rows; the manifest's groups and the groups holding those arrays stay,
    every other node goes, every array is cut to its rows)."""
    store = root.store
    snapshot = read_checkpoint(store)
    target: Optional[Snapshot] = None
    if source == "checkpoint":
        assert snapshot is not None, "a checkpoint state comes from a checkpoint"
        target = snapshot
    else:
        tgroup = root.get(TRAJ)
        manifest = Manifest.from_attrs(dict(tgroup.attrs)) if isinstance(tgroup, Group) else None
        if manifest is not None:
            nodes = set(manifest.nodes()) | set(logical)
            for path in list(nodes):  # the groups holding every node
                parts = path.split("/")
                nodes.update("/".join(parts[:k]) for k in range(1, len(parts)))
            target = _shrunk(capture(store, sorted(nodes), logical), logical)
    actions = restore_plan(store, target, f"{TRAJ}/", keep=[CHECKPOINT]) if target is not None else []
    temporary = list(getattr(store, "temporary_files", lambda prefix: [])(f"{TRAJ}/"))
    return Recovery(source, nstep, reason, actions, temporary, store.size(CHECKPOINT) is not None)


def _shrunk(snapshot: Snapshot, lengths: Dict[str, int]) -> Snapshot:
    """The snapshot with every array published past its committed rows (an interrupted
    commit) given its committed shape back."""
    metadata = dict(snapshot.metadata)
    for path, rows in lengths.items():
        key = f"{path}/zarr.json"
        meta = parse_metadata(metadata[key])
        if isinstance(meta, ArrayMetadata) and meta.shape and meta.shape[0] > rows:
            metadata[key] = meta.with_shape((rows,) + tuple(meta.shape[1:])).to_json()
    return Snapshot(metadata, snapshot.shards)


@dataclass
class CommittedState:
    """A trajectory state chosen and proved by :func:`open_state`: its ``layout``, the
    ``source`` ("live" or "checkpoint") and why the live state was not used (``reason``),
    ``durable``: array path -> leading rows no recovery can roll back (all of them but for
    a live state past a checkpoint, whose rows past the checkpoint's are not yet durable),
    and the shard ``indexes`` its checks read through ``ranges`` (owned by the state's
    user, who closes ``ranges``)."""

    layout: TrajectoryLayout
    source: str
    reason: Optional[str]
    durable: Dict[str, int]
    indexes: ShardIndexes
    ranges: RangeReader

    @property
    def nstep(self) -> int:
        """Committed frames of the state."""
        return self.layout.nstep

    def logical_rows(self) -> Dict[str, int]:
        """Store path -> the committed rows read of every array (what recovery cuts to)."""
        return dict(self.layout.logical)


def open_state(root: Group, verified: Optional[Dict[str, int]] = None,
               index_budget: int = INDEX_CACHE_BYTES) -> CommittedState:
    """The state a reader reads (the module docstring's choice), nothing written: each
    candidate is loaded and checked against its manifest; the first that passes is
    returned, the last one's error raised when none does.  ``verified``: array path ->
    rows an earlier state already proved (a refresh decodes only the rows since)."""
    attempts = candidates(root)
    reason: Optional[str] = None
    for n, attempt in enumerate(attempts):
        ranges = range_reader(attempt.root.store)
        indexes = ShardIndexes(index_budget)
        try:
            layout = load_layout(attempt.root)
            if layout.tgroup is not None:
                since = attempt.since
                if since is not None and verified:
                    since = dict(since)
                    for path, rows in verified.items():
                        rel = path[len(TRAJ) + 1:]
                        since[rel] = max(since.get(rel, 0), rows)
                last = n == len(attempts) - 1
                verify_state(layout.tgroup, layout.logical, layout.arrays, since, attempt.strict, ranges, indexes,
                             damaged=layout.damaged_arrays if last else None, partial=layout.damaged_parts)
        except MolrecError as exc:
            ranges.close()
            if n == len(attempts) - 1:
                raise
            reason = f"the live state is not what its commit says ({exc})"
            continue
        if attempt.source == "live" and attempt.since is not None:
            durable = {f"{TRAJ}/{rel}": rows for rel, rows in attempt.since.items()}
        else:
            durable = dict(layout.logical)
        return CommittedState(layout, attempt.source, reason, durable, indexes, ranges)
    raise AssertionError("unreachable: candidates() gives at least one state")  # pragma: no cover


def recover_in_place(root: Group) -> Recovery:
    """Put the state a reader chooses back in place (``MrecWriter.open``, ``repair``):
    apply the plan, remove temporary files, make the trajectory durable as it now stands.
    The checkpoint is left for the caller (a writer replaces it, ``repair`` removes it)."""
    from molrec_raw.zarr.snapshot import apply_plan

    state = open_state(root)
    state.ranges.close()
    plan = plan_recovery(root, state.source, state.reason, state.nstep, state.logical_rows())
    store = root.store
    apply_plan(store, plan.actions)
    for path in plan.temporary:
        store.remove_temporary(path)  # type: ignore[attr-defined]  # only a DirectoryStore lists them
    if plan.actions or plan.temporary or plan.has_checkpoint:
        store.sync_tree(f"{TRAJ}/")
    return plan
