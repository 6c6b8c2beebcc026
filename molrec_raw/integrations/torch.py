"""PyTorch reads a collection (``*.mrec.lmdb``), or a dataset of shards, as a map-style
dataset: :class:`MrecDataset`; :class:`ShardSampler` hands each rank of a distributed job
whole shards.

``MrecDataset(source, keys=None, transform=None)`` takes one collection file, a
:class:`~molrec_raw.dataset.Dataset`, or what ``open_dataset`` takes (a directory of shards,
a glob, a list).  It has one item per trajectory frame (``len(ds)`` is the frames of every
record; item ``j`` is global frame ordinal ``j``: record ``r``'s frame ``k`` where
``first_frame[r] <= j < first_frame[r] + n_frames[r]``, records numbered over the shards in
dataset order).  A record without a trajectory, or with zero frames, has no item (decision
in spec-notes/collection.md, "PyTorch").  ``ds.shard_spans`` holds each shard's items
``(start, stop)``.  An item is a dict of tensors, the reader's view of the frame (system and
trajectory ``atoms`` as one block):

* ``positions`` (n, 3) from ``atoms/x y z``; ``forces`` (n, 3) from ``atoms/fx fy fz``;
* ``atomic_numbers`` (n,) int64, from ``atoms/atomic_number`` or else ``atoms/element``;
* ``energy`` () from the per-step meta key ``pe``;
* ``cell`` (3, 3), lattice vectors as ROWS (the convention of ASE and the ML tools built on
  it; a record stores them as columns, :mod:`molrec_raw.integrations.conventions`), zeros
  without a cell; ``pbc`` (3,) bool, false without a cell;
* ``record`` and ``frame`` () int64: where the item came from;
* and any ``"atoms/<column>"`` or declared per-step meta key asked for in ``keys``.

Units (frame-and-types §13.5, collection#C1): ``units=None`` hands values over as stored, in the
collection's units; ``units=`` (a preset name such as ``"metal"``, a units object like
``{"length": "nm", "energy": "kJ/mol"}``, or a ``conventions.Units``) converts ``positions``,
``cell``, ``forces``, ``energy`` and canonical ``atoms/<column>``/per-step keys to them through
the package's one table.  Either way ``ds.units`` maps each key with a unit to the unit its
tensors are in (``{"positions": "angstrom", "forces": "eV/angstrom", ...}``); a key whose unit
the collection (or the target) does not state is refused when the dataset is made, naming it.
Dtypes are the stored ones (``f64`` columns give float64 tensors: cast in ``transform``).
``keys=None`` takes every standard name the collection has; a name asked for that it lacks is
an InvalidValueError when the dataset is made.  :meth:`MrecDataset.collate` (pass it as the
``DataLoader``'s ``collate_fn``) concatenates per-atom tensors and stacks per-frame ones, and
adds ``batch`` (each atom's item in the batch) and ``ptr`` (item ``i``'s atoms are
``ptr[i]:ptr[i+1]``) — the PyG convention.

Speed: ``DataLoader`` hands the dataset a whole batch of indices (``__getitems__``); the
dataset reads them with one :meth:`CollectionReader.batch` per distinct frame ordinal, and
``collate`` returns that batch as it is (items are only split out when a ``transform`` runs
or a wrapper asks for one).  A batch's tensors are disjoint views of one storage (each its
own copy of the values): a worker's batch crosses to the parent as one shared-memory segment.
Processes: each ``DataLoader`` worker reads through its own LMDB
environment — the reader a forked worker inherits reopens the file at its first use there,
and the dataset pickles as its path (or its dataset's shard table) and keys (``spawn``
workers open it anew).

Distributed training (spec-notes/dataset.md "Training with DDP"): with
``torch.utils.data.DistributedSampler`` every item is read once per epoch over the ranks
(items padded by repetition when the ranks' shares differ, as that sampler does).
:class:`ShardSampler` gives each rank whole shards instead, so that a rank reads (and a
node's cache stages) only its own shards.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from molrec_raw.dataset import Dataset, open_dataset
from molrec_raw.errors import InvalidValueError
from molrec_raw.integrations.conventions import COLUMN_QUANTITIES, FORCES, POSITIONS, Units, atomic_numbers, require
from molrec_raw.record.units import DERIVED, META_KEY_QUANTITIES, SCALE, parse_units, unit_factors, unit_of

if TYPE_CHECKING:
    from molrec_raw.collection.reader import CollectionReader

torch = require("torch", "torch")

__all__ = ["MrecDataset", "ShardSampler", "STANDARD_KEYS", "collate"]

ATOMS = "atoms"
#: The names an item has when ``keys`` is None (those the collection holds).
STANDARD_KEYS = ("positions", "atomic_numbers", "forces", "energy", "cell", "pbc", "record", "frame")
_PER_ATOM = frozenset(("positions", "atomic_numbers", "forces"))
_ENERGY = "pe"
Sample = Dict[str, Any]


_Dataset: Any = torch.utils.data.Dataset


class MrecDataset(_Dataset):  # type: ignore[misc]
    """A map-style dataset over a collection's trajectory frames (see the module docstring):
    ``len``, ``ds[j]`` (a dict of tensors), ``ds.__getitems__(indices)`` (what a
    ``DataLoader`` calls), ``MrecDataset.collate`` (its ``collate_fn``), ``ds.close()``."""

    def __init__(self, source: Any, *, keys: Optional[Iterable[str]] = None,
                 transform: Optional[Callable[[Sample], Sample]] = None, units: Any = None) -> None:
        self._path = source
        self._target = units
        self._reader = _open_source(source)
        self.transform = transform
        counts = _frame_counts(self._reader)
        self._first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)  # (collection#C9: first_frame)
        self._with_frames = np.flatnonzero(counts > 0)  # records that have items, in record order
        self._starts = self._first[self._with_frames]
        self._n = int(counts.sum())
        self.shard_spans = _shard_spans(self._reader, self._first, self._n)
        self.keys = self._resolve_keys(None if keys is None else list(keys))
        self.units, self._factors = _units_of_keys(self.keys, self._reader.units, units, _label(self._reader))

    # -- what an item holds --------------------------------------------------------------
    def _resolve_keys(self, asked: Optional[List[str]]) -> Tuple[str, ...]:
        c = self._reader
        schema = c.sequence_schema if isinstance(c, Dataset) else c.schema
        atoms = set(schema.columns(ATOMS)) if ATOMS in schema.block_names() else set()
        if self._n:  # the system's columns are per record: the first item's tell what there is
            probe = c.batch([int(self._with_frames[0])], frame=0)
            atoms |= {k.split("/", 1)[1] for k in probe if k.startswith(ATOMS + "/") and "/_validity/" not in k}
        meta = {name for name, _ in schema.meta_keys()}
        have = {"record", "frame", "cell", "pbc"}
        if set(POSITIONS) <= atoms:
            have.add("positions")
        if set(FORCES) <= atoms:
            have.add("forces")
        if "atomic_number" in atoms or "element" in atoms:
            have.add("atomic_numbers")
        if _ENERGY in meta:
            have.add("energy")
        if asked is None:
            return tuple(k for k in STANDARD_KEYS if k in have)
        missing = [k for k in asked if k not in have and not (k.startswith(ATOMS + "/") and k[6:] in atoms)
                   and k not in meta]
        if missing:
            raise InvalidValueError(f"the collection has no {missing} for a dataset item (it has "
                                    f"{sorted(have)}, atoms columns {sorted(atoms)}, per-step meta {sorted(meta)})",
                                    store=_label(c))
        return tuple(dict.fromkeys(asked))

    def __len__(self) -> int:
        """The number of items: the collection's trajectory frames."""
        return self._n

    def locate(self, j: int) -> Tuple[int, int]:
        """Item ``j``'s record and frame ordinal in it (negative ``j`` counts from the end)."""
        n = int(j) + self._n if int(j) < 0 else int(j)
        if not 0 <= n < self._n:
            raise IndexError(f"item {j} of a dataset of {self._n} frames")
        at = int(np.searchsorted(self._starts, n, side="right")) - 1
        r = int(self._with_frames[at])
        return r, n - int(self._first[r])

    # -- reading -------------------------------------------------------------------------
    def __getitem__(self, j: int) -> Sample:
        """Item ``j`` as a dict of tensors (``transform`` applied)."""
        item: Sample = self.__getitems__([j])[0]
        return item

    def __getitems__(self, indices: Sequence[int]) -> "Samples":
        """Items ``indices`` read as one batch; a sequence of items whose whole batch
        ``collate`` returns as it is (when no ``transform`` runs)."""
        batch = self.read_batch(indices)
        samples = Samples(batch)
        if self.transform is None:
            return samples
        return Samples(None, [self.transform(s) for s in samples])

    def read_batch(self, indices: Sequence[int]) -> Dict[str, Any]:
        """Items ``indices`` collated (what ``collate`` makes of them): per-atom tensors
        concatenated, per-item ones stacked, ``batch`` and ``ptr``."""
        j = np.asarray(indices, dtype=np.int64).reshape(-1)
        if j.size and (int(j.min()) < -self._n or int(j.max()) >= self._n):
            bad = int(j[(j < -self._n) | (j >= self._n)][0])
            raise IndexError(f"item {bad} of a dataset of {self._n} frames")
        j = np.where(j < 0, j + self._n, j)
        at = np.searchsorted(self._starts, j, side="right") - 1
        records = self._with_frames[at]
        frames = j - self._first[records]
        if j.size == 0 or bool((frames == frames[0]).all()):
            return self._tensors(self._reader.batch(records, frame=int(frames[0]) if j.size else 0), frames)
        parts = [(np.flatnonzero(frames == k), self._reader.batch(records[frames == k], frame=int(k)))
                 for k in np.unique(frames)]
        return self._tensors(_reordered(parts, len(j)), frames)

    def _tensors(self, raw: Dict[str, np.ndarray], frames: np.ndarray) -> Dict[str, Any]:
        counts = raw.get(f"n_{ATOMS}", np.zeros(len(raw["record"]), np.int64))
        out: Dict[str, Any] = {}
        for name in self.keys:
            if name == "positions":
                value: np.ndarray = _xyz(raw, POSITIONS)
            elif name == "forces":
                value = _xyz(raw, FORCES)
            elif name == "atomic_numbers":
                z = raw.get(f"{ATOMS}/atomic_number")
                value = atomic_numbers(raw[f"{ATOMS}/element"]) if z is None else z.astype(np.int64)
            elif name == "energy":
                value = raw[_ENERGY]
            elif name == "cell":
                vectors = raw.get("box/vectors")
                if vectors is None:
                    value = np.zeros((len(counts), 3, 3))
                else:  # lattice vectors as rows; an undefined cell is zeros
                    value = np.ascontiguousarray(vectors.transpose(0, 2, 1)) * raw["box/cell_defined"][:, None, None]
            elif name == "pbc":
                flags = raw.get("box/boundary")
                value = np.zeros((len(counts), 3), bool) if flags is None else flags & raw["box/cell_defined"][:, None]
            elif name == "record":
                value = raw["record"]
            elif name == "frame":
                value = frames.astype(np.int64)
            else:
                value = raw[name]
            factor = self._factors.get(name, 1.0)
            out[name] = value if factor == 1.0 else value * factor
        out["ptr"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out["batch"] = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        return _tensors_of_one_storage(out)

    # -- collating -----------------------------------------------------------------------
    @staticmethod
    def collate(samples: Sequence[Sample]) -> Dict[str, Any]:
        """A ``DataLoader``'s ``collate_fn``: the batch ``__getitems__`` read when it is
        handed back whole, else the items concatenated (:func:`collate`)."""
        return collate(samples)

    # -- processes -----------------------------------------------------------------------
    def close(self) -> None:
        """Release the collection or the dataset's shards (this process's environments)."""
        self._reader.close()

    def __getstate__(self) -> Dict[str, Any]:
        """Pickled as its path (a dataset as its shard table), keys and transform: a ``spawn``
        worker opens the file(s) anew."""
        source = self._reader if isinstance(self._reader, Dataset) else self._path
        return {"path": source, "keys": self.keys, "transform": self.transform, "units": self._target}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Open the collection in this process (the other side of :meth:`__getstate__`)."""
        self.__init__(state["path"], keys=state["keys"], transform=state["transform"],  # type: ignore[misc]
                      units=state.get("units"))

    def __repr__(self) -> str:
        return f"MrecDataset({_label(self._reader)!r}, {self._n} frames, keys={list(self.keys)})"


class Samples(Sequence[Sample]):
    """Items read as one batch (what ``__getitems__`` returns): item ``i`` is made when asked
    for, as views of the batch's tensors; ``whole`` is the collated batch itself (None once
    the items were transformed)."""

    def __init__(self, whole: Optional[Dict[str, Any]], items: Optional[List[Sample]] = None) -> None:
        self.whole = whole
        self._items = items

    def __len__(self) -> int:
        """The number of items."""
        if self._items is not None:
            return len(self._items)
        assert self.whole is not None
        return int(self.whole["ptr"].shape[0]) - 1

    def __getitem__(self, i: Any) -> Any:
        """Item ``i`` (a dict of tensors)."""
        if isinstance(i, slice):
            return [self[n] for n in range(*i.indices(len(self)))]
        if self._items is not None:
            return self._items[i]
        n = len(self)
        i = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= i < n:
            raise IndexError(f"item {i} of a batch of {n}")
        whole = self.whole
        assert whole is not None
        lo, hi = int(whole["ptr"][i]), int(whole["ptr"][i + 1])
        out: Sample = {}
        for name, value in whole.items():
            if name in ("ptr", "batch"):
                continue
            out[name] = value[lo:hi] if _per_atom(name) else value[i]
        return out

    def __iter__(self) -> Iterator[Sample]:
        """The items in order."""
        for i in range(len(self)):
            yield self[i]


def collate(samples: Sequence[Sample]) -> Dict[str, Any]:
    """Items as one batch, the PyG convention: per-atom tensors (``positions``,
    ``atomic_numbers``, ``forces``, ``atoms/<column>``) concatenated, per-item tensors stacked
    (``energy`` (B,), ``cell`` (B, 3, 3), ...), ``batch`` (each atom's item) and ``ptr``
    (``B + 1`` atom offsets).  A :class:`Samples` holding its whole batch is that batch."""
    if isinstance(samples, Samples) and samples.whole is not None:
        return samples.whole
    if not samples:
        raise InvalidValueError("collate: no items")
    names = list(samples[0])
    counts: Optional[List[int]] = None
    out: Dict[str, Any] = {}
    for name in names:
        values = [s[name] for s in samples]
        if _per_atom(name):
            rows = [int(v.shape[0]) for v in values]
            if counts is not None and rows != counts:
                raise InvalidValueError(f"collate: {name!r} has {rows} rows per item, other per-atom keys {counts}")
            counts = rows
            out[name] = torch.cat(values)
        else:
            out[name] = torch.stack(values)
    atoms = torch.as_tensor(counts if counts is not None else [0] * len(samples), dtype=torch.int64)
    out["ptr"] = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(atoms, 0)])
    out["batch"] = torch.repeat_interleave(torch.arange(len(samples), dtype=torch.int64), atoms)
    return out


# -- distributed sampling --------------------------------------------------------------------
_Sampler: Any = torch.utils.data.Sampler


class ShardSampler(_Sampler):  # type: ignore[misc]
    """Item indices of ``dataset`` (an :class:`MrecDataset`, or a
    :class:`~molrec_raw.dataset.Dataset` whose items are its records) for one rank of a
    distributed job, whole shards per rank (spec-notes/dataset.md "Training with DDP"):

    * every epoch the shards are put in an order drawn from ``(seed, epoch)`` and dealt out in
      that order, each to the rank holding the fewest items so far (ties: the lowest rank);
      a rank reads its shards one after the other, each shard's items in an order drawn from
      ``(seed, epoch, shard)`` (in stored order with ``shuffle=False``, the shards too);
    * every rank yields the same number of items, ``len(sampler)`` (DDP needs the same number
      of batches on every rank): the largest share, a rank with less repeating its own first
      items (from its own shards, so nothing is staged for it) — like ``DistributedSampler``,
      a few items are seen twice in an epoch; ``drop_last=True`` cuts every rank to the
      smallest share instead (a few items are not seen in that epoch);
    * ``set_epoch(e)`` before each epoch; ``state_dict()`` / ``load_state_dict()`` resume an
      epoch with exactly the items this rank had not yielded (pass ``consumed=`` to
      ``state_dict`` when a ``DataLoader`` has prefetched beyond what was trained on).

    ``num_replicas`` and ``rank`` None: from ``torch.distributed`` when it is initialised (as
    ``DistributedSampler`` does), else one replica of rank 0."""

    def __init__(self, dataset: Any, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 seed: int = 0, shuffle: bool = True, drop_last: bool = False) -> None:
        spans = ([(s.start, s.stop) for s in dataset.shards] if isinstance(dataset, Dataset)
                 else getattr(dataset, "shard_spans", None))
        if spans is None:
            raise InvalidValueError(f"ShardSampler samples an MrecDataset (or anything with shard_spans, each shard's "
                                    f"items (start, stop)) or a molrec_raw Dataset, not {type(dataset).__name__}")
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if num_replicas is None:
            num_replicas = torch.distributed.get_world_size() if distributed else 1
        if rank is None:
            rank = torch.distributed.get_rank() if distributed else 0
        if not (isinstance(num_replicas, int) and num_replicas >= 1 and isinstance(rank, int)
                and 0 <= rank < num_replicas):
            raise InvalidValueError(f"ShardSampler: rank {rank!r} of num_replicas {num_replicas!r} (0 <= rank < "
                                    "num_replicas)")
        self.spans: List[Tuple[int, int]] = [(int(a), int(b)) for a, b in spans]
        filled = sum(1 for a, b in self.spans if b > a)
        if filled < num_replicas:
            raise InvalidValueError(f"ShardSampler: {filled} shard(s) with items for {num_replicas} ranks: every rank "
                                    "needs a whole shard (cut smaller shards, or use DistributedSampler)")
        self.num_replicas, self.rank, self.seed = num_replicas, rank, int(seed)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.epoch = 0
        self.position = 0  # items of this epoch already yielded on this rank

    # -- the plan of an epoch -------------------------------------------------------------
    def assignment(self, epoch: Optional[int] = None) -> List[List[int]]:
        """Each rank's shards (numbers, in reading order) in ``epoch`` (default: the current)."""
        epoch = self.epoch if epoch is None else epoch
        order = (np.random.default_rng([self.seed, epoch]).permutation(len(self.spans)) if self.shuffle
                 else np.arange(len(self.spans)))
        shares: List[List[int]] = [[] for _ in range(self.num_replicas)]
        loads = [0] * self.num_replicas
        for shard in order.tolist():
            rank = loads.index(min(loads))
            shares[rank].append(shard)
            loads[rank] += self.spans[shard][1] - self.spans[shard][0]
        return shares

    def _length(self, shares: List[List[int]]) -> int:
        loads = [sum(self.spans[k][1] - self.spans[k][0] for k in share) for share in shares]
        return min(loads) if self.drop_last else max(loads)

    def indices(self, epoch: Optional[int] = None) -> List[int]:
        """This rank's items of ``epoch`` in the order it yields them (``len(self)`` of them)."""
        epoch = self.epoch if epoch is None else epoch
        shares = self.assignment(epoch)
        out: List[int] = []
        for shard in shares[self.rank]:
            start, stop = self.spans[shard]
            inside = (np.random.default_rng([self.seed, epoch, shard]).permutation(stop - start) if self.shuffle
                      else np.arange(stop - start))
            out.extend((inside + start).tolist())
        n = self._length(shares)
        while out and len(out) < n:  # the padding: this rank's own first items again
            out.extend(out[:n - len(out)])
        return out[:n]

    def __len__(self) -> int:
        """Items per rank per epoch (the same on every rank)."""
        return self._length(self.assignment())

    def __iter__(self) -> Iterator[int]:
        """This rank's items of the current epoch from ``position`` on (after a resume: the
        rest); the position moves as items are yielded and returns to 0 at the end."""
        order = self.indices()
        while self.position < len(order):
            item = order[self.position]
            self.position += 1
            yield item
        self.position = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration yields (a new epoch starts at its beginning;
        the epoch a resumed state names keeps its position)."""
        if int(epoch) != self.epoch:
            self.epoch, self.position = int(epoch), 0

    # -- resuming -----------------------------------------------------------------------
    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, Any]:
        """Where this rank is: ``epoch``, ``seed``, ``position`` (items of the epoch done:
        ``consumed`` when given, else those yielded), and what the order depends on
        (``num_replicas``, ``rank``, ``shuffle``, ``drop_last``, ``spans``)."""
        position = self.position if consumed is None else int(consumed)
        return {"epoch": self.epoch, "seed": self.seed, "position": position, "num_replicas": self.num_replicas,
                "rank": self.rank, "shuffle": self.shuffle, "drop_last": self.drop_last,
                "spans": [list(span) for span in self.spans]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`: refused (naming the difference) unless it was taken
        by a sampler of the same shards, seed, replicas, rank and options."""
        mine = self.state_dict()
        for name in ("seed", "num_replicas", "rank", "shuffle", "drop_last", "spans"):
            if name not in state or state[name] != mine[name]:
                theirs = state.get(name, "absent")
                shown = f"{len(theirs)} shards" if name == "spans" and isinstance(theirs, list) else repr(theirs)
                mine_shown = f"{len(mine[name])} shards" if name == "spans" else repr(mine[name])
                raise InvalidValueError(f"ShardSampler.load_state_dict: the state's {name} is {shown}, this "
                                        f"sampler's {mine_shown}" + (" (same count, other sizes)"
                                                                     if shown == mine_shown else ""))
        epoch, position = state.get("epoch"), state.get("position")
        if not (isinstance(epoch, int) and epoch >= 0 and isinstance(position, int)
                and 0 <= position <= self._length(self.assignment(epoch))):
            raise InvalidValueError(f"ShardSampler.load_state_dict: epoch {epoch!r} and position {position!r} are not "
                                    f"an epoch >= 0 and a position within its {len(self)} items")
        self.epoch, self.position = epoch, position


# -- helpers ---------------------------------------------------------------------------------
Source = Union["CollectionReader", Dataset]


def _open_source(source: Any) -> Source:
    """What an :class:`MrecDataset` reads: a collection file's reader, or a dataset (given, or
    opened from a directory, a glob or a list of shards)."""
    from molrec_raw.collection.reader import CollectionReader
    if isinstance(source, Dataset):
        return source
    if isinstance(source, (str, os.PathLike)) and not os.path.isdir(source) and (
            os.path.exists(source) or not set("*?[") & set(os.fspath(source))):
        return CollectionReader(source)
    return open_dataset(source)


def _frame_counts(source: Source) -> np.ndarray:
    """Each record's trajectory frames, records in (dataset) order."""
    if isinstance(source, Dataset):
        parts = [s.reader().binding_index()["n_frames"] for s in source.shards]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return source.binding_index()["n_frames"].astype(np.int64)


def _shard_spans(source: Source, first: np.ndarray, n: int) -> List[Tuple[int, int]]:
    """Each shard's items ``(start, stop)``: one span for a collection file."""
    if not isinstance(source, Dataset):
        return [(0, n)]
    edges = [int(first[s.start]) if s.start < len(first) else n for s in source.shards] + [n]
    return list(zip(edges[:-1], edges[1:]))


def _label(source: Source) -> str:
    if isinstance(source, Dataset):
        return f"{source.shards[0].path.parent} ({len(source.shards)} shards)"
    return str(source.path)


#: The quantity each standard key carries (frame-and-types §13.5); per-step keys as §13.4.
_KEY_QUANTITY = {"positions": "length", "cell": "length", "forces": "force", "energy": "energy"}
_META_QUANTITY = {k: "volume" if power == 3 else q for k, (q, power) in META_KEY_QUANTITIES.items()}


def _quantity(name: str) -> Optional[str]:
    if name.startswith(ATOMS + "/"):
        return COLUMN_QUANTITIES.get(name[len(ATOMS) + 1:])
    return _KEY_QUANTITY.get(name, _META_QUANTITY.get(name))


def _units_of_keys(keys: Sequence[str], stated: Mapping[str, str], target: Any,
                   where: str) -> Tuple[Dict[str, str], Dict[str, float]]:
    """Each key's unit in what the dataset hands out, and the factors from the collection's
    units to ``target`` (None: as stored); a unit stated nowhere is refused, naming it."""
    source = {"mass": "dalton", "charge": "e", **stated}  # the spec's defaults (§13.5)
    if target is None:
        goal = source
    else:
        goal = {"mass": "dalton", "charge": "e", "temperature": "K",  # K: every preset's temperature (§13.5)
                **(target.to_json() if isinstance(target, Units) else parse_units(target, "units"))}
    hint = "; the collection's units (collection#C1) must state it" if target is None else ""
    quantities = {name: q for name in keys if (q := _quantity(name)) is not None and (q in SCALE or q in DERIVED)}
    by_quantity = unit_factors(quantities.values(), source, goal, where, hint)  # every missing unit at once
    factors = {name: by_quantity[q] for name, q in quantities.items()}
    units = {name: str(unit_of(q, goal)) for name, q in quantities.items()}
    return units, factors

def _per_atom(name: str) -> bool:
    return name in _PER_ATOM or name.startswith(ATOMS + "/")


def _xyz(raw: Dict[str, np.ndarray], names: Tuple[str, str, str]) -> np.ndarray:
    return np.stack([raw[f"{ATOMS}/{c}"] for c in names], axis=1)


_STORAGE_ALIGN = 16  # every tensor of a batch starts at a multiple of the largest itemsize (c128)


def _tensors_of_one_storage(arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """The batch's arrays as tensors that are disjoint views of ONE storage (each a copy of
    its array, C-contiguous, its own dtype and shape): a ``DataLoader`` worker's batch crosses
    to the parent as one shared-memory segment, not one per tensor — the crossing's cost is
    per storage (bench/README.md, issue 29).  Strings are refused: a tensor holds numbers."""
    spans: List[Tuple[str, np.ndarray, int]] = []
    total = 0
    for name, value in arrays.items():
        if value.dtype == object:
            raise InvalidValueError(f"a tensor cannot hold strings (dtype object, shape {value.shape}): leave the "
                                    f"column {name!r} out of keys")
        total = -(-total // _STORAGE_ALIGN) * _STORAGE_ALIGN
        spans.append((name, value, total))
        total += value.nbytes
    flat = torch.empty(total, dtype=torch.uint8)
    room = flat.numpy()
    out: Dict[str, Any] = {}
    for name, value, at in spans:
        end = at + value.nbytes
        room[at:end].view(value.dtype).reshape(value.shape)[...] = value
        kind = torch.from_numpy(np.empty(0, value.dtype)).dtype
        out[name] = flat[at:end].view(kind).view(value.shape)
    return out


def _reordered(parts: List[Tuple[np.ndarray, Dict[str, np.ndarray]]], n: int) -> Dict[str, np.ndarray]:
    """Batches of items grouped by frame ordinal, put back into item order: per-item arrays
    by the items' positions, per-row arrays (``<block>/<column>``) by their ``n_<block>``
    segments."""
    positions = np.concatenate([p for p, _ in parts])
    order = np.empty(n, np.int64)
    order[positions] = np.arange(n)  # item i is row order[i] of the concatenation
    names = list(parts[0][1])
    out: Dict[str, np.ndarray] = {}
    for name in names:
        if any(name not in b for _, b in parts):
            raise InvalidValueError(f"items of different frame ordinals disagree: {name!r} is not in every batch")
        joined = np.concatenate([b[name] for _, b in parts])
        block = name.split("/", 1)[0] if "/" in name and not name.startswith("box/") else None
        if block is None:
            out[name] = joined[order]
            continue
        counts = np.concatenate([b[f"n_{block}"] for _, b in parts])
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rows = counts[order]
        index = np.repeat(starts[order] - np.concatenate([[0], np.cumsum(rows)[:-1]]), rows) + np.arange(rows.sum())
        out[name] = joined[index]
    return out
