"""``MetricsWriter``: log scalar events to a WAL; a record writer densifies on flush/close.

documents §4.5, §5.1–§5.3; README decisions 8, 9, 10, 16.

- ``MetricsWriter(record)`` appends to ``<record>/metrics/metrics.jsonl`` (creating the
  ``metrics/`` group when missing) and, on every ``flush()``/``close()``, densifies the lines
  past the watermark into ``metrics/series|steps|wall_time/<safe_name>`` and rewrites the
  catalog with the new watermark — last, after the array data (and their fsync when
  durable), so the watermark never claims what the arrays do not hold.
- ``MetricsWriter.for_host(run_dir, stem)`` appends to ``<run_dir>/artifacts/<stem>.mlp.jsonl``
  and nothing else (hosts keep only the WAL: no dense store, no ``meta/``/``status/``);
  with ``plot=True`` it also keeps the Vega-Lite plot artifact ``artifacts/<stem>.mlp.vl.json``
  current at each flush (root-layout host layout; ``molrec_raw.record.runplot.vegalite``).
  ``MetricsWriter(path)`` with a ``*.mlp.jsonl`` path is the same host writer of that file,
  so the writer takes every path ``read_metrics`` takes.

Logging is cheap: each line is a precomputed per-key prefix plus the formatted step, wall
time (cached per millisecond) and value (orjson's shortest round-trip float text), collected
in memory and written with one ``os.write`` per flush, every 8192 lines (~0.7 MiB), and
whenever the wall clock enters a new second — so a killed process loses at most the lines
of its last second (lines logged with an explicit ``wall_time`` wait for the other two).

Densify: a record writer also keeps, per logged event, the values it formatted the line
from (key prefix, step, wall time, float) — the "shadow" of the lines it wrote — and
densifies those with numpy, which gives exactly what parsing the lines back would (the
line text is a lossless rendering of them) at a fraction of the cost.  Lines it did not
write itself (a tail left past the watermark by a crashed writer) are parsed with orjson
when the writer opens.  A writer is not thread-safe: one thread, or the caller's lock.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import orjson

from molrec_raw.errors import (CorruptDataError, InvalidValueError, NodeExistsError, ReadOnlyError, SpecViolationError,
                               StoreError, UnsupportedFeatureError)
from molrec_raw.record import documents
from molrec_raw.record.doors import open_record, writable_record_path
from molrec_raw.record.metrics import dense
from molrec_raw.record.metrics.safe_name import encode_safe_name
from molrec_raw.record.metrics.series import Series, check_compatible, fold, match_steps
from molrec_raw.record.metrics.wal import (ParsedWal, WalFile, group_events, parse_wal, steps_column, value_text,
                                           wall_time_text)
from molrec_raw.record.runplot.vegalite import HOST_PLOT_SUFFIX, HostPlot
from molrec_raw.record.violations import refuse
from molrec_raw.zarr import DirectoryStore, Group, open_group
from molrec_raw.zarr.codecs.sharding import align_up
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.remote import is_url
from molrec_raw.zarr.store import PathLike

__all__ = ["MetricsWriter", "host_wal_path", "HOST_SUFFIX"]

BUFFER_LINES = 1 << 13  # buffered lines are written out at this many (~0.7 MiB of scalar lines)
BUFFER_BYTES = 1 << 20  # ... or at once for a long line (large tags)
HOST_SUFFIX = ".mlp.jsonl"
_I64_MIN, _I64_MAX = -(2 ** 63), 2 ** 63 - 1
_WATERMARK_RULE = "README#decision-16"
_DIGITS3 = tuple(f"{i:03d}" for i in range(1000))
_time = time.time
_dumps = orjson.dumps


class _Closed:
    """Stands in for the line buffer of a closed writer: logging to it fails clearly."""

    def append(self, line: str) -> None:
        raise StoreError("the metrics writer is closed")

    def __len__(self) -> int:  # nothing buffered: nothing to write out
        return 0


_CLOSED = _Closed()


def _check_stem(stem: Any) -> str:
    if (not isinstance(stem, str) or not stem or stem in (".", "..") or "/" in stem or "\\" in stem
            or "\x00" in stem):
        raise InvalidValueError(f"host metrics stem must be a plain file-name part, not {stem!r}")
    return stem


def host_wal_path(run_dir: PathLike, stem: str = "metrics") -> Path:
    """``<run_dir>/artifacts/<stem>.mlp.jsonl`` (documents §5.1; default stem ``metrics``)."""
    return Path(run_dir) / "artifacts" / f"{_check_stem(stem)}{HOST_SUFFIX}"


class MetricsWriter:
    """Append metric events to a record's WAL (densified on flush/close) or a host's WAL.

    ``log(key, value, step=None, *, tags=None, wall_time=None)``: one scalar event.
    ``log_many(mapping, step=None)``: several keys at one step and one wall time.
    ``flush(durable=True)``: write buffered lines (fsync when durable); a record writer then
    densifies.  ``close()``: flush and release the WAL lock.  Also a context manager.
    """

    def __init__(self, record: PathLike, *, plot: bool = False, fileops: Optional[FileOps] = None) -> None:
        """``record``: a ``*.mrec`` directory; or a host WAL file ``*.mlp.jsonl`` — the same as
        :meth:`for_host` with that file (its directory is made when missing, the directory
        above it must exist), ``plot`` included."""
        self._setup()
        if not is_url(record) and Path(record).name.lower().endswith(HOST_SUFFIX):
            path = Path(record)
            if not path.parent.parent.is_dir():
                raise StoreError(f"cannot write {path}: {path.parent.parent} does not exist")
            self._open_host(path, plot, fileops)
            return
        if plot:
            raise InvalidValueError("plot=True is for host WAL files (*.mlp.jsonl); a record's metrics are "
                                    "plotted from the record (molrec-raw plot)")
        self._open_record(record, fileops)

    @classmethod
    def for_host(cls, run_dir: PathLike, stem: str = "metrics", *, plot: bool = False,
                 fileops: Optional[FileOps] = None) -> "MetricsWriter":
        """A writer of a host run directory's ``artifacts/<stem>.mlp.jsonl`` (WAL only);
        ``plot``: also replace ``artifacts/<stem>.mlp.vl.json`` (a Vega-Lite picture of the
        stepped series) at each flush."""
        self = cls.__new__(cls)
        self._setup()
        path = host_wal_path(run_dir, stem)
        if not Path(run_dir).is_dir():
            raise StoreError(f"host run directory {run_dir} does not exist")
        self._open_host(path, plot, fileops)
        return self

    # -- set-up -------------------------------------------------------------------------------
    def _setup(self) -> None:
        self._buf: Any = []
        self._stepped: Dict[str, str] = {}  # key -> line prefix, keys logged with a step
        self._plain: Dict[str, str] = {}  # key -> line prefix, keys logged without one
        self._shapes: Dict[str, Tuple[str, bool]] = {}  # key -> (type, stepped) already in the WAL
        self._sec = -1  # the second whose text is cached in _sec_text
        self._sec_text = ""
        self._ms = -1  # the millisecond whose wall-time text is cached in _wall
        self._wall = ""
        self._long = 0  # characters of long (tagged) lines buffered since the last write
        self._blank = 0  # blank lines (sector padding) written since the last densify
        self._shadow: Optional[List[Any]] = None  # record writers: prefix, step, wall, value per event
        self._group: Optional[Group] = None
        self._broken: Optional[str] = None
        self._plot: Optional[HostPlot] = None
        self.closed = False

    def _open_host(self, path: Path, plot: bool, fileops: Optional[FileOps]) -> None:
        """Open the host WAL ``path`` (``<stem>.mlp.jsonl``) through a store of its directory."""
        stem = _check_stem(path.name[: -len(HOST_SUFFIX)])
        if plot:
            self._plot = HostPlot(path, path.with_name(f"{stem}{HOST_PLOT_SUFFIX}"))
        self._wal = WalFile(DirectoryStore(path.parent, fileops=fileops), path.name)
        try:
            self.wal_path = path
            self._source = str(path)
            self._end = self._wal.truncate_torn_tail()
            # Learn each existing series' shape (type, stepped) so appended events stay
            # readable; bad lines written by someone else are skipped here, not repaired.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parsed = parse_wal(self._wal.read(0, self._end), source=self._source, lenient=True)
            for key, series in parsed.series.items():
                self._shapes[key] = (series.type, series.steps is not None)
        except BaseException:
            self._wal.close()
            raise

    def _open_record(self, record: PathLike, fileops: Optional[FileOps]) -> None:
        path = writable_record_path(record, fileops)
        if path.is_file():
            raise ReadOnlyError(f"{path}: a packed record is read-only; metrics are written to a *.mrec "
                                "directory", store=str(path))
        if not (path / "zarr.json").is_file():
            raise StoreError(f"{path}: no record here (no root zarr.json); create the record first "
                             "(e.g. with write_mrec_frame)", store=str(path))
        open_record(path)  # the version check of a read (root-layout invariant 6)
        # small chunks: a thread pool per array costs more than it saves
        root = open_group(DirectoryStore(path, fileops=fileops), mode="r+", threads=1)
        self.wal_path = path / "metrics" / dense.WAL_NAME
        self._source = str(self.wal_path)
        # the WAL (and its directory, not yet a node) first, so that the lock is taken first
        self._wal = WalFile(root.store, f"metrics/{dense.WAL_NAME}")
        try:
            self._load_record(_require_group(root, "metrics"))  # read (or made) under the lock
        except BaseException:
            self._wal.close()
            raise

    def _load_record(self, group: Group) -> None:
        self._group = group
        catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
        arrays = dense.find_arrays(group, catalog)
        size = self._wal.size()
        if catalog.wal is not None:
            lines, nbytes = catalog.wal
            self._check_watermark(size, lines, nbytes)
        else:
            lines = nbytes = 0
            if (catalog.entries or arrays) and self._wal.read(0, size).rfind(b"\n") >= 0:
                raise SpecViolationError(
                    f"{self._source}: the catalog has dense series but no 'wal' watermark, so the lines "
                    "of this metrics.jsonl are not part of the record; refusing to append to it "
                    "(move the file away to start a new WAL)", rule="documents#5.5")
        self._end = self._wal.truncate_torn_tail(nbytes)
        tail = parse_wal(self._wal.read(nbytes, self._end), source=self._source, first_line=lines + 1,
                         first_offset=nbytes)
        self._mark = (lines, nbytes)
        self._tail = tail  # lines past the watermark found at open, densified on the first flush
        self._tail_lines = tail.lines
        self._shadow = []
        self._attrs = catalog.attrs
        self._entries = dict(catalog.entries)
        self._count: Dict[str, int] = {}
        self._found: Dict[str, Optional[dense.DenseArrays]] = {}
        self._max_step: Dict[str, int] = {}
        self._tails = dense.TailCache()
        for key, (count, found) in dense.committed(catalog, arrays, group.name).items():
            self._count[key] = count
            self._found[key] = found
            kind = catalog.entries.get(key, {}).get("type", "scalar")
            if key not in self._entries:  # a dense series without entry (no watermark yet)
                self._entries[key] = _entry_from_arrays(kind, count, found)
            if count:
                self._shapes[key] = (kind, found is not None and found.steps is not None)
        for key, series in tail.series.items():
            dense.array_name(key)  # a tail the densify could not hold is refused now, not later
            shape = self._shapes.get(key)
            if shape is not None:
                base = Series(key, shape[0], np.zeros(1, np.int64) if shape[1] else None, np.zeros(1), None)
                check_compatible(base, series, self._source)
            else:
                self._shapes[key] = (series.type, series.steps is not None)
        if catalog.wal is None:
            # Commit a watermark before any array is touched: from now on the catalog names
            # every committed series, so arrays a crashed densify leaves behind (new ones, or
            # points past a count) are recognisably uncommitted.  Dense series written without
            # a watermark (e.g. by molrs) are adopted as they are, with entries for them.
            attrs = dict(self._attrs)
            attrs["wal"] = {"lines": 0, "bytes": 0}
            attrs["series"] = dict(self._entries)
            self._commit(attrs, durable=True)

    def _check_watermark(self, size: int, lines: int, nbytes: int) -> None:
        """README decision 16: the WAL must hold the watermark's bytes, ending a line, in
        exactly ``lines`` lines; otherwise it was changed outside the writer."""
        where = self._source
        if size < nbytes:
            raise CorruptDataError(
                f"{where} holds {size} bytes but the catalog watermark says the dense series contain its "
                f"first {nbytes}: the WAL was truncated or replaced outside the writer; refusing to append "
                "(readers still return the dense series)", rule=_WATERMARK_RULE)
        if nbytes and self._wal.read(nbytes - 1, nbytes) != b"\n":
            raise CorruptDataError(f"{where}: the watermark byte offset {nbytes} does not end a line; the WAL "
                                   "was changed outside the writer", rule=_WATERMARK_RULE)
        found, start = 0, 0
        while start < nbytes:
            end = min(nbytes, start + (16 << 20))
            found += self._wal.read(start, end).count(b"\n")
            start = end
        if found != lines:
            raise CorruptDataError(f"{where}: the catalog watermark says {lines} lines in the first {nbytes} "
                                   f"bytes, the file has {found} there", rule=_WATERMARK_RULE)

    # -- logging ------------------------------------------------------------------------------
    def _register(self, key: Any, stepped: bool) -> str:
        """First event of ``key`` in this session (with or without a step): check and cache."""
        if self.closed:
            raise StoreError("the metrics writer is closed")
        if self._group is not None:
            dense.array_name(key)  # documents#9.10: the key must have a safe (array) name
        else:
            encode_safe_name(key)  # an empty key is no series key, on a host too
        shape = self._shapes.get(key)
        if shape is not None:
            if shape[0] != "scalar":
                raise SpecViolationError(f"series {key!r} has type {shape[0]!r}; this writer logs scalars",
                                         rule="documents#4.1")
            if shape[1] != stepped:
                raise SpecViolationError(
                    f"series {key!r} is {'stepped' if shape[1] else 'step-less'}; an event "
                    f"{'without' if shape[1] else 'with'} a step cannot join it (its steps array "
                    "cannot hold 'no step')", rule="documents#4.2")
        self._shapes[key] = ("scalar", stepped)
        prefix = '{"t":"scalar","k":' + orjson.dumps(key).decode()
        (self._stepped if stepped else self._plain)[key] = prefix
        return prefix

    def _wall_of(self, ms: int) -> str:
        """RFC 3339 UTC text of ``ms`` milliseconds since the epoch (fixed width, ``Z``)."""
        sec, milli = divmod(ms, 1000)
        if sec != self._sec:
            self._sec_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
            self._sec = sec
            if self._buf:  # a new second: lines logged in the last one reach the WAL now
                self._write_buffer()
        self._wall = f"{self._sec_text}.{_DIGITS3[milli]}Z"
        self._ms = ms
        return self._wall

    def _now(self) -> str:
        ms = int(_time() * 1000)
        return self._wall if ms == self._ms else self._wall_of(ms)

    def log(self, key: str, value: Any, step: Optional[int] = None, *, tags: Optional[Mapping[str, Any]] = None,
            wall_time: Any = None) -> None:
        """Log one scalar event.  ``value``: a real number (NaN/±inf written as the strings
        "NaN"/"Infinity"/"-Infinity", decision 8); ``step``: an int64 or None; ``tags``: a
        JSON object kept in the WAL; ``wall_time``: RFC 3339 string / aware datetime / epoch
        seconds, default now (UTC)."""
        if wall_time is None:  # now, UTC, to the millisecond; the text is reused within one
            ms = int(_time() * 1000)
            w = self._wall if ms == self._ms else self._wall_of(ms)
        else:
            w = wall_time_text(wall_time)
        if tags is not None:
            self._emit(key, value, step, w, tags)
            return
        # orjson writes a finite float as its shortest round-trip text (valid JSON)
        text = _dumps(value).decode() if type(value) is float and value - value == 0.0 else value_text(value)
        if step is None:
            prefix = self._plain.get(key)
            if prefix is None:
                prefix = self._register(key, False)
            line = f'{prefix},"w":"{w}","v":{text}}}\n'
        else:
            prefix = self._stepped.get(key)
            if prefix is None:
                prefix = self._register(key, True)
            if type(step) is not int or not _I64_MIN <= step <= _I64_MAX:
                step = _check_step(step)
            line = f'{prefix},"s":{step},"w":"{w}","v":{text}}}\n'
        buf = self._buf
        buf.append(line)
        shadow = self._shadow
        if shadow is not None:
            shadow += (prefix, step, w, value if type(value) is float else float(value))
        if len(buf) >= BUFFER_LINES:
            self._write_buffer()

    def _emit(self, key: str, value: Any, step: Optional[int], w: str, tags: Optional[Mapping[str, Any]]) -> None:
        """The general path: any value, optional step and tags, a checked wall-time text."""
        if step is None:
            prefix = self._plain.get(key) or self._register(key, False)
            step_text = ""
        else:
            prefix = self._stepped.get(key) or self._register(key, True)
            step = _check_step(step)
            step_text = f',"s":{step}'
        text = value_text(value)
        tags_text = "" if tags is None else f',"tags":{_tags_text(tags)}'
        line = f'{prefix}{step_text},"w":"{w}","v":{text}{tags_text}}}\n'
        buf = self._buf
        buf.append(line)
        if self._shadow is not None:
            self._shadow += (prefix, step, w, float(value))
        self._long += len(line)
        if len(buf) >= BUFFER_LINES or self._long > BUFFER_BYTES:
            self._write_buffer()

    def log_many(self, values: Mapping[str, Any], step: Optional[int] = None, *,
                 tags: Optional[Mapping[str, Any]] = None, wall_time: Any = None) -> None:
        """Log ``{key: value}`` at one step and one wall time."""
        w = self._now() if wall_time is None else wall_time_text(wall_time)
        for key, value in values.items():
            self._emit(key, value, step, w, tags)

    # -- writing out --------------------------------------------------------------------------
    def _write_buffer(self) -> None:
        if self._broken:
            raise StoreError(f"the metrics writer stopped after a failed write: {self._broken}")
        buf = self._buf
        if not buf:
            return
        data = "".join(buf).encode("utf-8")
        try:
            self._wal.write(data)
        except StoreError as exc:
            try:  # never leave a partial line for the next write to glue onto
                self._wal._truncate(self._end)
            except StoreError:
                self._broken = exc.message
            if self._shadow is not None:  # these events are not in the WAL: forget them
                del self._shadow[len(self._shadow) - 4 * len(buf):]
            self._buf = []
            raise
        self._buf = []
        self._long = 0
        self._end += len(data)

    def flush(self, durable: bool = True) -> None:
        """Write buffered lines (and fsync them when ``durable``); a record writer then
        densifies the WAL past the watermark and records the new watermark."""
        if self.closed:
            raise StoreError("the metrics writer is closed")
        self._write_buffer()
        if durable:
            self._end_at_sector()
            self._wal.sync()
        if self._group is not None:
            self._densify(durable)
        if self._plot is not None:
            self._plot.update(self._wal.read, self._end)

    def _end_at_sector(self) -> None:
        """Before a durable flush's fsync: end the WAL at a ``SECTOR_ALIGN`` boundary with
        blank lines (``\\n``, which readers skip: documents#9.15), so that no later append
        shares a sector with the lines made durable now — on a device without powersafe
        overwrite a torn sector loses every byte of it (spec-notes/metrics.md "Power cuts")."""
        pad = align_up(self._end) - self._end
        if pad:
            self._wal.write(b"\n" * pad)
            self._end += pad
            self._blank += pad

    def close(self, durable: bool = True) -> None:
        """Flush (densify, for a record) and release the WAL.  Idempotent."""
        if self.closed:
            return
        try:
            self.flush(durable)
        finally:
            self.closed = True
            self._buf = _CLOSED
            self._wal.close()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MetricsWriter {self.wal_path}{' closed' if self.closed else ''}>"

    # -- densify ------------------------------------------------------------------------------
    def _shadow_events(self) -> Dict[str, Series]:
        """The events written since the last densify, per key (from the shadow columns)."""
        flat = self._shadow
        assert flat is not None
        heads = flat[0::4]
        key_of = {prefix: key for table in (self._stepped, self._plain) for key, prefix in table.items()}
        ids = {head: number for number, head in enumerate(dict.fromkeys(heads))}
        keys = [key_of[head] for head in ids]
        code = np.uint16 if len(ids) <= 0xFFFF else np.int64
        kid = np.fromiter(map(ids.__getitem__, heads), dtype=code, count=len(heads))
        stepped = [key in self._stepped for key in keys]
        return group_events(keys, ["scalar"] * len(keys), stepped, kid, np.array(flat[3::4], dtype=np.float64),
                            steps_column(flat[1::4]), np.array(flat[2::4], dtype=object))

    def _densify(self, durable: bool) -> None:
        """documents §4.5: the lines past the watermark become dense points; the catalog with
        the new watermark is written last.  Nothing in memory changes until that commit, so a
        failure leaves the writer able to try again (re-applying is idempotent)."""
        shadow = self._shadow
        group = self._group
        assert shadow is not None and group is not None
        lines = self._mark[0] + self._tail_lines + len(shadow) // 4 + self._blank
        if self._end == self._mark[1]:  # nothing new since the last densify
            if durable:  # ... but an earlier one may not have been made durable
                group.store.sync_all()
            return
        by_key: Dict[str, List[Series]] = {}
        for parsed in (self._tail.series, self._shadow_events() if shadow else {}):
            for key, series in parsed.items():
                by_key.setdefault(key, []).append(series)
        touched: List[str] = []
        updates = []
        for key, parts in by_key.items():
            update = self._apply(key, fold(_concat(parts)), durable)
            touched += update[0]
            updates.append((key,) + update[1:])
        if durable:  # what earlier densifies and this one wrote, then every directory: a barrier
            group.store.sync_all()  # before the catalog (replaced files were synced before their rename)
        entries = dict(self._entries)
        for key, count, entry, top in updates:
            entries[key] = entry
        attrs = dict(self._attrs)
        wal = dict(attrs.get("wal") or {})
        wal.update({"lines": lines, "bytes": self._end})
        attrs["wal"] = wal
        attrs["series"] = entries
        self._commit(attrs, durable)  # the commit: atomic replace of metrics/zarr.json, last
        for key, count, entry, top in updates:
            self._count[key] = count
            if top is not None:
                self._max_step[key] = top
        self._entries = entries
        self._attrs = attrs
        self._mark = (lines, self._end)
        self._tail = ParsedWal({}, 0)
        self._tail_lines = 0
        self._blank = 0
        del shadow[:]

    def _commit(self, attrs: Dict[str, Any], durable: bool) -> None:
        """Replace the catalog (atomically) and adopt it; fsync it when ``durable``."""
        group = self._group
        assert group is not None
        group.attrs.put(attrs, durable=durable)  # durable: never an empty catalog after a power cut
        if durable:
            group.store.sync_all()
        self._attrs = attrs

    def _apply(self, key: str, new: Series, durable: bool) -> Tuple[List[str], int, Dict[str, Any], Optional[int]]:
        """Land one series' new (folded) events in its arrays; return the store keys touched,
        the new count, the new catalog entry and the new largest step."""
        group = self._group
        assert group is not None
        count = self._count.get(key, 0)
        found = self._found.get(key)
        entry = self._entries.get(key)
        touched: List[str] = []
        replaced = np.empty(0, np.int64)  # dense indices rewritten, one per event in ``hit_at``
        hit_at = replaced
        rest = new
        top: Optional[int] = None
        if count == 0:
            found = dense.create_arrays(group, key, stepped=new.steps is not None, durable=durable)
            self._found[key] = found
        else:
            assert found is not None
            if found.wall_time is None:
                raise UnsupportedFeatureError(
                    f"series {key!r} has dense points without a wall_time array; appending timed points "
                    "would break the alignment of series/steps/wall_time", rule="documents#9.11")
            kind = (entry or {}).get("type", "scalar")
            base = Series(key, kind, np.zeros(1, np.int64) if found.steps is not None else None, np.zeros(1), None)
            check_compatible(base, new, self._source)
            if new.steps is not None:
                assert found.steps is not None  # check_compatible: stepped events, stepped points
                top = self._max_step.get(key)
                if top is None:
                    top = int(found.steps[:count].max())
                if int(new.steps.min()) <= top:  # a re-logged step: later wins, in place
                    hit, replaced = match_steps(found.steps[:count], new.steps)
                    hit_at = np.flatnonzero(hit)
                    touched += dense.replace_points(found, replaced, new.take(hit_at), self._tails, durable)
                    rest = new.take(np.flatnonzero(~hit))
        if len(rest):
            touched += dense.append_points(found, count, rest, self._tails, durable)
            if rest.steps is not None:
                top = max(top if top is not None else _I64_MIN, int(rest.steps.max()))
            latest_step = None if rest.steps is None else int(rest.steps[-1])
            walls = rest.wall_time
            assert walls is not None  # logged events always carry a wall time
            latest_time = walls[-1]
        elif replaced.shape[0] and int(replaced.max()) == count - 1:  # the last point re-logged
            latest_step = (entry or {}).get("latest_step")
            walls = new.wall_time
            assert walls is not None  # logged events always carry a wall time
            latest_time = walls[hit_at[int(np.flatnonzero(replaced == count - 1)[0])]]
        else:
            latest_step = (entry or {}).get("latest_step")
            latest_time = (entry or {}).get("latest_timestamp")
        count += len(rest)
        return touched, count, dense.catalog_entry(entry, new.type, count, latest_step, latest_time), top


def _concat(parts: List[Series]) -> Series:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    steps = None if first.steps is None else np.concatenate([p.steps for p in parts])
    return Series(first.key, first.type, steps, np.concatenate([p.values for p in parts]),
                  np.concatenate([p.wall_time for p in parts]))


def _check_step(step: object) -> int:
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise InvalidValueError(f"a step is an integer, not {type(step).__name__} {step!r}")
    step = int(step)
    if not _I64_MIN <= step <= _I64_MAX:
        raise InvalidValueError(f"step {step} is outside the int64 range of the steps array")
    return step


def _tags_text(tags: Mapping[str, Any]) -> str:
    if not isinstance(tags, Mapping):
        raise InvalidValueError(f"tags must be a mapping (a JSON object), not {type(tags).__name__}")
    tags = dict(tags)
    refuse(documents.check_finite_json(tags, "tags", "README#decision-8"))
    try:
        return orjson.dumps(tags).decode()
    except TypeError as exc:
        raise InvalidValueError(f"tags are not JSON-serialisable: {exc}") from None


def _entry_from_arrays(kind: str, count: int, found: Optional[dense.DenseArrays]) -> Dict[str, Any]:
    step = time_ = None
    if found is not None and count:
        if found.steps is not None:
            step = int(found.steps[count - 1])
        if found.wall_time is not None:
            time_ = found.wall_time[count - 1]
    return dense.catalog_entry(None, kind, count, step, time_)


def _require_group(root: Group, name: str) -> Group:
    """``root[name]`` as a group, created when missing (another process may race us)."""
    for _ in range(3):
        try:
            return root.require_group(name, durable=True)  # a power cut never leaves it empty
        except NodeExistsError:
            node = root.get(name)
            if isinstance(node, Group):
                return node
            if node is not None:
                raise
    raise StoreError(f"cannot create the {name}/ group", store=root.store.describe())
