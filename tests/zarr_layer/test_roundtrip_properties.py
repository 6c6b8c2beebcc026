"""Property tests: any dtype x codec chain x chunk/shard geometry round-trips (hypothesis)."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from molrec_raw.zarr import MemoryStore, open_array

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]

COMPRESSORS = st.sampled_from([
    [], [{"name": "gzip", "configuration": {"level": 1}}],
    [{"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
    [{"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
])


@st.composite
def geometry(draw, max_ndim=3):
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    sharded = ndim > 0 and draw(st.booleans())
    inner = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    if sharded:
        factors = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
        return shape, inner, tuple(i * f for i, f in zip(inner, factors))
    return shape, inner, None


@st.composite
def numeric_codecs(draw, dtype, ndim):
    itemsize = np.dtype(dtype).itemsize
    chain = []
    if ndim >= 2 and draw(st.booleans()):
        order = draw(st.permutations(list(range(ndim))))
        chain.append({"name": "transpose", "configuration": {"order": list(order)}})
    chain.append({"name": "bytes", "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}})
    if draw(st.booleans()):
        chain.append({"name": "numcodecs.shuffle", "configuration": {"elementsize": itemsize}})
    chain += draw(COMPRESSORS)
    if draw(st.booleans()):
        chain.append({"name": "crc32c"})
    return chain


def roundtrip(data, chunks, shards, codecs, dtype, fill, nested=False):
    store = MemoryStore()
    if nested and shards is not None:
        codecs = [{"name": "sharding_indexed", "configuration": {"chunk_shape": list(chunks), "codecs": codecs}}]
    a = open_array(store, "a", mode="w", shape=data.shape, dtype=dtype, chunks=chunks, shards=shards,
                   codecs=codecs, fill_value=fill)
    a[...] = data
    back = open_array(store, "a")[...]
    return np.asarray(back)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NUMERIC), geometry(), st.data())
def test_numeric_roundtrip(dtype, geo, data):
    shape, chunks, shards = geo
    values = data.draw(hnp.arrays(np.dtype(dtype).newbyteorder("<"), shape))
    codecs = data.draw(numeric_codecs(dtype, len(shape)))
    nested = shards is not None and data.draw(st.booleans())
    fill = data.draw(st.sampled_from([None, 1]))
    back = roundtrip(values, chunks, shards, codecs, dtype, fill, nested)
    assert back.shape == values.shape
    # compare bit patterns: NaN payloads and -0.0 must survive
    np.testing.assert_array_equal(back.reshape(-1).view(np.uint8), np.ascontiguousarray(values).reshape(-1).view(np.uint8))


@settings(max_examples=60, deadline=None)
@given(geometry(max_ndim=2), st.data())
def test_string_roundtrip(geo, data):
    shape, chunks, shards = geo
    n = int(np.prod(shape)) if shape else 1
    texts = data.draw(st.lists(st.text(st.characters(blacklist_categories=("Cs",))), min_size=n, max_size=n))
    values = np.array(texts, dtype=object).reshape(shape)
    codecs = [{"name": "vlen-utf8"}] + data.draw(COMPRESSORS)
    back = roundtrip(values, chunks, shards, codecs, str, None)
    assert back.tolist() == values.tolist()


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_partial_writes_match_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=2)))
    chunks = tuple(data.draw(st.integers(1, 5)) for _ in shape)
    sharded = data.draw(st.booleans())
    shards = tuple(c * data.draw(st.integers(1, 3)) for c in chunks) if sharded else None
    store = MemoryStore()
    a = open_array(store, "a", mode="w", shape=shape, dtype="int32", chunks=chunks, shards=shards, fill_value=-1)
    ref = np.full(shape, -1, dtype="int32")
    for _ in range(data.draw(st.integers(1, 4))):
        sel = tuple(slice(data.draw(st.integers(-s, s)), data.draw(st.integers(-s, s)),
                          data.draw(st.sampled_from([1, 2, 3, -1, -2]))) for s in shape)
        value = np.arange(ref[sel].size, dtype="int32").reshape(ref[sel].shape)
        ref[sel] = value
        a[sel] = value
        np.testing.assert_array_equal(a[...], ref)
