"""Read-only zip store (zarr-v3-subset#9.2).

The zip container is parsed by hand with ``struct``: end-of-central-directory
record (searched backwards from the end), ZIP64 locator/record, central directory
(read in one go) and ZIP64 extra fields.  Entry name == store key; every name
must be a safe store key or the archive is refused at open.  Only STORED
(method 0) entries can be read.  Duplicate names resolve to the last
central-directory record; directory entries are not keys.

The bytes come from a *range source* — a local file (``os.pread`` on one descriptor,
so concurrent reads are safe), an archive in memory (``BytesSource``: ``bytes``,
``bytearray``, ``memoryview``) or a remote object (``HttpFile``, ``FsspecFile``) — so one
parser serves every place an archive can lie.  Opening costs one read of the archive's
last 64 KiB (a suffix range), which usually holds the central directory too; an entry's
local header is read together with the first bytes asked of it.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, Union

from molrec_raw.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    InvalidKeyError,
    MolrecError,
    StoreError,
    UnsupportedFeatureError,
)
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.parts import Part, ZipRecord, struct_parts
from molrec_raw.zarr.store import ReadOnlyStore, _slice_range, _validate_prefix, list_dir_of_keys, validate_key

__all__ = ["ZipStore", "RangeSource", "FileSource", "BytesSource", "Buffer", "write_zip"]

_RULE = "zarr-v3-subset#9.2"
# What an archive that ends too soon most often is, and what to do about it.
_CUT_SHORT = ("the file may be truncated or an incomplete copy (an interrupted download, copy or write): "
              "copy it again from its source")
_EOCD = struct.Struct("<IHHHHIIH")  # sig disk cd_disk n_disk n_total cd_size cd_offset comment_len
_LOC64 = struct.Struct("<IIQI")  # sig disk zip64_eocd_offset total_disks
_EOCD64 = struct.Struct("<IQHHIIQQQQ")  # sig size made needed disk cd_disk n_disk n_total cd_size cd_offset
_CEN = struct.Struct("<IHHHHHHIIIHHHHHII")  # see zarr-v3-subset#9.2 "Central header"
_LOCAL = struct.Struct("<IHHHHHIIIHH")  # sig needed flags method time date crc comp uncomp n m
_EXTRA = struct.Struct("<HH")
_SIG_EOCD, _SIG_LOC64, _SIG_EOCD64 = b"PK\x05\x06", 0x07064B50, 0x06064B50
_SIG_CEN, _SIG_LOCAL = 0x02014B50, 0x04034B50
_U16, _U32 = 0xFFFF, 0xFFFFFFFF
_MAX_COMMENT = 0xFFFF
_PREAD_CHUNK = 1 << 30
# Bytes beyond the central record's name length read with a local header, so that a local
# extra field (20 B for our ZIP64 entries, timestamps for other tools) comes in the same read.
_LOCAL_SLACK = 64

# Field layouts (name, size, meaning) of the records, for ``layout=`` (molrec-raw explain).
_EOCD_FIELDS = (("signature", 4, "50 4b 05 06"), ("disk", 2, "this disk"), ("central directory disk", 2, ""),
                ("entries on this disk", 2, "0xffff: see the ZIP64 record"), ("entries", 2, "0xffff: see the ZIP64 record"),
                ("central directory size", 4, "0xffffffff: see the ZIP64 record"),
                ("central directory offset", 4, "0xffffffff: see the ZIP64 record"), ("comment length", 2, ""))
_LOC64_FIELDS = (("signature", 4, "50 4b 06 07"), ("disk", 4, ""), ("ZIP64 end record offset", 8, ""),
                 ("disks", 4, "1: a single-volume archive"))
_EOCD64_FIELDS = (("signature", 4, "50 4b 06 06"), ("record size", 8, "bytes after this field"),
                  ("version made by", 2, ""), ("version needed", 2, "45: ZIP64"), ("disk", 4, ""),
                  ("central directory disk", 4, ""), ("entries on this disk", 8, ""), ("entries", 8, ""),
                  ("central directory size", 8, ""), ("central directory offset", 8, ""))
_CEN_FIELDS = (("signature", 4, "50 4b 01 02"), ("version made by", 2, ""), ("version needed", 2, ""),
               ("flags", 2, "bit 0 encrypted, bit 3 data descriptor, bit 11 UTF-8 name"),
               ("method", 2, "0 = STORED (the only one read)"), ("time", 2, "DOS time"), ("date", 2, "DOS date"),
               ("crc32", 4, "CRC-32 of the entry (checked on a whole-entry read)"),
               ("compressed size", 4, "0xffffffff: in the ZIP64 extra"), ("size", 4, "0xffffffff: in the ZIP64 extra"),
               ("name length", 2, ""), ("extra length", 2, ""), ("comment length", 2, ""),
               ("disk start", 2, ""), ("internal attributes", 2, ""), ("external attributes", 4, "Unix mode << 16"),
               ("local header offset", 4, "0xffffffff: in the ZIP64 extra"))
_LOCAL_FIELDS = (("signature", 4, "50 4b 03 04"), ("version needed", 2, ""), ("flags", 2, ""),
                 ("method", 2, "0 = STORED"), ("time", 2, ""), ("date", 2, ""),
                 ("crc32", 4, "0 with a data descriptor (flag bit 3): the central value counts"),
                 ("compressed size", 4, ""), ("size", 4, "0xffffffff: in the ZIP64 extra"),
                 ("name length", 2, ""), ("extra length", 2, "may differ from the central record's"))


class RangeSource(Protocol):
    """Where a zip archive's bytes come from: any object with these members.

    ``tail(n)`` returns the archive's size and its last ``min(n, size)`` bytes (one suffix
    range for a remote object); ``read(offset, length)`` the bytes there (shorter only at the
    end of the object); ``read_many`` several ranges at once; errors are ``StoreError``s
    naming the source."""

    immutable: bool
    concurrency: int

    def describe(self) -> str: ...

    def tail(self, length: int) -> Tuple[int, bytes]: ...

    def read(self, offset: int, length: int) -> bytes: ...

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]: ...

    def close(self) -> None: ...


class FileSource:
    """A local file as a range source: one descriptor, ``os.pread`` (no seek, thread-safe)."""

    immutable = True  # the descriptor keeps the opened file even if its name is replaced
    concurrency = 1

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._path = str(os.fspath(path))
        try:
            self._fd: Optional[int] = os.open(self._path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError as exc:
            raise StoreError(f"{self._path}: cannot open zip archive: {exc.strerror or exc}",
                             store=self._path) from None

    def describe(self) -> str:
        return self._path

    def _descriptor(self) -> int:
        if self._fd is None:
            raise StoreError(f"{self._path}: zip store is closed", store=self._path)
        return self._fd

    def tail(self, length: int) -> Tuple[int, bytes]:
        size = os.fstat(self._descriptor()).st_size
        take = min(size, length)
        return size, self.read(size - take, take)

    def read(self, offset: int, length: int) -> bytes:
        fd = self._descriptor()
        parts: List[bytes] = []
        done = 0
        try:
            while done < length:
                part = os.pread(fd, min(length - done, _PREAD_CHUNK), offset + done)
                if not part:
                    break
                parts.append(part)
                done += len(part)
        except OSError as exc:
            raise StoreError(f"{self._path}: cannot read zip archive: {exc.strerror or exc}",
                             store=self._path) from None
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


Buffer = Union[bytes, bytearray, memoryview]  # an archive held in memory


class BytesSource:
    """An archive in memory as a range source.  ``bytes`` are read in place; a ``bytearray``
    or ``memoryview`` is copied once, so a caller changing its buffer afterwards changes
    nothing read through the store.  ``close`` lets go of the bytes (the store refuses reads
    once closed)."""

    immutable = True
    concurrency = 1

    def __init__(self, data: Buffer) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"an archive in memory is bytes, bytearray or memoryview, not {type(data).__name__}")
        self._data = data if isinstance(data, bytes) else memoryview(data).tobytes()  # any layout, C order
        self._name = f"<packed record in memory, {len(self._data)} bytes>"

    def describe(self) -> str:
        return self._name

    def tail(self, length: int) -> Tuple[int, bytes]:
        return len(self._data), self._data[max(0, len(self._data) - length):]

    def read(self, offset: int, length: int) -> bytes:
        return self._data[offset:offset + length]

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        return [self._data[offset:offset + length] for offset, length in ranges]

    def close(self) -> None:
        self._data = b""


class _Entry:
    __slots__ = ("flags", "method", "crc", "csize", "usize", "offset", "name_len", "data_start", "central_at")

    def __init__(self, flags: int, method: int, crc: int, csize: int, usize: int, offset: int,
                 name_len: int, central_at: int) -> None:
        self.flags, self.method, self.crc = flags, method, crc
        self.csize, self.usize, self.offset, self.name_len = csize, usize, offset, name_len
        self.central_at = central_at  # where its central directory record lies (fault offsets)
        self.data_start: Optional[int] = None  # filled lazily from the local header


class ZipStore(ReadOnlyStore):
    """A read-only store over a zip archive with STORED entries (zarr-v3-subset#9.2): a
    local path, an archive in memory (``bytes``, ``bytearray``, ``memoryview``: a
    :class:`BytesSource`), or any :class:`RangeSource` (``ZipStore(HttpFile(url))`` reads a
    remote archive by ranges; the source is closed with the store)."""

    immutable = True

    def __init__(self, source: Union[str, "os.PathLike[str]", Buffer, RangeSource], *,
                 layout: Optional[List[ZipRecord]] = None) -> None:
        """``layout``: a list that receives every record as it is parsed (end records,
        central directory headers with their fields and offsets), so a caller that explains
        an archive sees what was read up to a fault (the error names its ``offset``)."""
        self.duplicate_names: Set[str] = set()  # names with more than one central record
        self._layout = layout
        self._source: Optional[RangeSource] = None
        opened: RangeSource
        if isinstance(source, (str, os.PathLike)):
            opened = FileSource(source)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            opened = BytesSource(source)
        else:
            opened = source
        self._path = opened.describe()
        self._source = opened
        self.concurrency = opened.concurrency
        try:
            self._size, tail = opened.tail(_EOCD.size + _MAX_COMMENT)
            if len(tail) != min(_EOCD.size + _MAX_COMMENT, self._size):  # the source's contract: a short read lies
                raise self._corrupt(f"the last {min(_EOCD.size + _MAX_COMMENT, self._size)} bytes of a "
                                    f"{self._size}-byte archive came back as {len(tail)} (a short read)")
            self._tail_at, self._tail = self._size - len(tail), tail
            self._entries = self._load()
        except MolrecError:
            self.close()
            raise
        except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
            self.close()
            raise self._corrupt(f"unreadable zip archive ({type(exc).__name__}: {exc})") from None
        self._keys = sorted(self._entries)

    # -- helpers -----------------------------------------------------------
    def describe(self) -> str:
        return self._path

    def _corrupt(self, message: str, key: Optional[str] = None, offset: Optional[int] = None) -> CorruptDataError:
        """A refusal of the archive's bytes; the message starts with the archive's name."""
        return CorruptDataError(f"{self._path}: {message}", store=self._path, key=key, rule=_RULE, offset=offset)

    def _unsupported(self, message: str, key: Optional[str] = None,
                     offset: Optional[int] = None) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(f"{self._path}: {message}", store=self._path, key=key, rule=_RULE,
                                       offset=offset)

    def _record(self, kind: str, offset: int, length: int, fields: Sequence[Tuple[str, int, str]],
                values: Sequence[object], name: Optional[str] = None) -> Optional[ZipRecord]:
        """Keep a parsed record for ``layout`` (nothing is kept without one)."""
        if self._layout is None:
            return None
        record = ZipRecord(kind, offset, length, struct_parts(fields, values, offset, _RULE), name)
        self._layout.append(record)
        return record

    def _opened(self, key: Optional[str]) -> RangeSource:
        if self._source is None:
            raise StoreError(f"{self._path}: zip store is closed", store=self._path, key=key)
        return self._source

    def _read(self, offset: int, length: int, key: Optional[str] = None, *, exact: bool = True) -> bytes:
        """``length`` bytes at ``offset`` (fewer only when not ``exact`` and the archive ends),
        from the tail read at open when it holds them."""
        source = self._opened(key)
        if offset >= self._tail_at:
            at = offset - self._tail_at
            data = self._tail[at:at + length]
        else:
            try:
                data = source.read(offset, length)
            except MolrecError as exc:
                raise exc.add_context(key=key) from None
        if exact and len(data) != length:
            raise self._corrupt(f"unexpected end of archive; {_CUT_SHORT}", key)
        return data

    # -- parsing -----------------------------------------------------------
    def _find_eocd(self) -> Tuple[int, Tuple[int, ...]]:
        """Position and fields of the EOCD whose comment ends exactly at the end."""
        tail = self._tail
        pos = tail.rfind(_SIG_EOCD)
        while pos >= 0:
            if pos + _EOCD.size <= len(tail):
                fields = _EOCD.unpack_from(tail, pos)
                if pos + _EOCD.size + fields[7] == len(tail):
                    self._record("end of central directory", self._tail_at + pos, _EOCD.size + fields[7],
                                 _EOCD_FIELDS, fields)
                    return self._tail_at + pos, fields
            pos = tail.rfind(_SIG_EOCD, 0, pos)
        raise self._corrupt("not a zip archive, or an incomplete one: no end-of-central-directory record ends "
                            f"the file ({self._size} bytes); {_CUT_SHORT}",
                            offset=self._size)

    def _load(self) -> Dict[str, _Entry]:
        eocd_pos, (_, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, _) = self._find_eocd()
        cd_end = eocd_pos
        cd_fields_at = eocd_pos + 16  # where the central directory's offset is stated
        if eocd_pos >= _LOC64.size:
            loc_at = eocd_pos - _LOC64.size
            located = _LOC64.unpack(self._read(loc_at, _LOC64.size))
            sig, loc_disk, z64_offset, n_disks = located
            if sig == _SIG_LOC64:
                self._record("ZIP64 end of central directory locator", loc_at, _LOC64.size, _LOC64_FIELDS, located)
                if loc_disk != 0 or n_disks > 1:
                    raise self._unsupported("multi-disk zip archives are not supported", offset=loc_at)
                if z64_offset + _EOCD64.size > eocd_pos - _LOC64.size:
                    raise self._corrupt("ZIP64 end-of-central-directory record lies outside the archive",
                                        offset=loc_at + 8)
                rec = _EOCD64.unpack(self._read(z64_offset, _EOCD64.size))
                if rec[0] != _SIG_EOCD64:
                    raise self._corrupt("bad ZIP64 end-of-central-directory signature", offset=z64_offset)
                self._record("ZIP64 end of central directory", z64_offset, _EOCD64.size, _EOCD64_FIELDS, rec)
                disk, cd_disk, n_disk, n_total, cd_size, cd_offset = rec[4:10]
                cd_end, cd_fields_at = z64_offset, z64_offset + 48
        # Without a locator, 0xFFFF/0xFFFFFFFF are taken literally (as Python's zipfile does).
        if disk != 0 or cd_disk != 0 or n_disk != n_total:
            raise self._unsupported("multi-disk zip archives are not supported", offset=eocd_pos + 4)
        if cd_offset + cd_size > cd_end:
            raise self._corrupt(f"central directory ({cd_size} bytes at {cd_offset}) lies outside the archive "
                                f"(lying size or offset)", offset=cd_fields_at)
        cd = self._read(cd_offset, cd_size)
        entries: Dict[str, _Entry] = {}
        pos = count = 0
        while pos < len(cd):
            at = cd_offset + pos
            if pos + _CEN.size > len(cd):
                raise self._corrupt("truncated central directory record", offset=at)
            fields = _CEN.unpack_from(cd, pos)
            (sig, _, _, flags, method, _, _, crc, csize, usize,
             n, m, k, disk_start, _, _, offset) = fields
            if sig != _SIG_CEN:
                raise self._corrupt(f"bad central directory signature at record {count}", offset=at)
            name_at = pos + _CEN.size
            pos = name_at + n + m + k
            if pos > len(cd):
                raise self._corrupt("central directory record runs past the central directory (lying length field)",
                                    offset=at + 28)
            raw_name = cd[name_at:name_at + n]
            record = self._record("central directory header", at, pos - (at - cd_offset), _CEN_FIELDS, fields,
                                  raw_name.decode("utf-8", "replace"))
            if record is not None:
                record.parts.append(Part("name", raw_name.decode("utf-8", "replace"), "the store key",
                                         cd_offset + name_at, n, _RULE))
                if m:
                    record.parts.append(Part("extra", cd[name_at + n:name_at + n + m].hex(),
                                             "extra fields (id 0x0001: ZIP64 sizes and offset)",
                                             cd_offset + name_at + n, m, _RULE))
            if _U32 in (csize, usize, offset) or disk_start == _U16:
                usize, csize, offset, disk_start = self._zip64_extra(
                    cd[name_at + n:name_at + n + m], usize, csize, offset, disk_start, cd_offset + name_at + n)
                if record is not None:
                    record.parts.append(Part("ZIP64 values", {"size": usize, "compressed size": csize,
                                                              "local header offset": offset}, "from the ZIP64 extra",
                                             rule=_RULE))
            if disk_start != 0:
                raise self._unsupported("multi-disk zip archives are not supported", offset=at + 34)
            try:
                name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            except UnicodeDecodeError:
                raise self._corrupt(f"zip entry name {raw_name!r} is flagged UTF-8 but is not",
                                    offset=cd_offset + name_at) from None
            count += 1
            is_dir = name.endswith("/")
            try:
                validate_key(name[:-1] if is_dir else name)
            except InvalidKeyError:
                raise self._corrupt(f"zip entry name {name!r} is not a safe store key "
                                    "(absolute, '.'/'..', backslash, empty segment or NUL)",
                                    offset=cd_offset + name_at) from None
            if not is_dir:
                if name in entries:
                    self.duplicate_names.add(name)
                entries[name] = _Entry(flags, method, crc, csize, usize, offset, n, at)  # last record wins
        if count != n_total:
            raise self._corrupt(f"central directory holds {count} records, end record says {n_total}",
                                offset=eocd_pos + 10)
        return entries

    def _zip64_extra(self, extra: bytes, usize: int, csize: int, offset: int, disk: int,
                     extra_at: int = 0) -> Tuple[int, int, int, int]:
        """Replace 0xFFFFFFFF/0xFFFF fields by the values of the ZIP64 extra (id 0x0001)."""
        pos = 0
        while pos + _EXTRA.size <= len(extra):
            tag, length = _EXTRA.unpack_from(extra, pos)
            body = extra[pos + _EXTRA.size:pos + _EXTRA.size + length]
            if len(body) != length:
                raise self._corrupt("zip extra field runs past its record", offset=extra_at + pos)
            if tag == 1:
                values, at = [], 0
                for value in (usize, csize, offset):
                    if value == _U32:
                        if at + 8 > length:
                            raise self._corrupt("ZIP64 extra field too short", offset=extra_at + pos)
                        value = struct.unpack_from("<Q", body, at)[0]
                        at += 8
                    values.append(value)
                if disk == _U16:
                    if at + 4 > length:
                        raise self._corrupt("ZIP64 extra field too short", offset=extra_at + pos)
                    disk = struct.unpack_from("<I", body, at)[0]
                return values[0], values[1], values[2], disk
            pos += _EXTRA.size + length
        return usize, csize, offset, disk

    def _entry(self, key: str) -> Optional[_Entry]:
        """The entry for ``key`` (None when absent), refused when it cannot be read by range."""
        entry = self._entries.get(validate_key(key))
        if entry is None:
            return None
        if entry.flags & 0x1:
            raise self._unsupported("encrypted zip entries are not supported", key)
        if entry.method != 0:
            raise self._unsupported("compressed zip entries are not supported; pack with STORED entries", key)
        return entry

    def _locate(self, entry: _Entry, key: str, lo: int, hi: int) -> Optional[bytes]:
        """Read the local header of ``entry`` the first time it is used (its data offset is
        then validated and remembered) together with the entry's bytes ``[lo, hi)``; return
        those when they came in the same read (else None)."""
        if entry.data_start is not None:
            return None
        if entry.offset + _LOCAL.size > self._size:
            raise self._corrupt("local header lies past end of archive", key, entry.offset)
        if entry.offset + _LOCAL.size + entry.usize > self._size:  # refused before any read
            raise self._corrupt(f"entry of {entry.usize} bytes extends past end of archive (lying size)", key,
                                entry.central_at + 24)
        guess_end = min(self._size, entry.offset + _LOCAL.size + entry.name_len + _LOCAL_SLACK + hi)
        head = self._read(entry.offset, guess_end - entry.offset, key, exact=False)
        local = self._local_header(head, entry, key)
        start = entry.offset + _LOCAL.size + local[9] + local[10]
        entry.data_start = start
        at = start - entry.offset
        return head[at + lo:at + hi] if at + hi <= len(head) else None

    def _local_header(self, head: bytes, entry: _Entry, key: str) -> Tuple[int, ...]:
        """The fields of ``entry``'s local header from the bytes ``head`` read at its offset,
        checked: signature, the data inside the archive, equal sizes of a STORED entry."""
        if len(head) < _LOCAL.size:
            raise self._corrupt("unexpected end of archive (truncated?)", key, entry.offset)
        local = _LOCAL.unpack_from(head, 0)
        if local[0] != _SIG_LOCAL:
            raise self._corrupt("bad local header signature", key, entry.offset)
        start = entry.offset + _LOCAL.size + local[9] + local[10]
        if start + entry.usize > self._size:
            raise self._corrupt(f"entry of {entry.usize} bytes extends past end of archive (lying size)", key,
                                entry.central_at + 24)
        if entry.csize != entry.usize:
            raise self._corrupt("STORED entry with different compressed and uncompressed sizes", key, entry.offset)
        return local

    def local_record(self, key: str, layout: Optional[List[ZipRecord]] = None,
                     verify_up_to: Optional[int] = None) -> ZipRecord:
        """The local header of entry ``key`` as a record (fields with their offsets) and
        where its data lies, read and checked as a read of the entry does; appended to
        ``layout`` before any check of its data.  ``verify_up_to``: also check the CRC-32
        of an entry of at most that many bytes (as a whole-entry read does)."""
        entry = self._entries.get(validate_key(key))
        if entry is None:
            raise self._corrupt(f"no entry {key!r}", key)
        head = self._read(entry.offset, min(self._size - entry.offset, _LOCAL.size + 0xFFFF * 2), key, exact=False)
        local = self._local_header(head, entry, key)
        n, m = local[9], local[10]
        record = ZipRecord("local header", entry.offset, _LOCAL.size + n + m,
                           struct_parts(_LOCAL_FIELDS, local, entry.offset, _RULE), key)
        if layout is not None:
            layout.append(record)
        record.parts.append(Part("name", head[_LOCAL.size:_LOCAL.size + n].decode("utf-8", "replace"), "",
                                 entry.offset + _LOCAL.size, n, _RULE))
        if m:
            record.parts.append(Part("extra", head[_LOCAL.size + n:_LOCAL.size + n + m].hex(), "",
                                     entry.offset + _LOCAL.size + n, m, _RULE))
        data_at = entry.offset + _LOCAL.size + n + m
        record.parts.append(Part("data", f"{entry.usize} bytes", "STORED: the value itself" if entry.method == 0
                                 else f"method {entry.method}: not readable by range", data_at, entry.usize, _RULE))
        if entry.flags & 0x1 or entry.method != 0:
            raise self._unsupported("encrypted zip entries are not supported" if entry.flags & 0x1 else
                                    "compressed zip entries are not supported; pack with STORED entries", key,
                                    entry.central_at + (8 if entry.flags & 0x1 else 10))
        if verify_up_to is not None and entry.usize <= verify_up_to:
            data = self._read(data_at, entry.usize, key)
            crc = zlib.crc32(data)
            record.parts.append(Part("crc32 computed", f"0x{crc:08x}", "matches the central record" if crc == entry.crc
                                     else f"differs from the central record's 0x{entry.crc:08x}", rule=_RULE))
            if crc != entry.crc:
                raise ChecksumMismatchError(f"{self._path}: zip entry CRC-32 mismatch", store=self._path, key=key,
                                            rule=_RULE, offset=data_at)
        return record

    def entry_info(self, key: str) -> Tuple[int, int, int, int]:
        """(method, flags, CRC-32, size) of entry ``key`` from its central record."""
        entry = self._entries.get(validate_key(key))
        if entry is None:
            raise self._corrupt(f"no entry {key!r}", key)
        return entry.method, entry.flags, entry.crc, entry.usize

    def _entry_bytes(self, entry: _Entry, key: str, lo: int, hi: int) -> bytes:
        data = self._locate(entry, key, lo, hi)
        if data is None:
            assert entry.data_start is not None  # set by _locate
            data = self._read(entry.data_start + lo, hi - lo, key)
        return data

    # -- Store interface ---------------------------------------------------
    def get(self, key: str) -> Optional[bytes]:
        entry = self._entry(key)
        if entry is None:
            return None
        data = self._entry_bytes(entry, key, 0, entry.usize)
        if zlib.crc32(data) != entry.crc:
            raise ChecksumMismatchError(f"{self._path}: zip entry CRC-32 mismatch", store=self._path, key=key,
                                        rule=_RULE, offset=entry.data_start)
        return data

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        entry = self._entry(key)
        if entry is None:
            return None
        lo, hi = _slice_range(entry.usize, start, length)
        return self._entry_bytes(entry, key, lo, hi)

    def get_ranges(self, key: str, ranges: Sequence[Tuple[int, int]]) -> List[Optional[bytes]]:
        """Several ranges of one entry with one call to the range source (a remote source
        merges neighbours into one request and fetches the rest concurrently)."""
        entry = self._entry(key)
        if entry is None:
            return [None] * len(ranges)
        bounds = [_slice_range(entry.usize, start, length) for start, length in ranges]
        out: List[Optional[bytes]] = [None] * len(bounds)
        if bounds and entry.data_start is None:
            out[0] = self._entry_bytes(entry, key, *bounds[0])
        base = entry.data_start or 0
        remote = [i for i, value in enumerate(out) if value is None and base + bounds[i][0] < self._tail_at]
        for i, value in enumerate(out):
            if value is None and base + bounds[i][0] >= self._tail_at:
                out[i] = self._read(base + bounds[i][0], bounds[i][1] - bounds[i][0], key)
        if remote:
            try:
                fetched = self._opened(key).read_many(
                    [(base + bounds[i][0], bounds[i][1] - bounds[i][0]) for i in remote])
            except MolrecError as exc:
                raise exc.add_context(key=key) from None
            for i, data in zip(remote, fetched):
                if len(data) != bounds[i][1] - bounds[i][0]:
                    raise self._corrupt(f"unexpected end of archive; {_CUT_SHORT}", key)
                out[i] = data
        return out

    def size(self, key: str) -> Optional[int]:
        entry = self._entries.get(validate_key(key))
        return None if entry is None else entry.usize

    def list(self, prefix: str = "") -> Iterator[str]:
        _validate_prefix(prefix)
        return iter([k for k in self._keys if k.startswith(prefix)])

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        return list_dir_of_keys(self._keys, prefix)

    def close(self) -> None:
        source, self._source = self._source, None
        if source is not None:
            source.close()


# -- writing ------------------------------------------------------------------------------
_U32_LIMIT = 0xFFFFFFFF
_DOS_DATE, _DOS_TIME = (0 << 9) | (1 << 5) | 1, 0  # 1980-01-01 00:00: no timestamps, deterministic
_COPY_CHUNK = 1 << 22


def write_zip(target: Union[str, os.PathLike[str]], entries: Sequence[Tuple[str, Union[str, os.PathLike[str]]]],
              *, force_zip64: bool = False, progress: Optional[Callable[[int], object]] = None,
              fileops: Optional[FileOps] = None) -> None:
    """Write a zip of STORED entries ``(name, source file)`` in the given order
    (zarr-v3-subset#9.2 writer rules): UTF-8 names, CRC-32 and sizes in the local header (no
    data descriptors), no directory entries, fixed timestamps, ZIP64 records for every size,
    offset or count that needs them (``force_zip64`` uses them everywhere, for tests).
    ``target`` must not exist; it is created exclusively and fsynced when complete.  Data is
    copied in 4 MiB pieces; every write goes through ``fileops`` (default: the system's).
    """
    names = [validate_key(name) for name, _ in entries]
    if len(set(names)) != len(names):
        raise InvalidKeyError("duplicate entry names", store=str(target))
    ops = fileops if fileops is not None else FileOps()
    central: List[bytes] = []
    fd = ops.open(os.fspath(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0))
    pos = 0

    def put(data: bytes) -> None:
        nonlocal pos
        ops.pwrite_all(fd, data, pos)
        pos += len(data)

    try:
        for name, source in entries:
            raw_name = name.encode("utf-8")
            size = os.path.getsize(source)
            offset = pos
            zip64 = force_zip64 or size >= _U32_LIMIT
            local_extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
            small = _U32_LIMIT if zip64 else size
            header = _LOCAL.pack(_SIG_LOCAL, 45 if zip64 else 20, 0x800, 0, _DOS_TIME, _DOS_DATE,
                                 0, small, small, len(raw_name), len(local_extra))
            put(header + raw_name + local_extra)
            crc = 0
            with open(source, "rb") as fh:
                while True:
                    piece = fh.read(_COPY_CHUNK)
                    if not piece:
                        break
                    crc = zlib.crc32(piece, crc)
                    put(piece)
                    if progress is not None:
                        progress(len(piece))
            if pos - offset - len(header) - len(raw_name) - len(local_extra) != size:
                raise StoreError(f"{source} changed size while being packed", store=str(target))
            ops.pwrite_all(fd, struct.pack("<I", crc), offset + 14)
            far = force_zip64 or offset >= _U32_LIMIT
            extra_values = ([size, size] if zip64 else []) + ([offset] if far else [])
            extra = struct.pack(f"<HH{len(extra_values)}Q", 1, 8 * len(extra_values), *extra_values) if extra_values else b""
            central.append(_CEN.pack(
                _SIG_CEN, (3 << 8) | 45, 45 if extra else 20, 0x800, 0, _DOS_TIME, _DOS_DATE, crc,
                small, small, len(raw_name), len(extra), 0, 0, 0, 0o100644 << 16,
                _U32_LIMIT if far else offset,
            ) + raw_name + extra)
        cd_offset = pos
        put(b"".join(central))
        cd_size = pos - cd_offset
        count = len(central)
        if force_zip64 or count >= 0xFFFF or cd_offset >= _U32_LIMIT or cd_size >= _U32_LIMIT:
            eocd64_offset = pos
            put(_EOCD64.pack(_SIG_EOCD64, _EOCD64.size - 12, 45, 45, 0, 0, count, count, cd_size, cd_offset))
            put(_LOC64.pack(_SIG_LOC64, 0, eocd64_offset, 1))
            put(_EOCD.pack(int.from_bytes(_SIG_EOCD, "little"), 0, 0, 0xFFFF, 0xFFFF,
                           _U32_LIMIT, _U32_LIMIT, 0))
        else:
            put(_EOCD.pack(int.from_bytes(_SIG_EOCD, "little"), 0, 0, count, count, cd_size, cd_offset, 0))
        ops.fsync(fd)
    finally:
        ops.close(fd)
