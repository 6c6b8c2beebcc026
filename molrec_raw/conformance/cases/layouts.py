"""Valid cases: Zarr layouts other writers choose, which a reader must accept (zarr-v3-subset).

Each starts from a record our writer made and re-lays one array (or edits one document)
through the Zarr layer the way another writer would: big-endian bytes, transpose, gzip,
zstd frames without a content size, shards with the index at either end, other chunk key
encodings, extension fields, short-hand codec names.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import zstandard

from molrec_raw.conformance.cases.base import edit_json, group_at, store_of, strings, valid
from molrec_raw.record.doors import write_mrec_frame
from molrec_raw.record.model import Block, Frame

_BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}


def relay(rec: Path, node: str, values: np.ndarray, *, chunks: Optional[List[int]] = None,
          codecs: Optional[List[Any]] = None, shards: Optional[List[int]] = None, index_location: str = "end",
          fill_value: Any = None, key_encoding: Optional[Dict[str, Any]] = None,
          dimension_names: Optional[List[Optional[str]]] = None) -> None:
    """Replace the array at ``node`` by one holding ``values`` laid out as given (its
    attributes kept)."""
    attrs = dict(store_of(rec)[node].attrs)
    parent, name = node.rsplit("/", 1)
    dtype = str if values.dtype == object else values.dtype
    array = group_at(rec, parent).create_array(
        name, shape=values.shape, dtype=dtype, chunks=chunks, shards=shards, codecs=codecs, fill_value=fill_value,
        attributes=attrs, chunk_key_encoding=key_encoding, shard_index_location=index_location,
        dimension_names=dimension_names, overwrite=True)
    array[...] = values


def _base(rec: Path, **columns: np.ndarray) -> None:
    write_mrec_frame(rec, Frame({}, {"atoms": Block(dict(columns))}), durable=False)


_X = np.array([0.25, -1.5, 3.0, 1e100, -0.0])


@valid("zarr-big-endian", "big-endian columns (bytes codec endian big): a reader decodes either byte order "
       "(root-layout, zarr-v3-subset#5.1)")
def _big_endian(rec: Path) -> None:
    serial = np.array([1, 2**40, -3, 7, 0], dtype=np.int64)
    _base(rec, x=_X, serial=serial)
    big = [{"name": "bytes", "configuration": {"endian": "big"}}]
    relay(rec, "frame/atoms/x", _X, codecs=big)
    relay(rec, "frame/atoms/serial", serial, codecs=big + [{"name": "crc32c"}])


@valid("zarr-transpose", "a 2-D column stored through a transpose codec (order [1, 0]) (zarr-v3-subset#5.2)")
def _transpose(rec: Path) -> None:
    pos = np.arange(12.0).reshape(4, 3) / 8
    _base(rec, pos=pos)
    relay(rec, "frame/atoms/pos", pos, codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}}, _BYTES_LE])


@valid("zarr-gzip-9", "a column compressed with gzip level 9 behind a crc32c (zarr-v3-subset#5.3)")
def _gzip(rec: Path) -> None:
    _base(rec, x=_X)
    relay(rec, "frame/atoms/x", _X, codecs=[_BYTES_LE, {"name": "gzip", "configuration": {"level": 9}},
                                             {"name": "crc32c"}])


@valid("zarr-zstd-checksum", "zstd frames with a content checksum (zarr-v3-subset#5.4)")
def _zstd_checksum(rec: Path) -> None:
    _base(rec, x=_X)
    relay(rec, "frame/atoms/x", _X, codecs=[_BYTES_LE, {"name": "zstd", "configuration": {"level": 5,
                                                                                        "checksum": True}}])


@valid("zarr-zstd-no-content-size", "a zstd frame that does not declare its content size (older numcodecs wrote "
       "them): decoded by a bounded streaming reader (zarr-v3-subset#5.4, #11.10)")
def _zstd_no_size(rec: Path) -> None:
    _base(rec, x=_X)
    relay(rec, "frame/atoms/x", _X, codecs=[_BYTES_LE, {"name": "zstd", "configuration": {"level": 3,
                                                                                        "checksum": False}}])
    raw = _X.astype("<f8").tobytes()
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(raw)
    (rec / "frame" / "atoms" / "x" / "c" / "0").write_bytes(frame)


@valid("zarr-shards-index-end", "a sharded column, index at the end, two shards (the last one an edge shard), one "
       "inner chunk all fill and so not stored (zarr-v3-subset#7)")
def _shards_end(rec: Path) -> None:
    values = np.array([1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 7.0])
    _base(rec, x=values)
    relay(rec, "frame/atoms/x", values, chunks=[2], shards=[4], codecs=[_BYTES_LE, {"name": "crc32c"}])


@valid("zarr-shards-index-start", "a sharded 2-D column with the index at the start and inner chunks across both "
       "axes (zarr-v3-subset#7)")
def _shards_start(rec: Path) -> None:
    values = np.arange(24, dtype=np.int32).reshape(6, 4)
    _base(rec, m=values)
    relay(rec, "frame/atoms/m", values, chunks=[2, 2], shards=[4, 4], index_location="start",
          codecs=[_BYTES_LE, {"name": "gzip", "configuration": {"level": 1}}])


@valid("zarr-key-v2", "chunk keys in the v2 encoding with '.' (1.0 rather than c/1/0) (zarr-v3-subset#4)")
def _key_v2(rec: Path) -> None:
    values = np.arange(6.0).reshape(3, 2)
    _base(rec, p=values)
    relay(rec, "frame/atoms/p", values, chunks=[2, 1], key_encoding={"name": "v2", "configuration": {"separator": "."}},
          codecs=[_BYTES_LE])


@valid("zarr-key-dot", "default chunk keys with the '.' separator (c.1) and an edge chunk that overhangs the "
       "array (zarr-v3-subset#4)")
def _key_dot(rec: Path) -> None:
    values = strings("a", "b", "c", "d", "e")
    _base(rec, s=values)
    relay(rec, "frame/atoms/s", values, chunks=[3], key_encoding={"name": "default", "configuration": {"separator": "."}},
          codecs=[{"name": "vlen-utf8", "configuration": {}}, {"name": "zstd", "configuration": {"level": 1,
                                                                                             "checksum": False}}])


@valid("zarr-missing-chunks", "chunks that are all fill value are not stored: a column of zeros has no chunk at "
       "all, and a NaN-filled column misses its all-NaN chunk (zarr-v3-subset#3, #6)")
def _missing(rec: Path) -> None:
    nans = np.array([np.nan, np.nan, 1.0, 2.0])
    _base(rec, zero=np.zeros(4), nan=nans)
    relay(rec, "frame/atoms/nan", nans, chunks=[2], fill_value=float("nan"), codecs=[_BYTES_LE])


@valid("zarr-extension-fields", "extra zarr.json keys marked must_understand: false, on a group and an array, "
       "are ignored (zarr-v3-subset#2.3)")
def _extension(rec: Path) -> None:
    _base(rec, x=_X)
    ext = {"must_understand": False, "vendor": "x"}
    edit_json(rec, "frame/atoms/x/zarr.json", lambda d: d.update({"x_vendor": ext}))
    edit_json(rec, "frame/zarr.json", lambda d: d.update({"x_vendor": ext}))


@valid("zarr-shorthand-codecs", "short-hand codec names (\"bytes\" for a 1-byte type, \"crc32c\"), a chunk key "
       "encoding without configuration, an empty storage_transformers (zarr-v3-subset#2.3)")
def _shorthand(rec: Path) -> None:
    flags = np.array([1, 0, 255], dtype=np.uint8)
    _base(rec, f=flags)
    relay(rec, "frame/atoms/f", flags, codecs=[_BYTES_LE, {"name": "crc32c"}])
    edit_json(rec, "frame/atoms/f/zarr.json", lambda d: d.update(
        {"codecs": ["bytes", "crc32c"], "chunk_key_encoding": {"name": "default"}, "storage_transformers": []}))


@valid("zarr-consolidated-metadata", "a group carrying a stale inline consolidated_metadata: ignored, members "
       "come from the store (zarr-v3-subset#2.1)")
def _consolidated(rec: Path) -> None:
    _base(rec, x=_X)
    edit_json(rec, "frame/zarr.json", lambda d: d.update(
        {"consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {}}}))


@valid("zarr-dimension-names", "dimension_names on a column and no attributes key at all (tensorstore omits "
       "it) (zarr-v3-subset#2.2)")
def _dimension_names(rec: Path) -> None:
    pos = np.arange(6.0).reshape(2, 3)
    _base(rec, pos=pos)
    relay(rec, "frame/atoms/pos", pos, codecs=[_BYTES_LE], dimension_names=["atom", None])
    edit_json(rec, "frame/atoms/pos/zarr.json", lambda d: d.pop("attributes"))


@valid("zarr-chunked-trailing", "a column chunked along its trailing axis too (chunks [2, 1]: six chunks) "
       "(zarr-v3-subset#4)")
def _chunked_trailing(rec: Path) -> None:
    pos = np.arange(9.0).reshape(3, 3) - 4.0
    _base(rec, pos=pos)
    relay(rec, "frame/atoms/pos", pos, chunks=[2, 1], codecs=[_BYTES_LE, {"name": "crc32c"}])
