"""Mutators for the fuzz targets: bytes, JSON documents, WAL lines, zip structures and codec
layers (issue 12 §3).  Every mutator takes a ``random.Random`` and returns new bytes; a
structure-aware mutator that cannot parse its input falls back to the byte mutator, so
mutations can be stacked on already mutated inputs.

Structure-aware edits keep an input deep: a checksum layer is recomputed after the bytes
under it change (crc32c of a chunk, of a shard index), a compressed layer is decompressed,
edited and compressed again, so the parser below sees a lying length instead of stopping
at the first checksum.

Some edits know that what they made is invalid (a shard index entry pointing past the end of
its shard, a fixed-size chunk cut short): they return :class:`Invalid`, bytes carrying the
rule a reader must refuse them with — the oracle of the campaign (``fuzz_targets.outcome``)
then fails an input that is read without an error, or refused under another rule.
"""
from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from random import Random
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import crc32c
import numpy as np
import zstandard

from molrec_raw.errors import MolrecError
from molrec_raw.zarr.codecs import CodecPipeline
from molrec_raw.zarr.codecs.sharding import EMPTY, ShardingCodec

__all__ = [
    "Invalid", "mutate_bytes", "edit_json", "edit_zarr_json", "edit_wal_lines", "edit_zip", "edit_value", "edit_checkpoint",
    "Bombs", "MAX_INPUT",
]

MAX_INPUT = 4 << 20  # no mutated input grows beyond this
_U64 = (1 << 64) - 1
_INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x20, 0x0A, 0x22, 0x2C, 0x5C, 0x7B, 0x5B)
_DEEP = "\x00molrec-fuzz-deep\x00"  # replaced by deeply nested brackets in the JSON text


class Invalid(bytes):
    """Bytes an edit knows to be invalid: a reader must refuse them, naming ``rule`` or one of
    its sub-rules (``#5`` covers ``#5.1``; ``why`` says what the edit broke).  Slicing or concatenating gives plain bytes: an edit after it
    drops the mark, so only the last edit of an input marks it."""

    rule: str
    why: str

    def __new__(cls, data: bytes, rule: str, why: str) -> "Invalid":
        made = super().__new__(cls, data)
        made.rule, made.why = rule, why
        return made


def marked(data: bytes, like: bytes) -> bytes:
    """``data`` with the mark of ``like`` (when ``like`` is :class:`Invalid`): an honest
    re-encoding of a known-invalid value (a checksum recomputed, a layer compressed again)
    is just as invalid."""
    return Invalid(data, like.rule, like.why) if isinstance(like, Invalid) else data


def interesting_int(rng: Random, width: int, size: int, current: Optional[int] = None) -> int:
    """A value for an unsigned little-endian field of ``width`` bytes in an input of ``size``
    bytes: bounds, sentinels, sizes around the input's, neighbours of the current value."""
    top = (1 << (8 * width)) - 1
    pool = [0, 1, 2, top, top >> 1, (top >> 1) + 1, size, size - 1, size + 1, size * 2, 1 << 31, 1 << 32,
            rng.randrange(top + 1), rng.randrange(2 * size + 64)]
    if current is not None:
        pool += [current + 1, current - 1, current * 2, current + size, current + (1 << 32)]
    return rng.choice(pool) & top


# -- bytes --------------------------------------------------------------------------------

def mutate_bytes(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One generic mutation: bit flips, interesting bytes or integers, truncation, deletion,
    duplication, insertion, or splicing with a donor (another seed of the same target)."""
    b = bytearray(data)
    n = len(b)
    op = rng.randrange(11)
    if op == 0 and n:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif op == 1 and n:
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(n)] = rng.choice(_INTERESTING_BYTES)
    elif op == 2 and n >= 2:
        width = rng.choice([w for w in (2, 4, 8) if w <= n])
        at = rng.randrange(n - width + 1)
        value = interesting_int(rng, width, n, int.from_bytes(b[at:at + width], "little"))
        b[at:at + width] = value.to_bytes(width, "big" if rng.random() < 0.1 else "little")
    elif op == 3:
        del b[rng.randrange(n + 1):]
    elif op == 4 and n:
        start = rng.randrange(n)
        del b[start:start + rng.randint(1, max(1, min(n - start, 64)))]
    elif op == 5 and n:
        start = rng.randrange(n)
        piece = b[start:start + rng.randint(1, 256)]
        at = rng.randrange(n + 1)
        b[at:at] = piece * rng.choice((1, 1, 2, 16))
    elif op == 6:
        at = rng.randrange(n + 1)
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    elif op == 7 and donors:
        donor = rng.choice(donors)
        b = b[:rng.randrange(n + 1)] + donor[rng.randrange(len(donor) + 1):]
    elif op == 8 and donors and n:
        donor = rng.choice(donors)
        if donor:
            start = rng.randrange(len(donor))
            piece = donor[start:start + rng.randint(1, 64)]
            at = rng.randrange(n)
            b[at:at + len(piece)] = piece
    elif op == 9:
        del b[:rng.randrange(n + 1)]
    else:
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(b[:MAX_INPUT])


# -- JSON -----------------------------------------------------------------------------------

_JSON_VALUES: Tuple[Any, ...] = (
    0, 1, -1, 2, 3, 255, 256, 65535, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
    -(2**63), -(2**63) - 1, 10**40, -(10**40), 0.5, -0.0, 1e308, 5e-324, math.nan, math.inf, -math.inf,
    "", "a", "NaN", "Infinity", "-Infinity", "nan", "0x7ff8000000000001", "0x7e00", "0xffffffff", "0x",
    "1e400", "-5", "18446744073709551616", "\ud800", "\u00e9", "..", "/", "a/b", "__x", "zarr.json", "\x00",
    None, True, False, [], {}, [0], [1, 2], {"name": "bytes"}, {"must_understand": False}, _DEEP,
)


def _parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return _DEEP  # not a document: the caller falls back to bytes


def _dump_json(rng: Random, doc: Any) -> bytes:
    try:
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.7, allow_nan=True,
                          indent=2 if rng.random() < 0.3 else None)
    except (ValueError, RecursionError, TypeError):
        return b"{}"
    if _DEEP in text or json.dumps(_DEEP) in text:
        depth = rng.choice((64, 500, 900, 1000, 1100, 3000, 20000))
        opener, closer = rng.choice((("[", "]"), ('{"a":', "}")))
        text = text.replace(json.dumps(_DEEP), opener * depth + "0" + closer * depth)
    return text.encode("utf-8", "surrogatepass")[:MAX_INPUT]


def _nodes(doc: Any) -> List[Tuple[Any, Any]]:
    """(container, key) of every node below the root, iteratively (inputs may be deep)."""
    found: List[Tuple[Any, Any]] = []
    stack = [doc]
    while stack and len(found) < 4096:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            found.append((node, key))
            stack.append(value)
    return found


def _tweak(rng: Random, value: Any) -> Any:
    """A near neighbour of a scalar: numbers ±1, ×2, negated; strings cut or extended."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice((value + 1, value - 1, value * 2, -value, value + 2**32, value * 1000))
    if isinstance(value, float):
        return rng.choice((value * 1e10, -value, value + 0.5, value / 3, float(int(value)) if math.isfinite(value) else 0.0))
    if isinstance(value, str):
        return rng.choice((value[:-1], value + value[-1:], value.upper(), value + "\ud800", "x" + value, value * 2))
    return rng.choice(_JSON_VALUES)


def _donor_node(rng: Random, donors: Sequence[bytes]) -> Any:
    if not donors:
        return rng.choice(_JSON_VALUES)
    doc = _parse_json(rng.choice(donors))
    nodes = _nodes(doc) if doc is not _DEEP else []
    if not nodes:
        return rng.choice(_JSON_VALUES)
    container, key = rng.choice(nodes)
    return json.loads(json.dumps(container[key]))  # a copy


def edit_json(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One edit of a JSON document: a node replaced (by an interesting value, a neighbour or a
    node of a donor document), a member deleted, added or renamed, a list grown or cut."""
    doc = _parse_json(data)
    if doc is _DEEP:
        return mutate_bytes(rng, data, donors)
    nodes = _nodes(doc)
    if not nodes or rng.random() < 0.03:
        return _dump_json(rng, rng.choice((_donor_node(rng, donors), rng.choice(_JSON_VALUES), [doc], {"a": doc})))
    container, key = rng.choice(nodes)
    op = rng.randrange(9)
    if op == 0:
        container[key] = rng.choice(_JSON_VALUES)
    elif op == 1:
        container[key] = _tweak(rng, container[key])
    elif op == 2:
        container[key] = _donor_node(rng, donors)
    elif op == 3:
        del container[key]
    elif op == 4 and isinstance(container, dict):
        name = rng.choice([k for _, k in _nodes(_parse_json(rng.choice(donors))) if isinstance(k, str)] or ["x"]) \
            if donors else "x"
        container[name if rng.random() < 0.7 else name + "_"] = _donor_node(rng, donors)
    elif op == 5 and isinstance(container, dict):
        container[_tweak(rng, key)] = container.pop(key)  # renamed (a lookalike of the name)
    elif op == 6 and isinstance(container, list):
        container.insert(rng.randrange(len(container) + 1), json.loads(json.dumps(container[key])))
    elif op == 7:
        container[key] = rng.choice(([container[key]], {"name": container[key]}, [container[key]] * 3))
    else:
        value = container[key]
        if isinstance(value, list) and value:
            rng.shuffle(value)
            del value[rng.randrange(len(value)):]
        else:
            container[key] = _tweak(rng, value)
    return _dump_json(rng, doc)


_DATA_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
               "float32", "float64", "complex64", "complex128", "string", "r16", "float128", "datetime64")
_CODEC_NAMES = ("bytes", "transpose", "gzip", "zstd", "crc32c", "numcodecs.shuffle", "vlen-utf8",
                "sharding_indexed", "blosc", "")


def edit_zarr_json(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One zarr.json-aware edit: the codecs wrapped in ``sharding_indexed`` up to hundreds of
    levels deep, a codec renamed to another codec (its configuration kept), another data type
    (its fill value and codecs kept), chunks made tiny; else a JSON edit."""
    doc = _parse_json(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("codecs"), list) or rng.random() < 0.4:
        return edit_json(rng, data, donors)
    op = rng.randrange(4)
    grid = doc.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape") if isinstance(
        doc.get("chunk_grid"), dict) and isinstance(doc["chunk_grid"].get("configuration"), dict) else None
    if op == 0:
        for _ in range(rng.choice((1, 2, 9, 40, 400))):
            doc["codecs"] = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": grid if rng.random() < 0.8 else [1], "codecs": doc["codecs"]}}]
    elif op == 1 and doc["codecs"]:
        entry = rng.choice(doc["codecs"])
        if isinstance(entry, dict):
            entry["name"] = rng.choice(_CODEC_NAMES)
    elif op == 2:
        doc["data_type"] = rng.choice(_DATA_TYPES)
    elif isinstance(grid, list):
        doc["chunk_grid"]["configuration"]["chunk_shape"] = [rng.choice((1, 1, 2, 3)) for _ in grid]
    return _dump_json(rng, doc)


# -- WAL lines -------------------------------------------------------------------------------

def edit_wal_lines(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One line-level edit of a metrics WAL: a line's JSON edited, lines duplicated, dropped,
    swapped, joined, blank or invalid UTF-8 lines inserted, a torn tail appended."""
    lines = data.split(b"\n")
    complete = lines[:-1] or [b""]
    i = rng.randrange(len(complete))
    op = rng.randrange(9)
    if op == 0:
        complete[i] = edit_json(rng, complete[i], complete).replace(b"\n", b" ")
    elif op == 1:
        complete.insert(rng.randrange(len(complete) + 1), complete[i])
    elif op == 2:
        del complete[i]
    elif op == 3:
        j = rng.randrange(len(complete))
        complete[i], complete[j] = complete[j], complete[i]
    elif op == 4 and i + 1 < len(complete):
        complete[i:i + 2] = [complete[i] + complete[i + 1]]
    elif op == 5:
        complete.insert(i, rng.choice((b"", b" ", b"\r", b"\t\t", b"\x00", b"null", b"[]", b"{}")))
    elif op == 6:
        complete[i] = complete[i].replace(b'"', b'"\xff', 1) if rng.random() < 0.5 else complete[i] + b"\xc3"
    elif op == 7 and donors:
        donor = rng.choice(donors).split(b"\n")
        complete.insert(i, rng.choice(donor))
    else:
        return b"\n".join(complete) + b"\n" + complete[i][:rng.randrange(len(complete[i]) + 1)]
    return b"\n".join(complete) + b"\n" + lines[-1]


# -- zip structures --------------------------------------------------------------------------

def zip_fields(data: bytes) -> List[Tuple[int, int]]:
    """(position, width) of the length, offset, count and flag fields of a zip archive: end
    records, ZIP64 locator and end record, central headers with their ZIP64 extras, local
    headers.  Parsed leniently: whatever can be found in a damaged archive."""
    fields: List[Tuple[int, int]] = []
    end = data.rfind(b"PK\x05\x06")
    if end < 0 or end + 22 > len(data):
        return fields
    fields += [(end + 8, 2), (end + 10, 2), (end + 12, 4), (end + 16, 4), (end + 20, 2)]
    (cd_offset,) = struct.unpack_from("<I", data, end + 16)
    locator = end - 20
    if locator >= 0 and data[locator:locator + 4] == b"PK\x06\x07":
        fields += [(locator + 4, 4), (locator + 8, 8), (locator + 16, 4)]
        (record,) = struct.unpack_from("<Q", data, locator + 8)
        if record + 56 <= len(data) and data[record:record + 4] == b"PK\x06\x06":
            fields += [(record + at, w) for at, w in ((4, 8), (16, 4), (20, 4), (24, 8), (32, 8), (40, 8), (48, 8))]
            (cd_offset,) = struct.unpack_from("<Q", data, record + 48)
    pos = cd_offset
    while pos + 46 <= len(data) and data[pos:pos + 4] == b"PK\x01\x02" and len(fields) < 20000:
        fields += [(pos + at, w) for at, w in ((8, 2), (10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2),
                                                (32, 2), (34, 2), (42, 4))]
        n, m, k = struct.unpack_from("<HHH", data, pos + 28)
        (local,) = struct.unpack_from("<I", data, pos + 42)
        extra_at, extra_end = pos + 46 + n, min(len(data), pos + 46 + n + m)
        while extra_at + 4 <= extra_end:
            tag, length = struct.unpack_from("<HH", data, extra_at)
            fields += [(extra_at, 2), (extra_at + 2, 2)]
            if tag == 1:
                fields += [(at, 8) for at in range(extra_at + 4, min(extra_end, extra_at + 4 + length) - 7, 8)]
                if local == 0xFFFFFFFF and extra_at + 4 + length <= extra_end and length >= 8:
                    (local,) = struct.unpack_from("<Q", data, extra_at + 4 + length - 8)
            extra_at += 4 + length
        if local + 30 <= len(data) and data[local:local + 4] == b"PK\x03\x04":
            fields += [(local + at, w) for at, w in ((6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2))]
        pos += 46 + n + m + k
    return fields


_HOSTILE_NAMES = (b"../x", b"/abs", b"a//b", b"a\\b", b"a\x00b", b".", b"..", b"c:x", b"\xff\xfe", b"a/",
                  b"x.molrec-tmp.1")


def edit_zip(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One structure-aware zip edit: a length, offset, count or flag field set to an
    interesting value; bytes inserted before the central directory (every offset then lies);
    an entry renamed to a hostile name; a comment appended (with or without its length)."""
    fields = zip_fields(data)
    if not fields:
        return mutate_bytes(rng, data, donors)
    b = bytearray(data)
    op = rng.randrange(10)
    if op < 6:
        for _ in range(rng.choice((1, 1, 2, 3))):
            at, width = rng.choice(fields)
            current = int.from_bytes(b[at:at + width], "little")
            other_at, other_width = rng.choice(fields)
            other = int.from_bytes(b[other_at:other_at + other_width], "little")
            value = other if rng.random() < 0.15 else interesting_int(rng, width, len(b), current)
            b[at:at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    elif op == 6:
        end = data.rfind(b"PK\x05\x06")
        (cd_offset,) = struct.unpack_from("<I", data, end + 16)
        at = min(cd_offset, end) if rng.random() < 0.7 else rng.randrange(len(b) + 1)
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 30, 46))))
    elif op == 7:
        names = [at for at, width in fields if width == 2 and b[at - 28:at - 24] == b"PK\x01\x02"]
        if names:
            at = rng.choice(names)
            n = int.from_bytes(b[at:at + 2], "little")
            name_at = at + 18
            hostile = rng.choice(_HOSTILE_NAMES)
            b[name_at:name_at + n] = hostile
            b[at:at + 2] = len(hostile).to_bytes(2, "little")
            if rng.random() < 0.5:  # the UTF-8 flag set or cleared
                b[at - 20] ^= 0x08
    elif op == 9:  # a central record duplicated (two records, one name; counts fixed or not)
        end = data.rfind(b"PK\x05\x06")
        starts = [at - 8 for at, width in fields if width == 2 and b[at - 8:at - 4] == b"PK\x01\x02"]
        if not starts:
            return mutate_bytes(rng, data, donors)
        first = rng.choice(starts)
        n, m, k = struct.unpack_from("<HHH", data, first + 28)
        record = data[first:first + 46 + n + m + k]
        b[end:end] = record
        if rng.random() < 0.8:
            end += len(record)
            count, size = struct.unpack_from("<HI", b, end + 10)
            struct.pack_into("<HHI", b, end + 8, (count + 1) & 0xFFFF, (count + 1) & 0xFFFF, (size + len(record)) & 0xFFFFFFFF)
    elif op == 8:
        comment = bytes(rng.randrange(256) for _ in range(rng.choice((1, 22, 300))))
        if rng.random() < 0.3:
            comment += b"PK\x05\x06" + bytes(18)  # a fake end record inside the comment
        end = data.rfind(b"PK\x05\x06")
        if rng.random() < 0.7:
            b[end + 20:end + 22] = len(comment).to_bytes(2, "little")
        b += comment
    return bytes(b[:MAX_INPUT])


# -- trajectory checkpoints -----------------------------------------------------------------

_SNAPSHOT_MAGIC = b"MOLREC-RAW SNAPSHOT 1\n"


def edit_frame_bytes(rng: Random, data: bytes, donors: Sequence[bytes] = ()) -> bytes:
    """One edit of a collection's frame-bytes value (``MRF1``, a u32 header length, a JSON
    header, padding, buffers): the header edited as JSON (its length fixed up, or left lying),
    the length field set to an interesting value, an offset or shape in the header bent, the
    padding dirtied, the payload cut, grown or flipped."""
    if len(data) < 8:
        return mutate_bytes(rng, data, donors)
    length = min(int.from_bytes(data[4:8], "little"), len(data) - 8)  # an earlier edit may have made it lie
    header, rest = data[8:8 + length], data[8 + length:]
    op = rng.randrange(6)
    if op == 0:  # the header edited; the length honest or not
        edited = edit_json(rng, header, [d[8:8 + int.from_bytes(d[4:8], "little")] for d in donors if len(d) >= 8])
        pad = b"\0" * (-(8 + len(edited)) % 8)
        body = rest.lstrip(b"\0") if rng.random() < 0.5 else rest[-(len(rest) // 8) * 8:] if rest else b""
        honest = len(edited) if rng.random() < 0.8 else interesting_int(rng, 4, len(edited), len(edited))
        return data[:4] + (honest % 2**32).to_bytes(4, "little") + edited + pad + body
    if op == 1:  # a lying header length
        return data[:4] + (interesting_int(rng, 4, len(data), length) % 2**32).to_bytes(4, "little") + data[8:]
    if op == 2:  # a number of the header (an offset, a count, a shape) bent in place
        digits = [i for i in range(8, 8 + length) if 48 <= data[i] <= 57]
        if digits:
            i = rng.choice(digits)
            out = bytearray(data)
            out[i] = rng.choice(b"0123456789")
            if rng.random() < 0.3:  # longer numbers keep the JSON valid and lie about sizes
                out[i:i + 1] = str(rng.choice((7, 9, 2**31, 2**40, 2**63, 10**30))).encode()
                grown = len(out) - len(data)
                out[4:8] = ((length + grown) % 2**32).to_bytes(4, "little")
            return bytes(out)
    if op == 3 and rest:  # padding made dirty
        pad_end = (8 + length + 7) & ~7
        if pad_end > 8 + length:
            out = bytearray(data)
            out[8 + length] = rng.randrange(1, 256)
            return bytes(out)
    if op == 4:  # payload cut or grown
        cut = rng.randrange(8 + length, len(data) + 1)
        return data[:cut] if rng.random() < 0.6 else data + bytes(rng.randrange(1, 64))
    return mutate_bytes(rng, data, donors)


def edit_checkpoint(rng: Random, data: bytes, bombs: "Bombs") -> bytes:
    """One edit of a snapshot (magic line, crc32c, one zstd frame of a JSON directory and
    the saved bytes): the directory or the saved bytes edited and compressed again, the zstd
    frame edited (sizes, flags, a bomb), or its bytes mutated — the checksum recomputed
    (nine times in ten) so the parser below it is reached."""
    start = len(_SNAPSHOT_MAGIC) + 4
    if not data.startswith(_SNAPSHOT_MAGIC) or len(data) < start:
        return mutate_bytes(rng, data)
    packed = data[start:]
    op = rng.randrange(3)
    if op == 0:
        try:
            body = zstandard.ZstdDecompressor().decompress(packed, max_output_size=MAX_INPUT)
        except (zstandard.ZstdError, MemoryError):
            return mutate_bytes(rng, data)
        head, _, rest = body.partition(b"\n")
        if rng.random() < 0.6:
            head = edit_json(rng, head).replace(b"\n", b" ")
        else:
            rest = mutate_bytes(rng, rest)
        packed = zstandard.ZstdCompressor(level=1, write_content_size=rng.random() < 0.8).compress(head + b"\n" + rest)
    elif op == 1:
        packed = _edit_zstd(rng, None, packed, bombs) or mutate_bytes(rng, packed)
    else:
        packed = mutate_bytes(rng, packed)
    checksum = crc32c.crc32c(packed) if rng.random() < 0.9 else rng.randrange(1 << 32)
    return _SNAPSHOT_MAGIC + checksum.to_bytes(4, "little") + packed[:MAX_INPUT]


# -- codec layers (chunks, shards, vlen-utf8) ------------------------------------------------

class Bombs:
    """Decompression bombs made once: small compressed values that inflate to 64 MiB."""

    def __init__(self, size: int = 64 << 20) -> None:
        self.size = size
        zeros = bytes(1 << 20)
        compressor = zstandard.ZstdCompressor(write_content_size=False)
        chunker = compressor.compressobj()
        self.zstd = b"".join([chunker.compress(zeros) for _ in range(size >> 20)] + [chunker.flush()])
        deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
        self.gzip = b"".join([deflate.compress(zeros) for _ in range(size >> 20)] + [deflate.flush()])


def _layers(pipeline: CodecPipeline) -> List[Any]:
    """The codecs that produced a stored value, innermost first: array->bytes, bytes->bytes*."""
    return [pipeline.array_bytes, *pipeline.bytes_codecs]


def _peel(pipeline: CodecPipeline, value: bytes, depth: int) -> Optional[bytes]:
    """``value`` with its ``depth`` outermost bytes->bytes layers decoded (None: undecodable)."""
    data: Any = value
    try:
        for codec in list(reversed(pipeline.bytes_codecs))[:depth]:
            data = codec.decode(data, None, MAX_INPUT)
    except MolrecError:
        return None
    return bytes(memoryview(data).cast("B"))


def _wrap(pipeline: CodecPipeline, data: bytes, depth: int) -> Optional[bytes]:
    """Encode ``data`` again through the ``depth`` outermost layers (checksums recomputed)."""
    out: Any = data
    try:
        for codec in pipeline.bytes_codecs[len(pipeline.bytes_codecs) - depth:]:
            out = codec.encode(out)
    except MolrecError:
        return None
    return bytes(memoryview(out).cast("B"))


def edit_value(rng: Random, pipeline: CodecPipeline, value: bytes, bombs: Bombs) -> bytes:
    """One codec-aware edit of a stored chunk or shard: peel some outer layers, edit what
    the codec below produced (its own structure: a zstd frame header, a gzip header or
    trailer, vlen-utf8 lengths, a shard index or an inner chunk), wrap it again."""
    layers = _layers(pipeline)
    depth = rng.randrange(len(pipeline.bytes_codecs) + 1)
    exposed = _peel(pipeline, value, depth)
    if exposed is None:
        depth, exposed = 0, value
    producer = layers[len(layers) - 1 - depth]
    edit = _EDITS.get(producer.name)
    edited = edit(rng, producer, exposed, bombs) if edit is not None and rng.random() < 0.8 else None
    if edited is None and producer.name == "bytes" and exposed and rng.random() < 0.3 and all(
            codec.name in _LENGTH_BLIND for codec in pipeline.bytes_codecs):
        cut = rng.randint(1, min(len(exposed), 9))  # a fixed-size chunk cut short (a short read)
        # refused by the first layer that knows the size it must decode to (#5.x: bytes, gzip, zstd, crc32c)
        edited = Invalid(exposed[:-cut], "zarr-v3-subset#5", f"a chunk of {len(exposed)} bytes cut by {cut}")
    if edited is None:
        edited = mutate_bytes(rng, exposed)
    wrapped = _wrap(pipeline, edited, depth)
    if wrapped is None or len(wrapped) > MAX_INPUT:
        return edited[:MAX_INPUT]
    return marked(wrapped, edited)


# bytes -> bytes codecs that pass any length through (a cut under them reaches the bytes codec)
_LENGTH_BLIND = ("gzip", "zstd", "crc32c")


def _edit_zstd(rng: Random, codec: Any, data: bytes, bombs: Bombs) -> Optional[bytes]:
    """A zstd frame with its content size, header flags or checksum edited, a second or a
    skippable frame appended, or a bomb in its place."""
    op = rng.randrange(7)
    if op == 0:
        return bombs.zstd
    if op == 1:
        return data + data
    if op == 2:
        return data + b"\x50\x2a\x4d\x18" + struct.pack("<I", 8) + bytes(rng.randrange(256) for _ in range(8))
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd":
        return None
    b = bytearray(data)
    descriptor = b[4]
    if op == 3:
        b[4] ^= 1 << rng.randrange(8)
        return bytes(b)
    if op == 4 and descriptor & 0x04 and len(b) >= 10:  # content checksum flag: the last 4 bytes
        b[-4:] = interesting_int(rng, 4, len(b)).to_bytes(4, "little")
        return bytes(b)
    single = descriptor >> 5 & 1
    width = (1 if single else 0, 2, 4, 8)[descriptor >> 6]
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
    if width == 0 or at + width > len(b):
        return None
    current = int.from_bytes(b[at:at + width], "little")
    b[at:at + width] = interesting_int(rng, width, len(b), current).to_bytes(width, "little")
    return bytes(b)


def _edit_gzip(rng: Random, codec: Any, data: bytes, bombs: Bombs) -> Optional[bytes]:
    """A gzip member with header flags, method, CRC-32 or ISIZE edited, members appended, or
    a bomb in its place."""
    op = rng.randrange(6)
    if op == 0:
        return bombs.gzip
    if op == 1:
        return data + (data if rng.random() < 0.5 else b"\x1f\x8b\x08\x00" + bytes(rng.randrange(256) for _ in range(12)))
    if len(data) < 18:
        return None
    b = bytearray(data)
    if op == 2:
        b[3] |= rng.choice((0x02, 0x04, 0x08, 0x10, 0xE0))
    elif op == 3:
        b[2] = rng.choice((0, 7, 9, 255))
    else:
        at = len(b) - rng.choice((4, 8))
        b[at:at + 4] = interesting_int(rng, 4, len(b), int.from_bytes(b[at:at + 4], "little")).to_bytes(4, "little")
    return bytes(b)


def _edit_vlen(rng: Random, codec: Any, data: bytes, bombs: Bombs) -> Optional[bytes]:
    """vlen-utf8 with its count or an element length lying, an element's bytes invalid
    UTF-8, or every element made the same length (the uniform fast path)."""
    if len(data) < 4:
        return None
    b = bytearray(data)
    positions = [0]  # the count, then each element's length field
    pos = 4
    while pos + 4 <= len(b) and len(positions) < 4096:
        positions.append(pos)
        pos += 4 + int.from_bytes(b[pos:pos + 4], "little")
    op = rng.randrange(4)
    if op == 0 or len(positions) == 1:
        at = rng.choice(positions)
        b[at:at + 4] = interesting_int(rng, 4, len(b), int.from_bytes(b[at:at + 4], "little")).to_bytes(4, "little")
    elif op == 1:
        at = rng.choice(positions[1:]) + 4
        b[at:at] = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xe2\x82"))
        length_at = at - 4
        length = int.from_bytes(b[length_at:at], "little")
        if rng.random() < 0.8:  # keep the length honest so the bytes are decoded
            b[length_at:at] = ((length + (len(b) - len(data))) & 0xFFFFFFFF).to_bytes(4, "little")
    elif op == 2:
        count = int.from_bytes(b[:4], "little")
        width = rng.choice((0, 1, 2, 3, 5))
        body = rng.choice((b"a", b"\x00", b"\xc3\xa9", b"\x7f", b"\x80"))
        cell = struct.pack("<I", width) + (body * width)[:width]
        return struct.pack("<I", count) + cell * min(count, 1 << 16)
    else:
        at = rng.choice(positions[1:])
        del b[at:at + rng.randint(1, 8)]
    return bytes(b)


def _edit_shard(rng: Random, codec: ShardingCodec, data: bytes, bombs: Bombs) -> Optional[bytes]:
    """A shard with an index entry lying (offset or size set to an interesting value, made
    empty, pointed at another chunk's bytes) or an inner chunk edited through its own
    codecs; the index is encoded again (its checksum recomputed) and the layout redone."""
    n = codec.n_chunks
    nbytes = 16 * n
    start = 0 if codec.index_location == "start" else len(data) - codec.index_size
    if start < 0 or start + nbytes > len(data):
        return None
    index = np.frombuffer(data, "<u8", 2 * n, start).reshape(n, 2).copy()
    op = rng.randrange(4)
    if op == 0:  # an inner chunk through its own codecs, the shard laid out again
        present = [i for i in range(n) if index[i, 0] != EMPTY and int(index[i, 0]) + int(index[i, 1]) <= len(data)]
        if not present:
            return None
        values: List[Optional[bytes]] = [
            data[int(o):int(o) + int(s)] if o != EMPTY and int(o) + int(s) <= len(data) else None for o, s in index]
        i = rng.choice(present)
        values[i] = edit_value(rng, codec.inner, values[i] or b"", bombs)
        assembled = codec._assemble(values)  # the writer's own layout and index encoding
        return marked(assembled, values[i]) if assembled else None
    if op == 1:
        i = rng.randrange(n)
        which = rng.randrange(2)
        index[i, which] = interesting_int(rng, 8, len(data), int(index[i, which]))
    elif op == 2:
        i, j = rng.randrange(n), rng.randrange(n)
        index[i] = index[j]
        if rng.random() < 0.5:
            index[i, 1] = (int(index[i, 1]) + rng.choice((1, 7, 4096))) & _U64
    else:
        i = rng.randrange(n)
        index[i] = (EMPTY, EMPTY) if index[i, 0] != EMPTY else (rng.randrange(len(data) + 1), rng.randrange(64))
        if rng.random() < 0.3:
            index[i, rng.randrange(2)] = EMPTY  # half empty
    encoded = bytes(memoryview(codec.index_pipeline.encode(index.reshape(codec.chunks_per_shard + (2,)))).cast("B"))
    if codec.index_location == "start":
        edited = encoded + data[codec.index_size:]
    else:
        edited = data[:start] + encoded
    return _past_the_end(index, len(edited), edited)


def _past_the_end(index: np.ndarray, size: int, shard: bytes) -> bytes:
    """``shard`` marked invalid when an entry of its index is present (its offset not the
    empty sentinel) and its range is not inside the shard's ``size`` bytes (zarr-v3-subset#7)."""
    for i, (offset, nbytes) in enumerate(index.tolist()):
        if offset != int(EMPTY) and offset + nbytes > size:
            return Invalid(shard, "zarr-v3-subset#7",
                           f"shard index entry {i}: {nbytes} bytes at {offset}, in a shard of {size} bytes")
    return shard


_EDITS: Dict[str, Callable[[Random, Any, bytes, Bombs], Optional[bytes]]] = {"zstd": _edit_zstd, "gzip": _edit_gzip, "vlen-utf8": _edit_vlen, "sharding_indexed": _edit_shard}


# -- LMDB data files ------------------------------------------------------------------------
# The fuzzer's own reading of liblmdb's on-disk layout (64-bit, little-endian: the platforms the
# campaign runs on), independent of molrec_raw.collection.structure so the oracle does not share
# the checker's mistakes.  Page header: pgno u64, pad u16, flags u16, lower u16, upper u16 (16
# bytes); meta after it (136 bytes): magic, version (u32), address, mapsize (u64), two databases of 48 bytes
# (pad u32, flags u16, depth u16, branch, leaf, overflow pages, entries, root: u64), last page and
# transaction id (u64).
_LMDB_HEADER = 16
_LMDB_MAGIC = 0xBEEFC0DE
_LMDB_META_END = _LMDB_HEADER + 136
LMDB_KINDS = ("truncate_random", "truncate_page", "truncate_meta", "zero_page", "meta_flip", "pgno_branch",
              "pgno_leaf", "pgno_overflow", "bytes")


class Mutant(bytes):
    """A mutated LMDB file and the kind of edit that made it (``kind``, one of LMDB_KINDS)."""

    kind: str

    def __new__(cls, data: bytes, kind: str) -> "Mutant":
        made = super().__new__(cls, data)
        made.kind = kind
        return made


class InvalidMutant(Invalid):
    """A mutant known to be invalid (see :class:`Invalid`), with its kind."""

    kind: str

    def __new__(cls, data: bytes, rule: str, why: str, kind: str) -> "InvalidMutant":  # type: ignore[override]
        made = super().__new__(cls, data, rule, why)
        made.kind = kind
        return made


@dataclass
class LmdbLayout:
    """Where the page numbers of an LMDB file are: its page size, the pages its newest meta page
    claims, and the file offsets of each branch node's child number (6 bytes: lo, hi, flags), each
    big value's overflow page number (8 bytes), each overflow run's first page, each tree page."""

    page_size: int
    pages: int  # last page + 1 of the meta page a reader takes
    branch_children: List[int] = field(default_factory=list)
    leaf_overflows: List[int] = field(default_factory=list)
    overflow_pages: List[int] = field(default_factory=list)
    tree_pages: List[int] = field(default_factory=list)


def lmdb_layout(data: bytes) -> Optional[LmdbLayout]:
    """The layout of an LMDB file this package wrote (None when ``data`` is not one: the walk
    stops at anything odd)."""
    try:
        metas = []
        size = 0
        for number in (0, 1):
            at = number * size
            magic, _ = struct.unpack_from("<II", data, at + _LMDB_HEADER)
            if magic != _LMDB_MAGIC:
                return None
            psize = struct.unpack_from("<I", data, at + _LMDB_HEADER + 24)[0]
            size = size or psize
            last, txnid = struct.unpack_from("<QQ", data, at + _LMDB_HEADER + 120)
            depth, root = struct.unpack_from("<H", data, at + _LMDB_HEADER + 72 + 6)[0], \
                struct.unpack_from("<Q", data, at + _LMDB_HEADER + 72 + 40)[0]
            metas.append((txnid, number, last, depth, root))
        txnid, _, last, depth, root = max(metas, key=lambda m: (m[0], -m[1]))
        if size not in (4096, 8192, 16384, 32768, 65536) or len(data) < (last + 1) * size:
            return None
        layout = LmdbLayout(size, last + 1)
        if root == (1 << 64) - 1:
            return layout
        todo = [(root, 1)]
        while todo:
            pgno, level = todo.pop()
            if len(layout.tree_pages) > layout.pages or not 2 <= pgno <= last:
                return None
            base = pgno * size
            layout.tree_pages.append(base)
            _, _, flags, lower, _ = struct.unpack_from("<QHHHH", data, base)
            for i in range((lower - _LMDB_HEADER) // 2):
                node = base + struct.unpack_from("<H", data, base + _LMDB_HEADER + 2 * i)[0]
                lo, hi, node_flags, ksize = struct.unpack_from("<HHHH", data, node)
                if flags == 1 and level < depth:
                    layout.branch_children.append(node)
                    todo.append((lo | hi << 16 | node_flags << 32, level + 1))
                elif flags == 2 and node_flags == 1:
                    layout.leaf_overflows.append(node + 8 + ksize)
                    first = struct.unpack_from("<Q", data, node + 8 + ksize)[0]
                    layout.overflow_pages.append(first * size)
        return layout
    except struct.error:
        return None


def edit_lmdb_file(rng: Random, data: bytes) -> bytes:
    """One edit of an LMDB file of the kinds a damaged copy shows (LMDB_KINDS): cut short (at a
    random offset, at a page boundary, inside the meta pages), a page zeroed, bits of a meta page
    flipped, a page number overwritten in a branch page (a child), a leaf page (a big value's
    overflow page) or an overflow page's header.  A file cut short of the pages its meta page
    claims, a zeroed tree page, or a child or big value's page number set past the file's end is
    known invalid (``lmdb#L18``, ``lmdb#L19``); the other edits may leave a file a reader can
    read (an overflow page's header is never read by one)."""
    layout = lmdb_layout(data)
    if layout is None:
        return Mutant(mutate_bytes(rng, data), "bytes")
    size, pages, whole = layout.page_size, layout.pages, layout.pages * layout.page_size
    kind = rng.choice(LMDB_KINDS[:-1])
    b = bytearray(data)
    if kind.startswith("truncate"):
        cut = {"truncate_random": lambda: rng.randrange(whole),
               "truncate_page": lambda: rng.randrange(pages) * size,
               "truncate_meta": lambda: rng.randrange(2 * size)}[kind]()
        return InvalidMutant(data[:cut], "lmdb#L18", f"cut to {cut} of the {whole} bytes its meta page claims", kind)
    if kind == "zero_page":
        page = rng.randrange(pages)
        b[page * size:(page + 1) * size] = bytes(size)
        if page * size in layout.tree_pages:
            return InvalidMutant(bytes(b), "lmdb#L19", f"tree page {page} zeroed", kind)
        return Mutant(bytes(b), kind)
    if kind == "meta_flip":
        base = rng.randrange(2) * size
        for _ in range(rng.randint(1, 4)):
            b[base + rng.randrange(_LMDB_META_END)] ^= 1 << rng.randrange(8)
        return Mutant(bytes(b), kind)
    places = {"pgno_branch": layout.branch_children, "pgno_leaf": layout.leaf_overflows,
              "pgno_overflow": layout.overflow_pages}[kind]
    if not places:
        return Mutant(mutate_bytes(rng, data), "bytes")
    at = rng.choice(places)
    past = rng.random() < 0.5
    value = rng.choice((pages, pages + 1, pages + 1000, 1 << 31, (1 << 48) - 1)) if past else rng.randrange(pages)
    if kind == "pgno_branch":  # the child number is lo | hi << 16 | flags << 32 (48 bits)
        b[at:at + 6] = (value & ((1 << 48) - 1)).to_bytes(6, "little")
    elif kind == "pgno_leaf":
        b[at:at + 8] = value.to_bytes(8, "little")
    else:  # the overflow page's own number or its page count (u32 at offset 12): a reader reads neither
        first = at // size
        if rng.random() < 0.5:
            b[at:at + 8] = value.to_bytes(8, "little")
        else:
            count = (pages - first + rng.choice((1, 2, 1000))) if past else rng.randrange(1, 4)
            b[at + 12:at + 16] = count.to_bytes(4, "little")
        return Mutant(bytes(b), kind)
    if past:
        return InvalidMutant(bytes(b), "lmdb#L19", f"{kind}: a page number past the end ({pages} pages)", kind)
    return Mutant(bytes(b), kind)
