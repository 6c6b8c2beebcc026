"""Interop with zarr-python 3.x (both directions) and tensorstore (reads of our arrays).

Every configuration in ``CASES`` is exercised twice:

* direction A (``test_we_write_zarr_python_reads``): molrec_raw creates and writes the
  array, zarr-python opens it read-only and must see the same values, metadata,
  attributes and dimension names;
* direction B (``test_zarr_python_writes_we_read``): zarr-python creates and writes the
  same configuration (sharded arrays with its default Morton sub-chunk order), and
  molrec_raw must read it back identically.

Both directions also compare the codec pipeline each side sees with the intended one.
Further tests: zip archives both ways, the byte-exact shard vectors of
zarr-v3-subset §7 (ours and zarr-python's), Morton-ordered shards, zarr-python's
default pipelines read and then rewritten by us, append/resize, consolidated
metadata, non-finite attributes, and tensorstore reads of ~20 of our arrays.
Everything is skipped cleanly when zarr-python 3 (resp. tensorstore) is not
importable.  Known package bugs are ``xfail(strict=True)`` with the reason.
"""
from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import molrec_raw.zarr as mz
from molrec_raw.errors import InvalidMetadataError

pytestmark = pytest.mark.interop


# ---------------------------------------------------------------------------
# optional oracles
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zp():
    """zarr-python >= 3, or skip."""
    zarr = pytest.importorskip("zarr")
    version = getattr(zarr, "__version__", None)
    if version is None:
        # tests/conftest.py puts tests/ on sys.path, so without zarr-python installed
        # "import zarr" finds the namespace package tests/zarr: not the oracle.
        import sys

        sys.modules.pop("zarr", None)
        pytest.skip("zarr-python is not installed ('zarr' resolves to the tests/zarr directory)")
    major = int(str(version).split(".")[0] or 0)
    if major < 3:
        pytest.skip(f"zarr-python {zarr.__version__} is not 3.x")
    return zarr


@pytest.fixture(scope="module")
def ts():
    return pytest.importorskip("tensorstore")


def _shuffle_class():
    """zarr-python's class for ``numcodecs.shuffle`` (native since 3.1.3, else numcodecs')."""
    try:
        from zarr.codecs.numcodecs import Shuffle  # type: ignore[import-not-found]

        return Shuffle
    except ImportError:
        pass
    try:
        from numcodecs.zarr3 import Shuffle  # type: ignore[import-not-found]

        return Shuffle
    except ImportError:
        return None


# ---------------------------------------------------------------------------
# codec shorthands (zarr.json codec objects, as molrec_raw's create_array takes them)
# ---------------------------------------------------------------------------
def BYTES(endian: str = "little") -> Dict[str, Any]:
    return {"name": "bytes", "configuration": {"endian": endian}}


BIG = BYTES("big")
LITTLE = BYTES("little")
VLEN = {"name": "vlen-utf8", "configuration": {}}
CRC = {"name": "crc32c"}


def GZIP(level: int = 5) -> Dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def ZSTD(level: int = 3, checksum: bool = False) -> Dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}


def SHUFFLE(elementsize: int) -> Dict[str, Any]:
    return {"name": "numcodecs.shuffle", "configuration": {"elementsize": elementsize}}


def TRANSPOSE(*order: int) -> Dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": list(order)}}


def SHARD(chunk_shape: Sequence[int], codecs: List[Any], index_location: str = "end") -> Dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(chunk_shape), "codecs": codecs, "index_location": index_location}}


# ---------------------------------------------------------------------------
# the configuration matrix
# ---------------------------------------------------------------------------
_DEFAULT = object()  # "fill_value not given"


@dataclass(frozen=True)
class Case:
    id: str
    dtype: str
    shape: Tuple[int, ...]
    chunks: Tuple[int, ...]
    codecs: Tuple[Any, ...]                       # inner pipeline (whole pipeline when unsharded)
    shards: Optional[Tuple[int, ...]] = None
    index_location: str = "end"
    fill: Any = _DEFAULT
    write: str = "full"                           # "full" | "partial"
    dimension_names: Optional[Tuple[Optional[str], ...]] = None
    attributes: Optional[Dict[str, Any]] = None
    key_encoding: Optional[Dict[str, Any]] = None  # zarr.json form
    expect_keys: Tuple[str, ...] = ()             # chunk keys (relative to the array) that must exist
    absent_keys: Tuple[str, ...] = ()             # chunk keys that must not exist (never written)
    fortran: bool = False                         # hand the full write over as an F-ordered array
    xfail_a: Optional[str] = None
    xfail_b: Optional[str] = None

    @property
    def name(self) -> str:
        return "arr"

    @property
    def uses_shuffle(self) -> bool:
        return "numcodecs.shuffle" in repr(self.codecs)


NESTED_ATTRS = {
    "title": "interop ✓",
    "nested": {"list": [1, 2.5, "three", None, True, {"deep": [[], {}]}], "empty": {}},
    "null_value": None,
    "int64": -(2**63),
    "uint64": 2**64 - 1,
    "unicode": "日本語 🧪",
}

I8, U8 = np.iinfo(np.int64), np.iinfo(np.uint64)

CASES: List[Case] = [
    # -- every data type, each with a different little pipeline ------------------------
    Case("bool-gzip", "bool", (5, 4), (2, 3), (LITTLE, GZIP(5))),
    Case("int8-zstd", "int8", (5, 4), (2, 3), (LITTLE, ZSTD(3))),
    Case("int16-zstd-checksum", "int16", (5, 4), (2, 3), (LITTLE, ZSTD(1, True))),
    Case("int32-crc32c", "int32", (5, 4), (2, 3), (LITTLE, CRC)),
    Case("int64-shuffle-zstd", "int64", (5, 4), (2, 3), (LITTLE, SHUFFLE(8), ZSTD(3))),
    Case("uint8-gzip9", "uint8", (5, 4), (2, 3), (LITTLE, GZIP(9))),
    Case("uint16-big-zstd", "uint16", (5, 4), (2, 3), (BIG, ZSTD(3))),
    Case("uint32-shuffle-gzip-crc32c", "uint32", (5, 4), (2, 3), (LITTLE, SHUFFLE(4), GZIP(1), CRC)),
    Case("uint64-big", "uint64", (5, 4), (2, 3), (BIG,)),
    Case("float16-zstd", "float16", (5, 4), (2, 3), (LITTLE, ZSTD(3))),
    Case("float32-shuffle-zstd-crc32c", "float32", (5, 4), (2, 3), (LITTLE, SHUFFLE(4), ZSTD(5), CRC)),
    Case("float64-big-gzip", "float64", (5, 4), (2, 3), (BIG, GZIP(5))),
    Case("complex64-zstd", "complex64", (5, 4), (2, 3), (LITTLE, ZSTD(3))),
    Case("complex128-big-crc32c", "complex128", (5, 4), (2, 3), (BIG, CRC)),
    Case("string-zstd", "string", (5, 4), (2, 3), (VLEN, ZSTD(3))),
    # -- endianness -------------------------------------------------------------------
    Case("int32-big-1d", "int32", (9,), (4,), (BIG,)),
    Case("float32-big-zstd-checksum", "float32", (6, 5), (4, 2), (BIG, ZSTD(2, True))),
    Case("int16-big-shuffle", "int16", (7,), (3,), (BIG, SHUFFLE(2), ZSTD(1))),
    # -- transpose (non-involutive orders) ------------------------------------------------
    Case("transpose-120-int32-3d", "int32", (5, 3, 4), (2, 3, 4), (TRANSPOSE(1, 2, 0), LITTLE, ZSTD(3))),
    Case("transpose-201-float64-big-3d", "float64", (4, 5, 3), (3, 2, 3), (TRANSPOSE(2, 0, 1), BIG, GZIP(4))),
    # -- compressors and checksums ---------------------------------------------------------
    Case("gzip1-float64", "float64", (8, 3), (3, 3), (LITTLE, GZIP(1))),
    Case("zstd-neg-level-int16", "int16", (8, 3), (3, 2), (LITTLE, ZSTD(-1))),
    Case("zstd19-checksum-float32", "float32", (8, 3), (4, 3), (LITTLE, ZSTD(19, True))),
    Case("shuffle8-float64-zstd", "float64", (10,), (4,), (LITTLE, SHUFFLE(8), ZSTD(3))),
    Case("crc32c-uint8", "uint8", (10,), (3,), (LITTLE, CRC)),
    Case("gzip-crc32c-int64", "int64", (6, 6), (4, 4), (LITTLE, GZIP(6), CRC)),
    # -- sharding ---------------------------------------------------------------------------
    Case("shard2d-end-edge-int32", "int32", (7, 5), (2, 2), (LITTLE, ZSTD(3)), shards=(4, 4)),
    Case("shard2d-start-edge-float32", "float32", (7, 5), (2, 2), (LITTLE, GZIP(5), CRC),
         shards=(4, 4), index_location="start"),
    Case("shard1d-end-edge-uint16", "uint16", (10,), (2,), (LITTLE,), shards=(4,)),
    Case("shard1d-start-edge-int64", "int64", (11,), (3,), (LITTLE, ZSTD(1, True)),
         shards=(6,), index_location="start"),
    Case("shard1d-start-string", "string", (9,), (2,), (VLEN, ZSTD(3)), shards=(4,), index_location="start"),
    Case("shard2d-end-shuffle-uint32", "uint32", (6, 6), (2, 3), (LITTLE, SHUFFLE(4), ZSTD(3)), shards=(4, 6)),
    Case("shard2d-big-complex128", "complex128", (5, 4), (2, 2), (BIG, CRC), shards=(4, 4)),
    Case("shard3d-transpose-inner-uint16", "uint16", (6, 4, 5), (2, 4, 2),
         (TRANSPOSE(2, 0, 1), LITTLE, ZSTD(3)), shards=(4, 4, 4), index_location="start"),
    Case("shard2d-missing-inner-nan-float64", "float64", (7, 6), (2, 2), (LITTLE, ZSTD(3)),
         shards=(4, 4), fill=float("nan"), write="partial", absent_keys=("c/1/0",)),
    Case("shard-nested-end", "uint16", (10, 7), (4, 4),
         (SHARD((2, 2), [LITTLE]),), shards=(8, 8), write="partial"),
    Case("shard-nested-start-zstd", "int32", (8, 8), (4, 4),
         (SHARD((2, 2), [LITTLE, ZSTD(3)], "start"),), shards=(8, 8), index_location="start"),
    Case("shard0d-int16", "int16", (), (), (LITTLE,), shards=(), expect_keys=("c",)),
    Case("shard-one-inner-larger-than-array", "int32", (3, 2), (8, 8), (LITTLE, CRC), shards=(8, 8),
         index_location="start", fortran=True),
    # -- missing chunks and fill values ------------------------------------------------------
    Case("missing-nan-float32", "float32", (7, 5), (2, 3), (LITTLE, ZSTD(3)), fill=float("nan"),
         write="partial", absent_keys=("c/2/0", "c/2/1", "c/3/0")),
    Case("missing-nan-float16-gzip", "float16", (9,), (2,), (LITTLE, GZIP(5)), fill=float("nan"),
         write="partial", absent_keys=("c/3",)),
    Case("fill-negzero-float64", "float64", (7, 5), (2, 3), (LITTLE, ZSTD(3)), fill=-0.0, write="partial"),
    Case("fill-negzero-float32-big", "float32", (6,), (2,), (BIG,), fill=-0.0, write="partial"),
    Case("fill-inf-float32", "float32", (7, 5), (2, 3), (LITTLE, CRC), fill=float("inf"), write="partial"),
    Case("fill-neginf-float16", "float16", (9,), (4,), (LITTLE,), fill=float("-inf"), write="partial"),
    Case("fill-int64-min", "int64", (7, 5), (2, 3), (LITTLE, ZSTD(3)), fill=int(I8.min), write="partial"),
    Case("fill-int64-max-big", "int64", (9,), (4,), (BIG,), fill=int(I8.max), write="partial"),
    Case("fill-uint64-max", "uint64", (7, 5), (2, 3), (LITTLE, GZIP(5)), fill=int(U8.max), write="partial"),
    Case("fill-int8-min", "int8", (9,), (4,), (LITTLE,), fill=-128, write="partial"),
    Case("fill-uint32-max", "uint32", (9,), (4,), (LITTLE,), fill=2**32 - 1, write="partial"),
    Case("fill-true-bool", "bool", (7, 5), (2, 3), (LITTLE,), fill=True, write="partial"),
    Case("fill-complex64", "complex64", (9,), (4,), (LITTLE, ZSTD(3)), fill=complex(1.5, -2.0), write="partial"),
    Case("fill-complex128-nan-neginf", "complex128", (7, 5), (2, 3), (BIG,), fill=complex(float("nan"), float("-inf")),
         write="partial"),
    Case("fill-float32-nan-payload", "float32", (9,), (4,), (LITTLE,),
         fill=np.frombuffer(bytes.fromhex("0100c07f"), "<f4")[0], write="partial"),
    Case("fill-float16-subnormal", "float16", (9,), (4,), (LITTLE, GZIP(5)), fill=np.float16(6e-8), write="partial"),
    # -- strings ------------------------------------------------------------------------------
    Case("string-unicode-gzip-edge", "string", (7, 3), (2, 2), (VLEN, GZIP(5))),
    Case("string-fortran-order-write", "string", (4, 3), (4, 3), (VLEN,), fortran=True),
    Case("string-fill-partial", "string", (9,), (2,), (VLEN,), fill="∅ fill", write="partial",
         absent_keys=("c/3",)),
    # -- chunk key encodings --------------------------------------------------------------------
    Case("keys-default-dot", "int32", (5, 4), (2, 3), (LITTLE,),
         key_encoding={"name": "default", "configuration": {"separator": "."}},
         expect_keys=("c.0.0", "c.2.1")),
    Case("keys-v2-dot", "float32", (5, 4), (2, 3), (LITTLE, ZSTD(3)),
         key_encoding={"name": "v2", "configuration": {"separator": "."}},
         expect_keys=("0.0", "2.1")),
    Case("keys-v2-slash", "uint16", (5, 4), (2, 3), (LITTLE,),
         key_encoding={"name": "v2", "configuration": {"separator": "/"}},
         expect_keys=("0/0", "2/1")),
    Case("keys-v2-dot-sharded", "int16", (7, 5), (2, 2), (LITTLE,), shards=(4, 4),
         key_encoding={"name": "v2", "configuration": {"separator": "."}},
         expect_keys=("0.0", "1.1")),
    Case("keys-v2-0d", "float64", (), (), (LITTLE,),
         key_encoding={"name": "v2", "configuration": {"separator": "."}}, expect_keys=("0",)),
    # -- 0-d and zero-length ---------------------------------------------------------------------
    Case("zerod-float64-zstd", "float64", (), (), (LITTLE, ZSTD(3)), expect_keys=("c",)),
    Case("zerod-string", "string", (), (), (VLEN,)),
    Case("zerod-complex128-big", "complex128", (), (), (BIG, CRC)),
    Case("zerolen-1d-int32", "int32", (0,), (4,), (LITTLE,)),
    Case("zerolen-2d-float32", "float32", (3, 0), (2, 2), (LITTLE, ZSTD(3))),
    Case("zerolen-sharded", "uint8", (0, 4), (2, 2), (LITTLE,), shards=(4, 4)),
    # -- dimension names and attributes ------------------------------------------------------
    Case("dimnames-attrs-2d", "float32", (5, 4), (2, 3), (LITTLE, ZSTD(3)),
         dimension_names=("time", "space"), attributes=NESTED_ATTRS),
    Case("dimnames-partial-null-3d", "int8", (3, 2, 4), (2, 2, 2), (LITTLE,),
         dimension_names=("x", None, "z"), attributes={"a": None, "b": [None, {"c": None}]}),
    Case("dimnames-sharded-attrs", "uint16", (7,), (2,), (LITTLE, ZSTD(3)), shards=(4,),
         dimension_names=("t",), attributes={"units": "m", "scale": [0.5, 1e-300, -1e300]}),
]

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS)
BY_ID = {c.id: c for c in CASES}

# tensorstore 0.1.86 lacks numcodecs.shuffle and the string data type.
TS_CASES = [
    "bool-gzip", "uint16-big-zstd", "uint64-big", "float16-zstd", "float64-big-gzip",
    "complex128-big-crc32c", "int16-zstd-checksum", "transpose-120-int32-3d",
    "shard2d-end-edge-int32", "shard2d-start-edge-float32", "shard1d-start-edge-int64",
    "shard2d-missing-inner-nan-float64", "shard-nested-end", "shard0d-int16",
    "fill-negzero-float64", "fill-uint64-max", "keys-default-dot", "keys-v2-dot",
    "zerod-float64-zstd", "zerod-complex128-big", "zerolen-2d-float32",
]


def _params(ids: Sequence[str], which: str) -> List[Any]:
    out = []
    for cid in ids:
        case = BY_ID[cid]
        reason = case.xfail_a if which == "a" else case.xfail_b if which == "b" else None
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(case, id=cid, marks=marks))
    return out


# ---------------------------------------------------------------------------
# data, writes and comparisons
# ---------------------------------------------------------------------------
STRINGS = ["", "héllo", "日本", "🧪🐍", "a", "plain ascii", "e\u0301", "Straße", "👩‍🔬"]


def np_dtype(name: str) -> np.dtype:
    return np.dtype(object) if name == "string" else np.dtype(name)


def default_fill(case: Case) -> Any:
    if case.fill is not _DEFAULT:
        return case.fill
    return {"string": "", "bool": False}.get(case.dtype, 0)


def make_data(case: Case) -> np.ndarray:
    """Deterministic data for the whole array (extremes / specials first)."""
    shape, n = case.shape, prod(case.shape)
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    dt = np_dtype(case.dtype)
    if case.dtype == "string":
        flat = np.array([STRINGS[(i * 5 + 1) % len(STRINGS)] for i in range(n)], dtype=object)
        if n == 1:
            flat[0] = "日本 🧪 héllo"
    elif dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
        if n == 1:
            flat[0] = True
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(int(info.min), int(info.max), n, dtype=dt, endpoint=True)
        specials = [info.min, info.max, 0, 1][: n if n < 4 else 4]
        flat[: len(specials)] = specials
        if n == 1:
            flat[0] = info.max
    elif dt.kind == "f":
        flat = (rng.standard_normal(n) * 1000).astype(dt)
        if n >= 8:
            flat[:5] = [-0.0, np.inf, -np.inf, np.nan, 0.0]
        elif n == 1:
            flat[0] = -1.25
    else:  # complex
        part = np.dtype(f"f{dt.itemsize // 2}")
        flat = np.empty(n, dt)
        flat.real = (rng.standard_normal(n) * 100).astype(part)
        flat.imag = (rng.standard_normal(n) * 100).astype(part)
        if n >= 8:
            flat[:3] = [complex(-0.0, 0.0), complex(np.inf, -np.inf), complex(np.nan, 1.0)]
        elif n == 1:
            flat[0] = complex(3.5, -0.0)
    return flat.reshape(shape)


def partial_selections(shape: Tuple[int, ...]) -> List[Tuple[Any, ...]]:
    """First ~half along axis 0, plus the very last element: leaves whole chunks missing."""
    if not shape or 0 in shape:
        return [tuple(slice(None) for _ in shape)]
    head = (slice(0, max(1, (shape[0] + 1) // 2 - 1)),) + tuple(slice(None) for _ in shape[1:])
    last = tuple(s - 1 for s in shape)
    return [head, last]


def write_case(arr: Any, case: Case) -> np.ndarray:
    """Write ``case``'s data through ``arr`` (ours or zarr-python's); return the expected array."""
    data = make_data(case)
    if case.write == "full":
        arr[...] = np.asfortranarray(data) if case.fortran else data
        return data
    expected = np.empty(case.shape, dtype=np_dtype(case.dtype))
    expected[...] = default_fill(case)
    for sel in partial_selections(case.shape):
        arr[sel] = data[sel]
        expected[sel] = data[sel]
    return expected


def as_values(value: Any, dtype: str) -> np.ndarray:
    """A result (ours, zarr-python's StringDType, tensorstore's) as a comparable ndarray."""
    out = np.asarray(value)
    if dtype == "string":
        return np.asarray(out.astype(object), dtype=object)
    return out


def assert_same(actual: Any, expected: Any, dtype: str, what: str = "") -> None:
    act = as_values(actual, dtype)
    exp = as_values(expected, dtype)
    assert act.shape == exp.shape, f"{what}: shape {act.shape} != {exp.shape}"
    if dtype == "string":
        assert all(isinstance(v, str) for v in act.ravel().tolist()), what
        assert act.tolist() == exp.tolist(), what
        return
    assert act.dtype.kind == exp.dtype.kind and act.dtype.itemsize == exp.dtype.itemsize, (
        f"{what}: dtype {act.dtype} != {exp.dtype}")
    np.testing.assert_array_equal(act, exp, err_msg=what)  # NaN == NaN here
    if exp.dtype.kind in "fc":  # also the sign of zeros (and of infinities)
        parts = (lambda a: (a.real, a.imag)) if exp.dtype.kind == "c" else (lambda a: (a,))
        for pa, pe in zip(parts(act), parts(exp)):
            mask = ~np.isnan(pe)
            np.testing.assert_array_equal(np.signbit(pa[mask]), np.signbit(pe[mask]), err_msg=f"{what}: signbit")


def probe_selections(case: Case) -> List[Tuple[Any, ...]]:
    """Sub-selections compared besides the whole array: one inner chunk, strided, last index."""
    if not case.shape:
        return [()]
    if 0 in case.shape:
        return [tuple(slice(0, min(1, s)) for s in case.shape)]
    sels = [tuple(slice(0, c) for c in case.chunks)]  # exactly the first (inner) chunk
    sels.append(tuple(slice(1, None, 2) for _ in case.shape))
    sels.append((case.shape[0] - 1,) + tuple(slice(None) for _ in case.shape[1:]))
    if case.shards:  # straddling an inner-chunk and a shard boundary
        sels.append(tuple(slice(max(0, c - 1), min(s, sh + 1)) for c, s, sh in
                          zip(case.chunks, case.shape, case.shards)))
    return sels


# ---------------------------------------------------------------------------
# building arrays on either side
# ---------------------------------------------------------------------------
def our_create(group: Any, case: Case, name: Optional[str] = None) -> Any:
    kwargs: Dict[str, Any] = {}
    if case.fill is not _DEFAULT:
        kwargs["fill_value"] = case.fill
    return group.create_array(
        name or case.name, shape=case.shape, dtype=case.dtype, chunks=case.chunks, shards=case.shards,
        codecs=[dict(c) for c in case.codecs], attributes=case.attributes,
        dimension_names=case.dimension_names, chunk_key_encoding=case.key_encoding,
        shard_index_location=case.index_location, **kwargs,
    )


def zp_codec(zarr: Any, spec: Dict[str, Any]) -> Any:
    """zarr-python codec object for one zarr.json codec object."""
    c = zarr.codecs
    name, conf = spec["name"], spec.get("configuration", {})
    if name == "bytes":
        return c.BytesCodec(endian=conf.get("endian", "little"))
    if name == "transpose":
        return c.TransposeCodec(order=tuple(conf["order"]))
    if name == "gzip":
        return c.GzipCodec(level=conf.get("level", 5))
    if name == "zstd":
        return c.ZstdCodec(level=conf.get("level", 0), checksum=conf.get("checksum", False))
    if name == "crc32c":
        return c.Crc32cCodec()
    if name == "vlen-utf8":
        return c.VLenUTF8Codec()
    if name == "numcodecs.shuffle":
        shuffle = _shuffle_class()
        if shuffle is None:
            pytest.skip("this zarr-python has no numcodecs.shuffle codec class")
        return shuffle(elementsize=conf["elementsize"])
    if name == "sharding_indexed":
        return c.ShardingCodec(
            chunk_shape=tuple(conf["chunk_shape"]),
            codecs=[zp_codec(zarr, x) for x in conf["codecs"]],
            index_location=conf.get("index_location", "end"),
        )
    raise AssertionError(f"no zarr-python mapping for codec {name}")


_ARRAY_BYTES = {"bytes", "vlen-utf8", "sharding_indexed"}


def zp_create(zarr: Any, store: Any, case: Case, name: Optional[str] = None) -> Any:
    """The same configuration created by zarr-python's ``create_array``."""
    codecs = [dict(c) for c in case.codecs]
    k = next(i for i, c in enumerate(codecs) if c["name"] in _ARRAY_BYTES)
    kwargs: Dict[str, Any] = dict(
        store=store, name=name or case.name, shape=case.shape,
        dtype=str if case.dtype == "string" else np.dtype(case.dtype), chunks=case.chunks,
        filters=[zp_codec(zarr, c) for c in codecs[:k]] or None,
        serializer=zp_codec(zarr, codecs[k]),
        compressors=[zp_codec(zarr, c) for c in codecs[k + 1:]] or None,
        attributes=case.attributes, dimension_names=case.dimension_names,
    )
    if case.shards is not None:
        kwargs["shards"] = {"shape": case.shards, "index_location": case.index_location}
    if case.fill is not _DEFAULT:
        kwargs["fill_value"] = case.fill
    if case.key_encoding is not None:
        kwargs["chunk_key_encoding"] = {"name": case.key_encoding["name"], **case.key_encoding["configuration"]}
    return zarr.create_array(**kwargs)


def normalize_codecs(codecs: Sequence[Any]) -> List[Dict[str, Any]]:
    """Codec JSON with defaults spelled out, so two writers' pipelines compare equal."""
    out = []
    for codec in json.loads(json.dumps(list(codecs))):  # tuples -> lists
        name, conf = codec["name"], codec.get("configuration") or {}
        if name == "bytes":
            conf = {"endian": conf.get("endian") or "little"}
        elif name == "sharding_indexed":
            conf = {"chunk_shape": conf["chunk_shape"], "codecs": normalize_codecs(conf["codecs"]),
                    "index_codecs": normalize_codecs(conf.get("index_codecs", [LITTLE, CRC])),
                    "index_location": conf.get("index_location", "end")}
        out.append({"name": name, "configuration": conf})
    return out


def expected_codecs(case: Case) -> List[Dict[str, Any]]:
    inner = [dict(c) for c in case.codecs]
    return normalize_codecs(inner if case.shards is None else [SHARD(case.chunks, inner, case.index_location)])


def stored_codecs(array_dir: Path) -> List[Dict[str, Any]]:
    return normalize_codecs(json.loads((array_dir / "zarr.json").read_bytes())["codecs"])


def check_keys(array_dir: Path, case: Case) -> None:
    for key in case.expect_keys:
        assert (array_dir / key).is_file(), f"chunk key {key!r} missing in {sorted(p.name for p in array_dir.iterdir())}"
    for key in case.absent_keys:
        assert not (array_dir / key).exists(), f"chunk key {key!r} should not have been stored"


def check_fill(actual: Any, case: Case, what: str) -> None:
    assert_same(np.asarray(actual, dtype=np_dtype(case.dtype)),
                np.asarray(default_fill(case), dtype=np_dtype(case.dtype)), case.dtype, what)


# ---------------------------------------------------------------------------
# direction A: molrec_raw writes, zarr-python reads
# ---------------------------------------------------------------------------
def _assert_zp_reads(za: Any, case: Case, expected: np.ndarray) -> None:
    assert za.shape == case.shape
    assert za.metadata.to_dict()["data_type"] == case.dtype
    if case.shards is None:
        assert za.chunks == case.chunks and za.shards is None
    else:
        assert za.shards == case.shards and za.chunks == case.chunks
    check_fill(za.fill_value, case, "zarr-python fill_value")
    assert za.attrs.asdict() == (case.attributes or {})
    expected_names = tuple(case.dimension_names) if case.dimension_names is not None else None
    assert za.metadata.dimension_names == expected_names
    assert_same(za[...], expected, case.dtype, "zarr-python full read")
    for sel in probe_selections(case):
        assert_same(za[sel], expected[sel], case.dtype, f"zarr-python read of {sel}")


@pytest.mark.parametrize("case", _params(CASE_IDS, "a"))
def test_we_write_zarr_python_reads(zp, tmp_path, case):
    root = tmp_path / "ours.zarr"
    group = mz.open_group(root, mode="w", attributes={"origin": "molrec_raw"})
    arr = our_create(group, case)
    expected = write_case(arr, case)
    assert_same(arr[...], expected, case.dtype, "our own read-back")
    check_keys(root / case.name, case)

    assert stored_codecs(root / case.name) == expected_codecs(case)

    za = zp.open_array(store=str(root), path=case.name, mode="r")
    assert normalize_codecs(za.metadata.to_dict()["codecs"]) == expected_codecs(case)
    _assert_zp_reads(za, case, expected)
    zg = zp.open_group(store=str(root), mode="r")
    assert zg.attrs.asdict() == {"origin": "molrec_raw"}
    assert_same(zg[case.name][...], expected, case.dtype, "zarr-python read via group")


# ---------------------------------------------------------------------------
# direction B: zarr-python writes, molrec_raw reads
# ---------------------------------------------------------------------------
def _assert_we_read(arr: Any, case: Case, expected: np.ndarray) -> None:
    assert arr.shape == case.shape
    assert arr.metadata.dtype.name == case.dtype
    assert arr.chunks == case.chunks
    assert arr.shards == case.shards
    check_fill(arr.fill_value, case, "our fill_value")
    assert arr.attrs.asdict() == (case.attributes or {})
    expected_names = tuple(case.dimension_names) if case.dimension_names is not None else None
    assert arr.metadata.dimension_names == expected_names
    assert_same(arr[...], expected, case.dtype, "our full read")
    for sel in probe_selections(case):
        assert_same(arr[sel], expected[sel], case.dtype, f"our read of {sel}")


@pytest.mark.parametrize("case", _params(CASE_IDS, "b"))
def test_zarr_python_writes_we_read(zp, tmp_path, case):
    root = tmp_path / "theirs.zarr"
    zg = zp.open_group(store=str(root), mode="w", attributes={"origin": "zarr-python"})
    za = zp_create(zp, zg.store, case)
    expected = write_case(za, case)
    check_keys(root / case.name, case)
    assert stored_codecs(root / case.name) == expected_codecs(case), "zarr-python wrote another pipeline"

    arr = mz.open_array(root, path=case.name)
    assert normalize_codecs(arr.metadata.to_dict()["codecs"]) == expected_codecs(case)
    _assert_we_read(arr, case, expected)
    group = mz.open_group(root)
    assert group.attrs.asdict() == {"origin": "zarr-python"}
    assert list(group) == [case.name]
    assert_same(group[case.name][...], expected, case.dtype, "our read via group")


def test_matrix_size():
    """At least 40 configurations, each run in both directions."""
    assert len(CASES) >= 40
    dtypes = {c.dtype for c in CASES}
    assert dtypes == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                      "float16", "float32", "float64", "complex64", "complex128", "string"}


# ---------------------------------------------------------------------------
# zip archives
# ---------------------------------------------------------------------------
ZIP_CASES = [
    "string-zstd", "uint16-big-zstd", "shard2d-start-edge-float32", "shard-nested-end",
    "missing-nan-float32", "zerod-float64-zstd", "keys-v2-dot", "dimnames-attrs-2d",
    "transpose-120-int32-3d", "int64-shuffle-zstd",
]


def _zip_directory(root: Path, target: Path) -> None:
    """Pack a directory store: STORED entries named by store key, sorted, no directories."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(p.relative_to(root).as_posix() for p in files):
            zf.write(root / name, arcname=name)


def test_zip_we_write_zarr_python_reads(zp, tmp_path):
    root = tmp_path / "ours.zarr"
    group = mz.open_group(root, mode="w", attributes=NESTED_ATTRS)
    sub = group.create_group("sub", attributes={"level": 1})
    expected = {}
    for i, cid in enumerate(ZIP_CASES):
        case = BY_ID[cid]
        parent = sub if i % 2 else group
        expected[(parent is sub, cid)] = write_case(our_create(parent, case, name=cid), case)
    archive = tmp_path / "ours.zip"
    _zip_directory(root, archive)

    store = zp.storage.ZipStore(archive, mode="r")
    try:
        zg = zp.open_group(store=store, mode="r")
        assert zg.attrs.asdict() == NESTED_ATTRS
        assert zg["sub"].attrs.asdict() == {"level": 1}
        assert sorted(zg.group_keys()) == ["sub"]
        for (in_sub, cid), exp in expected.items():
            case = BY_ID[cid]
            za = (zg["sub"] if in_sub else zg)[cid]
            _assert_zp_reads(za, case, exp)
    finally:
        store.close()
    # and we read our own zip too
    ours = mz.open_group(archive)
    assert ours.attrs.asdict() == NESTED_ATTRS
    for (in_sub, cid), exp in expected.items():
        assert_same((ours["sub"] if in_sub else ours)[cid][...], exp, BY_ID[cid].dtype, f"our zip read {cid}")


def test_zip_zarr_python_writes_we_read(zp, tmp_path):
    archive = tmp_path / "theirs.zip"
    store = zp.storage.ZipStore(archive, mode="w")
    expected = {}
    try:
        zg = zp.open_group(store=store, mode="w", attributes=NESTED_ATTRS)
        zsub = zg.create_group("sub", attributes={"level": 1})
        for i, cid in enumerate(ZIP_CASES):
            case = BY_ID[cid]
            parent = zsub if i % 2 else zg
            path = f"sub/{cid}" if i % 2 else cid
            za = zp_create(zp, store, case, name=path)
            expected[(parent is zsub, cid)] = write_case(za, case)
    finally:
        store.close()
    with zipfile.ZipFile(archive) as zf:
        assert all(info.compress_type == zipfile.ZIP_STORED for info in zf.infolist())

    for opener in (lambda: mz.open_group(archive), lambda: mz.open_group(mz.ZipStore(archive))):
        group = opener()
        assert isinstance(group.store, mz.ZipStore)
        assert group.attrs.asdict() == NESTED_ATTRS
        assert group["sub"].attrs.asdict() == {"level": 1}
        for (in_sub, cid), exp in expected.items():
            arr = (group["sub"] if in_sub else group)[cid]
            _assert_we_read(arr, BY_ID[cid], exp)
        group.store.close()
    arr = mz.open_array(archive, path="sub/uint16-big-zstd")
    assert_same(arr[...], expected[(True, "uint16-big-zstd")], "uint16", "open_array on a zip path")


# ---------------------------------------------------------------------------
# byte-exact shard vectors (zarr-v3-subset §7)
# ---------------------------------------------------------------------------
SHARD_VECTORS = {
    "end": bytes.fromhex(
        "0100020003000400"
        "0000000000000000" "0400000000000000" "0400000000000000" "0400000000000000"
        "f6ff6f8f"),
    "start": bytes.fromhex(
        "2400000000000000" "0400000000000000" "2800000000000000" "0400000000000000" "df3706b7"
        "0100020003000400"),
}


@pytest.mark.parametrize("location", ["end", "start"])
def test_shard_bytes_match_zarr_python(zp, tmp_path, location):
    data = np.array([1, 2, 3, 4], dtype=np.uint16)
    group = mz.open_group(tmp_path / "ours.zarr", mode="w")
    arr = group.create_array("a", shape=[4], dtype="uint16", chunks=[2], shards=[4],
                             codecs=[LITTLE], fill_value=0, shard_index_location=location)
    arr[...] = data
    codecs = arr.metadata.to_dict()["codecs"]
    assert codecs == [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2], "codecs": [LITTLE], "index_codecs": [LITTLE, CRC], "index_location": location}}]
    ours = (tmp_path / "ours.zarr" / "a" / "c" / "0").read_bytes()
    assert ours == SHARD_VECTORS[location]

    za = zp.create_array(store=str(tmp_path / "theirs.zarr"), name="a", shape=(4,), dtype="uint16",
                         chunks=(2,), shards={"shape": (4,), "index_location": location},
                         filters=None, serializer=zp.codecs.BytesCodec(endian="little"),
                         compressors=None, fill_value=0)
    za[...] = data
    theirs = (tmp_path / "theirs.zarr" / "a" / "c" / "0").read_bytes()
    assert theirs == SHARD_VECTORS[location]
    # zarr-python reads our inner chunks one by one, and we read theirs
    zours = zp.open_array(store=str(tmp_path / "ours.zarr"), path="a", mode="r")
    for sel in (slice(0, 2), slice(2, 4), slice(1, 3), slice(3, 4)):
        np.testing.assert_array_equal(zours[sel], data[sel])
        np.testing.assert_array_equal(mz.open_array(tmp_path / "theirs.zarr", path="a")[sel], data[sel])


def test_morton_ordered_shard_is_read(zp, tmp_path):
    """zarr-python's default sub-chunk order is Morton; the index, not the layout, must rule."""
    data = np.arange(1, 17, dtype=np.uint8).reshape(4, 4)  # no inner chunk equals the fill value
    za = zp.create_array(store=str(tmp_path / "m.zarr"), name="a", shape=(4, 4), dtype="uint8",
                         chunks=(1, 1), shards=(4, 4), filters=None, compressors=None,
                         serializer=zp.codecs.BytesCodec())
    za[...] = data
    raw = (tmp_path / "m.zarr" / "a" / "c" / "0" / "0").read_bytes()
    assert list(raw[:6]) == [1, 5, 2, 6, 9, 13], "zarr-python no longer writes Morton order?"
    arr = mz.open_array(tmp_path / "m.zarr", path="a")
    np.testing.assert_array_equal(arr[...], data)
    for i in range(4):
        for j in range(4):
            assert arr[i, j] == data[i, j]


# ---------------------------------------------------------------------------
# tensorstore reads our arrays
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", _params(TS_CASES, "ts"))
def test_tensorstore_reads_ours(ts, tmp_path, case):
    assert case.dtype != "string" and not case.uses_shuffle
    root = tmp_path / "ours.zarr"
    arr = our_create(mz.open_group(root, mode="w"), case)
    expected = write_case(arr, case)
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / case.name)}},
                    read=True).result()
    assert tuple(store.shape) == case.shape
    assert_same(store.read().result(), expected, case.dtype, "tensorstore full read")
    for sel in probe_selections(case):
        assert_same(store[sel].read().result(), expected[sel], case.dtype, f"tensorstore read of {sel}")


# ---------------------------------------------------------------------------
# zarr-python's defaults, and read-modify-write across implementations
# ---------------------------------------------------------------------------
ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128", "string"]


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zarr_python_defaults_we_read_and_rewrite(zp, tmp_path, dtype, sharded):
    """zarr-python's default pipeline (``{"name": "bytes"}`` without configuration for 1-byte
    types, zstd level 0, Morton shards); then we write into its chunks / shards and
    zarr-python must read the result."""
    case = Case(f"defaults-{dtype}", dtype, (7, 5), (2, 2), ())
    data = make_data(case)
    root = str(tmp_path / "d.zarr")
    za = zp.create_array(store=root, name="a", shape=case.shape, dtype=str if dtype == "string" else dtype,
                         chunks=(2, 2), shards=(4, 4) if sharded else None)
    za[...] = data
    arr = mz.open_array(root, path="a")
    assert_same(arr[...], data, dtype, "our read of zarr-python defaults")
    assert_same(arr[1:6:2, 3], data[1:6:2, 3], dtype, "our strided read")

    ours = mz.open_array(root, path="a", mode="r+")
    ours[1:4, 2:5] = data[3:6, 0:3]
    ours[6, 4] = data[0, 0]
    expected = data.copy()
    expected[1:4, 2:5] = data[3:6, 0:3]
    expected[6, 4] = data[0, 0]
    assert_same(zp.open_array(store=root, path="a", mode="r")[...], expected, dtype, "zarr-python after our RMW")


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
def test_append_and_resize_zarr_python_reads(zp, tmp_path, sharded):
    root = tmp_path / "ours.zarr"
    group = mz.open_group(root, mode="w")
    arr = group.create_array("a", shape=[3, 2], dtype="float32", chunks=[2, 2], shards=[4, 4] if sharded else None,
                             codecs=[BIG, ZSTD(3)], fill_value=float("nan"))
    arr[...] = np.arange(6, dtype=np.float32).reshape(3, 2)
    arr.append(np.arange(10, 20, dtype=np.float32).reshape(5, 2))
    arr.append(np.full((8, 3), 7, dtype=np.float32), axis=1)
    expected = np.concatenate([np.concatenate([np.arange(6).reshape(3, 2), np.arange(10, 20).reshape(5, 2)]),
                               np.full((8, 3), 7)], axis=1).astype(np.float32)
    za = zp.open_array(store=str(root), path="a", mode="r")
    assert za.shape == (8, 5)
    assert_same(za[...], expected, "float32", "zarr-python after append")

    arr.resize([3, 4])   # shrink: cut-off parts of edge chunks must be reset to fill
    arr.resize([6, 6])   # grow again: nothing stale may reappear
    expected2 = np.full((6, 6), np.nan, dtype=np.float32)
    expected2[:3, :4] = expected[:3, :4]
    assert_same(zp.open_array(store=str(root), path="a", mode="r")[...], expected2, "float32", "zarr-python after resize")
    assert_same(arr[...], expected2, "float32", "our read after resize")


def test_zarr_python_resize_we_read(zp, tmp_path):
    root = str(tmp_path / "z.zarr")
    za = zp.create_array(store=root, name="a", shape=(5, 3), dtype="int16", chunks=(2, 2), fill_value=-1)
    za[...] = np.arange(15, dtype=np.int16).reshape(5, 3)
    za.resize((7, 4))
    za[6, 3] = 99
    assert_same(mz.open_array(root, path="a")[...], za[...], "int16", "our read after zarr-python resize")


def test_zarr_python_non_finite_attributes_we_read(zp, tmp_path):
    """zarr-python writes bare NaN / Infinity tokens in attributes (zarr-v3-subset §11.1)."""
    root = str(tmp_path / "z.zarr")
    zp.create_array(store=root, name="a", shape=(2,), dtype="int8",
                    attributes={"nan": float("nan"), "inf": [float("inf"), -float("inf")], "ok": 1.5})
    attrs = mz.open_array(root, path="a").attrs.asdict()
    assert np.isnan(attrs["nan"]) and attrs["inf"] == [np.inf, -np.inf] and attrs["ok"] == 1.5


@pytest.mark.parametrize("value", [np.float32("nan"), np.float16("inf"), np.array([1.0, np.nan])],
                         ids=["float32-nan", "float16-inf", "ndarray-nan"])
def test_numpy_non_finite_attribute_is_not_silently_nulled(zp, tmp_path, value):
    root = tmp_path / "ours.zarr"
    group = mz.open_group(root, mode="w")
    try:
        group.create_array("a", shape=[2], dtype="int8", attributes={"x": value})
    except InvalidMetadataError:
        return  # refusing, as for a Python float NaN, is the documented behaviour (jsonio.dumps)
    seen = zp.open_array(store=str(root), path="a", mode="r").attrs["x"]
    expected = np.asarray(value, dtype=np.float64)
    assert seen is not None and None not in np.ravel(np.asarray(seen, dtype=object)).tolist(), (
        f"{value!r} was written as {seen!r}")
    np.testing.assert_array_equal(np.asarray(seen, dtype=np.float64), expected)


def test_child_added_to_consolidated_group_is_visible_to_zarr_python(zp, tmp_path):
    import warnings

    root = str(tmp_path / "c.zarr")
    zg = zp.open_group(store=root, mode="w")
    zg.create_array("x", shape=(2,), dtype="int8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zp.consolidate_metadata(root)
    ours = mz.open_group(root, mode="r+")
    assert sorted(ours) == ["x"]
    ours.create_array("y", shape=[2], dtype="int8", fill_value=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seen = zp.open_group(store=root, mode="r")
        assert sorted(seen.array_keys()) == ["x", "y"]
        np.testing.assert_array_equal(seen["y"][...], [3, 3])


def test_append_in_consolidated_hierarchy_is_visible_to_zarr_python(zp, tmp_path):
    import warnings

    root = str(tmp_path / "c.zarr")
    zg = zp.open_group(store=root, mode="w")
    zg.create_array("x", shape=(2,), dtype="int8", chunks=(2,))[...] = [1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zp.consolidate_metadata(root)
    mz.open_group(root, mode="r+")["x"].append(np.array([3, 4], dtype="int8"))
    np.testing.assert_array_equal(mz.open_array(root, path="x")[...], [1, 2, 3, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(zp.open_group(store=root, mode="r")["x"][...], [1, 2, 3, 4])


def test_consolidated_group_we_read(zp, tmp_path):
    import warnings

    root = str(tmp_path / "c.zarr")
    zg = zp.open_group(store=root, mode="w", attributes={"a": 1})
    x = zg.create_group("sub").create_array("x", shape=(4,), dtype="int32", chunks=(2,))
    x[...] = [1, 2, 3, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zp.consolidate_metadata(root)
    group = mz.open_group(root)
    assert group.attrs.asdict() == {"a": 1}
    np.testing.assert_array_equal(group["sub"]["x"][...], [1, 2, 3, 4])
