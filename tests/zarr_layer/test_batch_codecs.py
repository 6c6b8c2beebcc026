"""The batch codec path (zarr/codecs/batch.py, issue 11): many chunks through each stage at
once must write the bytes chunk-by-chunk encoding writes, decode into any target (strided
columns of an interleaved array too), and refuse bad chunks with the error of the careful
path, naming the chunk (zarr-v3-subset#5, #5.4, #5.5, #7)."""
import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from molrec_raw.errors import ChecksumMismatchError, CorruptDataError
from molrec_raw.zarr import MemoryStore, open_array, open_group
from molrec_raw.zarr.array import prepare_landings, read_many
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline
from molrec_raw.zarr.codecs.batch import DecodeJob, decode_batch, encode_batch, join_item
from molrec_raw.zarr.dtypes import data_type

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float32", "float64", "complex128"]
COMPRESSORS = [[], [{"name": "gzip", "configuration": {"level": 1}}],
               [{"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
               [{"name": "zstd", "configuration": {"level": 1, "checksum": True}}]]


@st.composite
def chains(draw, dtype, ndim):
    chain = []
    if ndim >= 2 and draw(st.booleans()):
        chain.append({"name": "transpose", "configuration": {"order": list(draw(st.permutations(list(range(ndim)))))}})
    chain.append({"name": "bytes", "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}})
    if draw(st.booleans()):
        chain.append({"name": "numcodecs.shuffle", "configuration": {"elementsize": np.dtype(dtype).itemsize}})
    chain += draw(st.sampled_from(COMPRESSORS))
    if draw(st.booleans()):
        chain.append({"name": "crc32c"})
    return chain


def pipeline(chain, dtype, shape):
    return CodecPipeline(chain, ChunkSpec(tuple(shape), data_type(np.dtype(dtype).name), np.zeros((), dtype)[()]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(DTYPES), st.lists(st.integers(1, 6), min_size=1, max_size=3),
       st.integers(1, 7), st.sampled_from([1, 2]), st.sampled_from([1, 64, 1 << 20]), st.booleans())
def test_zarr_5_batch_encoding_writes_the_bytes_of_chunk_by_chunk_encoding(data, dtype, shape, count, threads,
                                                                         wave_bytes, stacked):
    chain = data.draw(chains(dtype, len(shape)))
    pipe = pipeline(chain, dtype, shape)
    chunks = data.draw(hnp.arrays(np.dtype(dtype), (count, *shape)))
    other = pipeline([{"name": "bytes", "configuration": {"endian": "little"}},
                      {"name": "zstd", "configuration": {"level": 3, "checksum": False}}], dtype, shape)
    groups = [(pipe, chunks if stacked else list(chunks)), (other, list(chunks[::-1]))]
    got = encode_batch(groups, threads, wave_bytes)
    assert [bytes(join_item(item)) for item in got[0]] == [bytes(pipe.encode(c)) for c in chunks]
    assert [bytes(join_item(item)) for item in got[1]] == [bytes(other.encode(c)) for c in chunks[::-1]]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(DTYPES), st.integers(1, 40), st.integers(1, 6), st.sampled_from([1, 2]),
       st.sampled_from([1, 200, 1 << 20]))
def test_zarr_5_batch_decoding_fills_strided_and_partial_targets(data, dtype, rows, count, threads, wave_bytes):
    """Every chunk of a batch lands in its target: whole chunks in columns of an interleaved
    array (strided), and partial selections."""
    chain = data.draw(chains(dtype, 1))
    pipe = pipeline(chain, dtype, (rows,))
    chunks = data.draw(hnp.arrays(np.dtype(dtype), (count, rows)))
    out = np.zeros((rows, count + 1), dtype)  # column k receives chunk k
    part = np.zeros((count, max(1, rows // 2)), dtype)
    jobs = [DecodeJob(pipe, pipe.encode(c), out[:, k]) for k, c in enumerate(chunks)]
    jobs += [DecodeJob(pipe, pipe.encode(c), part[k], (slice(0, part.shape[1], 1),)) for k, c in enumerate(chunks)]
    decode_batch(jobs, threads, wave_bytes)
    bits = lambda a: np.ascontiguousarray(a).view(np.uint8)  # noqa: E731
    assert np.array_equal(bits(out[:, :count].T), bits(chunks))
    assert np.array_equal(bits(part), bits(chunks[:, :part.shape[1]]))


def _zstd_pipeline(rows=4096, crc=True):
    chain = [{"name": "bytes", "configuration": {"endian": "little"}},
             {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
             {"name": "zstd", "configuration": {"level": 3, "checksum": False}}]
    return pipeline(chain + ([{"name": "crc32c"}] if crc else []), "float64", (rows,))


@pytest.mark.parametrize("threads", [1, 2])
def test_zarr_5_4_a_bad_frame_in_a_large_batch_fails_with_the_careful_paths_error_naming_its_chunk(threads):
    pipe = _zstd_pipeline(crc=False)
    chunks = np.random.default_rng(1).normal(size=(80, 4096))  # 2.6 MB: the threaded batch call
    encoded = [bytes(pipe.encode(c)) for c in chunks]
    cases = {
        "truncated": encoded[5][:-7],
        "concatenated frames": encoded[5] + encoded[6],
        "trailing garbage": encoded[5] + b"\x00garbage",
        "no content size": zstandard.ZstdCompressor(write_content_size=False).compress(
            bytes(pipe.bytes_codecs[0].encode(pipe.array_bytes.encode(chunks[5])))),
    }
    for name, bad in cases.items():
        out = np.zeros_like(chunks)
        datas = list(encoded)
        datas[5] = bad
        jobs = [DecodeJob(pipe, d, out[k], key=f"c/{k}") for k, d in enumerate(datas)]
        if name == "no content size":  # legal zstd: decoded by the careful path, not refused
            decode_batch(jobs, threads)
            assert np.array_equal(out, chunks)
            continue
        with pytest.raises(CorruptDataError) as caught:
            decode_batch(jobs, threads)
        assert caught.value.key == "c/5" and caught.value.rule == "zarr-v3-subset#5.4", name


def test_zarr_5_5_a_checksum_mismatch_in_a_batch_names_its_chunk():
    pipe = _zstd_pipeline()
    chunks = np.random.default_rng(2).normal(size=(40, 4096))
    datas = [bytearray(pipe.encode(c)) for c in chunks]
    datas[17][10] ^= 0xFF
    out = np.zeros_like(chunks)
    with pytest.raises(ChecksumMismatchError) as caught:
        decode_batch([DecodeJob(pipe, bytes(d), out[k], key=f"c/{k}") for k, d in enumerate(datas)], 2)
    assert caught.value.key == "c/17"


def _sharded(store, name, rows=1000, inner=50, shard=250, start=True):
    chain = [{"name": "bytes", "configuration": {"endian": "little"}},
             {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
             {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}]
    return open_array(store, name, mode="w", shape=(rows,), dtype="float64", chunks=(inner,), shards=(shard,),
                      codecs=chain, shard_index_location="start" if start else "end")


def test_zarr_7_read_many_and_read_into_fill_interleaved_columns():
    """Several arrays' selections in one decode batch, straight into the columns of one
    interleaved array; a selection that starts and ends inside inner chunks."""
    store = MemoryStore()
    values = np.random.default_rng(3).normal(size=(3, 1000))
    arrays = [_sharded(store, name) for name in "xyz"]
    for arr, v in zip(arrays, values):
        arr[...] = v
    out = np.zeros((1000, 3))
    read_many([(arr, slice(None), out[:, k]) for k, arr in enumerate(arrays)], threads=2)
    assert np.array_equal(out, values.T)
    part = np.zeros((3, 977 - 13))
    arrays[1].read_into(slice(13, 977), part[1])
    assert np.array_equal(part[1], values[1, 13:977])
    backwards = read_many([(arrays[2], slice(None, None, -3), None)])[0]
    assert np.array_equal(backwards, values[2, ::-3])


def test_zarr_7_landings_encoded_together_write_what_separate_lands_write():
    """prepare_landings (several arrays in one zstd batch) and Array.land leave the same bytes."""
    rng = np.random.default_rng(4)
    chunks = [rng.normal(size=(n, 2)) for n in (30, 70, 125, 400, 17)]
    stores = [MemoryStore(), MemoryStore()]
    for way, store in enumerate(stores):
        group = open_group(store, mode="w")
        arrays = [group.create_array(name, shape=(0, 2), dtype="float64", chunks=(50, 2), shards=(500, 2),
                                     codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                             {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                                             {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
                                             {"name": "crc32c"}], shard_index_location="start")
                  for name in ("a", "b")]
        rows = 0
        for values in chunks:
            stop = rows + values.shape[0]
            if way == 0:
                for arr in arrays:
                    arr.land(slice(rows, stop), values, shape=(stop, 2), positional=True)
            else:
                for landing in prepare_landings([(arr, slice(rows, stop), values, (stop, 2)) for arr in arrays], 2):
                    landing.land()
            for arr in arrays:
                arr.publish((stop, 2))
            rows = stop
    assert stores[0]._values == stores[1]._values
    back = open_group(stores[1])["b"][...]
    assert np.array_equal(back, np.concatenate(chunks))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 600_000), st.sampled_from(["random", "zeros", "walk"]), st.booleans(), st.sampled_from([1, 3, 19]))
def test_zarr_5_4_frame_end_finds_the_end_of_one_whole_frame(size, kind, checksum, level):
    """One frame (raw, RLE and compressed blocks, one or many blocks, with or without its
    checksum) ends where frame_end says; anything after it is seen as more than one frame."""
    from molrec_raw.zarr.codecs.zstd_codec import frame_end

    rng = np.random.default_rng(size)
    raw = {"random": rng.integers(0, 256, size, dtype=np.uint8).tobytes(), "zeros": bytes(size),
           "walk": np.cumsum(rng.integers(-2, 3, size)).astype(np.uint8).tobytes()}[kind]
    frame = zstandard.ZstdCompressor(level=level, write_checksum=checksum).compress(raw)
    assert frame_end(frame) == len(frame)
    assert frame_end(frame + frame) == len(frame)
    assert frame_end(frame[:-1]) in (-1, len(frame))  # a cut checksum is not seen; the size check refuses it
    assert frame_end(b"\x00" * 8) == -1


@pytest.mark.parametrize("chain", [
    [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
     {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}],
    [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
])
def test_zarr_7_a_large_write_on_a_pool_of_runs_writes_the_bytes_of_the_batch_path(tmp_path, chain):
    """From POOL_BYTES on, a write or read with threads codes one run of chunks per thread of
    a Python pool instead of one zstd batch; the stored bytes are those of the batch path
    (threads=1) and each path reads the other's store back exactly."""
    from molrec_raw.zarr.codecs.batch import POOL_BYTES

    n = POOL_BYTES // 8 + 3 * 65536 + 17  # above the threshold, a partial last shard and chunk
    values = np.round(np.cumsum(np.random.default_rng(3).normal(size=n)) * 1024) / 1024
    stores = {}
    for threads in (1, 2):
        path = tmp_path / f"t{threads}"
        arr = open_array(str(path), mode="w", shape=(n,), dtype="float64", chunks=(65536,), shards=(1 << 20,),
                         codecs=chain, fill_value=0.0, threads=threads)
        arr[...] = values
        stores[threads] = {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    assert stores[1] == stores[2] and len(stores[1]) > 3
    for threads in (1, 2):
        assert np.array_equal(open_array(str(tmp_path / f"t{3 - threads}"), threads=threads)[...], values)


def test_zarr_5_one_thread_decodes_chunk_by_chunk_without_the_batch_call(monkeypatch):
    """On one thread a large batch is decoded job by job through the per-thread scratch
    buffers (no zstd batch call, whose fresh output buffer cost more than the call saved);
    on two the batch call still runs.  The values are the same either way."""
    from molrec_raw.zarr.codecs import batch

    pipe = _zstd_pipeline()
    chunks = np.random.default_rng(3).normal(size=(40, 4096))  # 1.3 MB: above the small-wave cut
    encoded = [bytes(pipe.encode(c)) for c in chunks]
    calls = []
    real = batch.decompress_many
    monkeypatch.setattr(batch, "decompress_many", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    for threads, batched in ((1, False), (2, True)):
        calls.clear()
        out = np.zeros_like(chunks)
        decode_batch([DecodeJob(pipe, d, out[k], key=f"c/{k}") for k, d in enumerate(encoded)], threads)
        assert np.array_equal(out, chunks)
        assert bool(calls) == batched, threads
