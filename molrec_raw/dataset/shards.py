"""``Dataset`` / ``open_dataset``: many collection files (shards) read as one sequence of
records (issue 35; ``dataset#D1``–``D4``).

Opening reads each shard's ``meta`` and ``index`` only (:func:`read_summary`), checks that
every shard has the first one's declaration (``D1``) and numbers the records in shard order
(``D3``).  A shard's :class:`CollectionReader` opens on first use of one of its records and
stays open until the dataset closes; a dataset carried into a ``fork`` child reopens there
(the collection's per-process environments), and pickles as its shard table, so a
``DataLoader`` worker started with ``spawn`` reads the summaries of no shard again.
"""
from __future__ import annotations

import bisect
import glob
import importlib
import os
import operator
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.collection import CollectionReader, Record
from molrec_raw.collection.batch import gather_across
from molrec_raw.collection.layout_cache import LayoutCache
from molrec_raw.collection.summary import CollectionSummary, read_summaries
from molrec_raw.dataset.merge import join_batches, join_indexes
from molrec_raw.errors import InvalidValueError, SpecViolationError, StoreError, brief
from molrec_raw.record.model import Block
from molrec_raw.record.trajectory.schema import SequenceSchema

__all__ = ["Dataset", "Shard", "open_dataset", "SHARD_SUFFIX"]

D1, D2, D3, D4 = "dataset#D1", "dataset#D2", "dataset#D3", "dataset#D4"
SHARD_SUFFIX = ".mrec.lmdb"
_GLOB = frozenset("*?[")


def open_dataset(source: Any, *, cache: Any = None) -> "Dataset":
    """The dataset of ``source``: a directory (its ``*.mrec.lmdb`` files, sorted names), a
    glob (sorted matches), a list of paths (the given order), or fsspec URL(s), staged into
    the local cache directory ``cache`` (else ``MOLREC_RAW_CACHE``) first (``dataset#D2``); a
    URL of a directory or a glob names its ``*.mrec.lmdb`` objects.  Staged shards stay in use
    (no cache budget evicts them, ``staging#evict``) until the dataset closes."""
    held: List[Any] = []
    try:
        dataset = Dataset(shard_paths(source, cache, held))
    except BaseException:
        for shards in held:
            shards.release()
        raise
    dataset._staged = held
    return dataset


def is_url(text: Any) -> bool:
    """Whether ``text`` is a URL (``scheme://...``) rather than a local path (``file://`` is a path)."""
    return isinstance(text, str) and "://" in text and not text.startswith("file://")


def shard_paths(source: Any, cache: Any = None, held: Optional[List[Any]] = None) -> List[Path]:
    """The shard files ``source`` names, in dataset order (``dataset#D2``); the staged shards
    of URLs (holding their use locks) are appended to ``held`` when given."""
    if isinstance(source, (str, os.PathLike)):
        items: List[Any] = [source]
        one = True
    elif isinstance(source, Iterable):
        items, one = list(source), False
    else:
        raise InvalidValueError(f"a dataset's source is a directory, a glob, a list of paths or URLs, not "
                                f"{type(source).__name__}", rule=D2)
    urls = [item for item in items if is_url(item)]
    staged: Dict[str, Path] = {}
    if urls:
        staging = importlib.import_module("molrec_raw.dataset.staging")  # (object storage: for a URL source only)
        if one:  # a store's directory or glob: its shards (sorted names)
            items = urls = staging.shard_urls(urls[0], getattr(cache, "storage_options", None))
        shards = staging.stage(urls, cache)
        if held is not None:
            held.append(shards)
        staged = dict(zip(urls, shards))
    paths: List[Path] = []
    for item in items:
        if is_url(item):
            paths.append(Path(staged[item]))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise InvalidValueError(f"a dataset's shard is a path or a URL, not {brief(item)}", rule=D2)
        text = os.fspath(item)
        text = text[len("file://"):] if text.startswith("file://") else text
        if one and os.path.isdir(text):
            found = sorted(p for p in Path(text).glob(f"*{SHARD_SUFFIX}") if not p.name.startswith("."))
            if not found:
                raise StoreError(f"no *{SHARD_SUFFIX} file in the directory", store=text, rule=D2)
            paths.extend(found)
        elif one and _GLOB & set(text) and not os.path.exists(text):
            found = sorted(Path(p) for p in glob.glob(text))
            if not found:
                raise StoreError("the glob matches no file", store=text, rule=D2)
            paths.extend(found)
        else:
            paths.append(Path(text))
    if not paths:
        raise StoreError("a dataset needs at least one shard: the list is empty", rule=D2)
    for path in paths:
        if not path.name.endswith(SHARD_SUFFIX) or path.is_dir():
            raise StoreError(f"a shard is a collection file (*{SHARD_SUFFIX})", store=str(path), rule=D2)
    return paths


class Shard:
    """One shard of a dataset: ``path``, ``number`` (its place), ``start`` (the global number
    of its first record), ``n_records``, ``stop`` (``start + n_records``), ``n_frames``;
    :meth:`reader` is its collection, opened on first use."""

    __slots__ = ("path", "number", "start", "n_records", "n_frames", "_reader", "_shared")

    def __init__(self, path: Path, number: int, start: int, n_records: int, n_frames: int) -> None:
        self.path, self.number, self.start, self.n_records, self.n_frames = path, number, start, n_records, n_frames
        self._reader: Optional[CollectionReader] = None
        self._shared: Optional[SharedLayouts] = None  # the dataset's (Dataset._setup)

    @property
    def stop(self) -> int:
        """One past the global number of its last record."""
        return self.start + self.n_records

    def reader(self) -> CollectionReader:
        """The shard's :class:`CollectionReader` (opened once; refused when the file no longer
        holds the records it held when the dataset opened, ``dataset#D4``)."""
        reader = self._reader
        if reader is None:
            reader = CollectionReader(self.path)
            if len(reader) != self.n_records:
                reader.close()
                raise StoreError(f"the shard holds {len(reader)} records, {self.n_records} when the dataset opened: "
                                 "it changed underneath the dataset", store=str(self.path), rule=D4)
            shared = self._shared
            if shared is not None:
                shared.share(reader)
            self._reader = reader
        return reader

    def close(self) -> None:
        """Close its reader (the next use opens it again)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def __reduce__(self) -> Tuple[Any, Tuple[Path, int, int, int, int]]:
        return (Shard, (self.path, self.number, self.start, self.n_records, self.n_frames))

    def __repr__(self) -> str:
        return f"Shard({str(self.path)!r}, records {self.start}..{self.stop})"


class Dataset:
    """Records of many shards as one read-only sequence: ``len(ds)``, ``ds[g]`` (the shard's
    :class:`Record`), ``ds.batch(ids, frame=0)`` (``CollectionReader.batch``'s arrays over
    shards, in the caller's order), ``ds.index``, ``ds.shards``, ``ds.units``,
    ``ds.sequence_schema``, ``ds.index_schema``, ``ds.locate(g)``; ``close()`` or ``with``."""

    _staged: Sequence[Any] = ()  # shards staged from a store, in use until close (open_dataset)

    def __init__(self, paths: Sequence[Any]) -> None:
        paths = [Path(os.fspath(p)) for p in paths]
        if not paths:
            raise StoreError("a dataset needs at least one shard: the list is empty", rule=D2)
        summaries: List[CollectionSummary] = []
        for summary in read_summaries(paths):
            if summaries:
                _check_same(summaries[0], summary)
            summaries.append(summary)
        first = summaries[0]
        self._declaration = first.declaration()
        self._summaries: Optional[List[CollectionSummary]] = summaries
        self._shards = _numbered(paths, [s.n_records for s in summaries], [s.n_frames for s in summaries])
        self._setup()

    def _setup(self) -> None:
        self._stops = np.array([s.stop for s in self._shards], dtype=np.int64)
        self._starts = np.array([s.start for s in self._shards], dtype=np.int64)
        self._stop_list = self._stops.tolist()
        self._n = int(self._stops[-1])
        self._index: Optional[Block] = None
        self._schema = SequenceSchema.from_json(self._declaration["sequence_schema"])
        shared = SharedLayouts(self._schema)
        for shard in self._shards:
            shard._shared = shared
        self._meta_names = frozenset(name for name, _ in self._schema.meta_keys())

    # ------------------------------------------------------------------ the dataset
    @property
    def shards(self) -> Tuple[Shard, ...]:
        """The shards, in dataset order."""
        return self._shards

    def __len__(self) -> int:
        """The number of records over every shard."""
        return self._n

    @property
    def n_frames(self) -> int:
        """Trajectory frames over every record."""
        return sum(s.n_frames for s in self._shards)

    @property
    def units(self) -> Dict[str, str]:
        """Quantity → unit, shared by every shard (``collection#C1``, ``dataset#D1``)."""
        return dict(self._declaration["units"])

    @property
    def sequence_schema(self) -> SequenceSchema:
        """The ``sequence_schema`` every shard declares (a copy)."""
        return self._schema.copy()

    @property
    def index_schema(self) -> Dict[str, Dict[str, Any]]:
        """The own index columns every shard declares: name → dtype, trailing, nullable, precision."""
        return {name: dict(spec) for name, spec in self._declaration["index_columns"].items()}

    @property
    def index(self) -> Block:
        """Every shard's own index columns joined in dataset order, plus ``shard`` (the shard's
        number) and ``record`` (the global record number), read without decoding a record.
        The arrays are read-only and shared by every call."""
        if self._index is None:
            summaries = self._summaries
            if summaries is None:  # (unpickled: the summaries are read again, once)
                summaries = list(read_summaries([s.path for s in self._shards]))
                for shard, summary in zip(self._shards, summaries):
                    _check_count(shard, summary.n_records)
            index = join_indexes([s.index for s in summaries])
            index.columns["shard"] = np.repeat(np.arange(len(self._shards), dtype=np.int64),
                                               [s.n_records for s in self._shards])
            index.columns["record"] = np.arange(self._n, dtype=np.int64)
            for array in index.columns.values():
                array.flags.writeable = False
            self._index, self._summaries = index, None
        index = self._index
        return Block(dict(index.columns), dict(index.masks), dict(index.precision), {}, None, {}, index.nrows)

    def number(self, g: Any) -> int:
        """Global record number ``g`` checked (``dataset#D3``): negative counts from the end,
        IndexError outside."""
        if type(g) is not int:
            try:
                g = operator.index(g)
            except TypeError:
                raise TypeError(f"records are numbered by integers, not {type(g).__name__}") from None
        n: int = g + self._n if g < 0 else g
        if not 0 <= n < self._n:
            raise IndexError(f"record {g} of a dataset of {self._n}")
        return n

    def locate(self, g: Any) -> Tuple[Shard, int]:
        """The shard holding global record ``g`` and its number there (``dataset#D3``)."""
        n = g if type(g) is int and 0 <= g < self._n else self.number(g)
        shard = self._shards[bisect.bisect_right(self._stop_list, n)]
        return shard, n - shard.start

    def __getitem__(self, g: int) -> Record:
        """Record ``g`` (the collection's own :class:`Record`, numbered in its shard)."""
        n = g if type(g) is int and 0 <= g < self._n else self.number(g)
        shard = self._shards[bisect.bisect_right(self._stop_list, n)]
        reader = shard._reader
        return Record(shard.reader() if reader is None else reader, n - shard.start, None)  # (in the shard: checked)

    def __iter__(self) -> Iterator[Record]:
        """Every record, in dataset order."""
        for shard in self._shards:
            if shard.n_records:
                yield from shard.reader()

    def numbers(self, ids: Any) -> np.ndarray:
        """Global record numbers checked as :meth:`number` checks one (an int64 array)."""
        values = np.asarray(ids.tolist() if isinstance(ids, np.ndarray) else list(ids))
        if values.size == 0:
            return np.zeros(0, np.int64)
        if values.dtype.kind not in "iu" or values.ndim != 1:
            return np.array([self.number(g) for g in (ids.tolist() if isinstance(ids, np.ndarray) else ids)],
                            dtype=np.int64)
        values = values.astype(np.int64)
        values = np.where(values < 0, values + self._n, values)
        bad = np.flatnonzero((values < 0) | (values >= self._n))
        if bad.size:
            self.number(list(ids)[int(bad[0])])  # refuses as one record is refused
        return values

    def batch(self, ids: Iterable[int], frame: Optional[int] = 0) -> Dict[str, np.ndarray]:
        """``CollectionReader.batch`` over shards: many records' frame ``frame`` as flat arrays,
        in the caller's order (``"record"`` holds global numbers).  Frame 0 of records whose
        values have layouts the shards' readers have checked is one batch over every shard
        (:func:`gather_across`: the shards share their layout caches, one declaration); any
        other batch is read shard by shard (one ``batch`` per shard), joined as one
        collection's batch of them would be."""
        numbers = self.numbers(ids)
        if numbers.size == 0:
            return self._shards[0].reader().batch([], frame)
        where = np.searchsorted(self._stops, numbers, side="right")
        local = numbers - self._starts[where]
        if frame is not None and operator.index(frame) == 0:
            touched = np.unique(where)
            done = gather_across([self._shards[k].reader() for k in touched.tolist()],
                                 np.searchsorted(touched, where), local, numbers.tolist())
            if done is not None:
                return done
        order = np.argsort(where, kind="stable")  # the records shard by shard, each shard's in the caller's order
        in_shards, local = where[order], local[order]
        edges = [0, *(np.flatnonzero(in_shards[1:] != in_shards[:-1]) + 1).tolist(), len(order)]
        groups = [(self._shards[int(in_shards[lo])], local[lo:hi]) for lo, hi in zip(edges, edges[1:])]
        parts, names = [], []
        for shard, records in groups:
            part = shard.reader().batch(records.tolist(), frame)
            part["record"] = part["record"] + shard.start
            parts.append(part)
            names.append(str(shard.path))
        return join_batches(parts, names, order, self._meta_names)

    # ------------------------------------------------------------------ the files
    def close(self) -> None:
        """Close every shard's reader (and let a cache budget evict the staged shards)."""
        for shard in self._shards:
            shard.close()
        for staged in self._staged:
            staged.release()

    def __enter__(self) -> "Dataset":
        """The dataset itself (``with`` closes it)."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the dataset."""
        self.close()

    def __reduce__(self) -> Tuple[Any, Tuple[Tuple[Shard, ...], Dict[str, Any]]]:
        """Pickled as its shard table and declaration: unpickling (in a worker) reads no shard
        until a record is asked for; each shard is checked then (``dataset#D4``)."""
        return (_unpickle, (self._shards, self._declaration))

    def __repr__(self) -> str:
        return f"Dataset({len(self._shards)} shards, {self._n} records)"


class SharedLayouts:
    """The layout caches every shard's reader shares (``dataset#D1``: one declaration): a
    layout is checked against the declaration once for the dataset, not once per shard, and
    :func:`gather_across` reads a batch over shards as one.  A reader whose file declares
    another ``sequence_schema`` (changed underneath the dataset) keeps its own."""

    __slots__ = ("schema", "systems", "frames")

    def __init__(self, schema: SequenceSchema) -> None:
        self.schema, self.systems, self.frames = schema, LayoutCache(), LayoutCache()

    def share(self, reader: CollectionReader) -> None:
        """Give ``reader`` (just opened: its caches still empty) the shared caches."""
        if reader._schema == self.schema:
            reader._layouts, reader._frame_layouts = self.systems, self.frames


def _unpickle(shards: Tuple[Shard, ...], declaration: Dict[str, Any]) -> Dataset:
    dataset = Dataset.__new__(Dataset)
    dataset._shards, dataset._declaration, dataset._summaries = shards, declaration, None
    dataset._setup()
    return dataset


def _numbered(paths: Sequence[Path], counts: Sequence[int], frames: Sequence[int]) -> Tuple[Shard, ...]:
    shards: List[Shard] = []
    start = 0
    for number, (path, count, n_frames) in enumerate(zip(paths, counts, frames)):
        shards.append(Shard(path, number, start, count, n_frames))
        start += count
    return tuple(shards)


def _check_count(shard: Shard, n_records: int) -> None:
    if n_records != shard.n_records:
        raise StoreError(f"the shard holds {n_records} records, {shard.n_records} when the dataset opened: it "
                         "changed underneath the dataset", store=str(shard.path), rule=D4)


def _check_same(first: CollectionSummary, other: CollectionSummary) -> None:
    """``other`` declares what ``first`` does (``dataset#D1``), else an error naming the shard
    and the first difference."""
    mine, theirs = first.declaration(), other.declaration()
    if mine == theirs:
        return
    for part, value in theirs.items():
        found = first_difference(mine[part], value, part)
        if found is not None:
            raise SpecViolationError(f"the shard's declaration differs from the first shard's ({first.path}): "
                                     f"{found}", store=str(other.path), key="meta", rule=D1)


def first_difference(a: Any, b: Any, where: str) -> Optional[str]:
    """The first place two JSON-like values differ, as text (None when equal)."""
    if type(a) is dict and type(b) is dict:
        for name in list(a) + [k for k in b if k not in a]:
            if name not in b:
                return f"{where}/{name} is {brief(a[name])} in the first shard and absent here"
            if name not in a:
                return f"{where}/{name} is absent in the first shard and {brief(b[name])} here"
            found = first_difference(a[name], b[name], f"{where}/{name}")
            if found is not None:
                return found
        return None
    if type(a) is list and type(b) is list and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}/{i}")
            if found is not None:
                return found
        return None
    if isinstance(a, bytes) and isinstance(b, bytes):
        return None if a == b else f"{where}: the stored force fields differ"
    if a != b or type(a) is not type(b):
        return f"{where} is {brief(a)} in the first shard and {brief(b)} here"
    return None

