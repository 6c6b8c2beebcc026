"""``molrec_raw.dataset.staging``: shards named by URL staged into a local cache, against a real
S3-compatible server on 127.0.0.1 (moto's server mode, read through s3fs) and the project's
own HTTP server (``zarr/rangeserver.py``, with injected faults), plus fsspec's ``memory://``
file system for the budget's bookkeeping.  Rules: staging#local, #whole, #once, #evict."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import pytest

pytest.importorskip("lmdb", reason="collections need the [lmdb] extra (pip install 'molrec-raw[lmdb]')")
pytest.importorskip("fsspec", reason="staging needs fsspec (pip install 'molrec-raw[remote]')")

import molrec_raw as mr  # noqa: E402
from molrec_raw.dataset.staging import CACHE_ENV, ShardCache, shard_urls, stage  # noqa: E402
from molrec_raw.errors import (ChecksumMismatchError, CorruptDataError, InvalidValueError, MolrecError,  # noqa: E402
                               RemoteError, ResourceLimitError)
from molrec_raw.zarr.rangeserver import RangeRequestHandler, RangeServer  # noqa: E402

UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}
SHARDS = 3
ROOT = Path(__file__).resolve().parents[2]


def write_shard(path: Path, first: int, n: int) -> None:
    rng = np.random.default_rng(first)
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(first, first + n):
            atoms = int(rng.integers(2, 6))
            system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C"] * atoms, dtype=object)})})
            frames = [mr.Frame({"pe": float(r)}, {"atoms": mr.Block({c: rng.normal(size=atoms) for c in "xyz"})})]
            w.add_record(system=system, frames=frames)


def write_digest(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")
    return digest


def first_x(path: Path) -> np.ndarray:
    with mr.CollectionReader(path) as c:
        return np.asarray(c.batch([0], frame=0)["atoms/x"])


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shards of four records each, each with its ``.sha256`` beside it."""
    root = tmp_path_factory.mktemp("shards")
    for k in range(SHARDS):
        path = root / f"part-{k:05d}.mrec.lmdb"
        write_shard(path, 4 * k, 4)
        write_digest(path)
    return root


def shard_names() -> List[str]:
    return [f"part-{k:05d}.mrec.lmdb" for k in range(SHARDS)]


def leftovers(cache: Path) -> List[str]:
    """Temporary download files anywhere in the cache."""
    return sorted(p.name for p in cache.rglob("*.part"))


# -- the project's HTTP server, with faults by path ------------------------------------------
class PathFaults(RangeRequestHandler):
    """``server.state`` maps a file name to a fault for its GETs: ``"500"`` (a server error,
    every time) or ``"truncate"`` (the full Content-Length promised, half the body sent, the
    connection closed)."""

    def answer(self, *, head: bool) -> None:
        fault = None if head else self.server.state.get(self.path.rsplit("/", 1)[-1])
        if fault == "500":
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "truncate":
            found = self.requested()
            if found is None:
                return
            path, size = found
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.send_bytes(path, 0, size // 2)
            self.close_connection = True
            return
        super().answer(head=head)


@pytest.fixture
def http(shard_dir: Path) -> Iterator[RangeServer]:
    pytest.importorskip("aiohttp", reason="fsspec's HTTP file system needs aiohttp")
    server = RangeServer(shard_dir, handler=PathFaults)
    server.state = {}
    try:
        yield server
    finally:
        server.close()


def shard_gets(server: RangeServer, name: str) -> int:
    return sum(1 for method, path, _ in server.log if method == "GET" and path.endswith("/" + name))


# -- moto's S3 server ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3(shard_dir: Path) -> Iterator[Dict[str, Any]]:
    """A bucket ``shards`` on a moto S3 server on 127.0.0.1 holding the shards and their
    digests, and the storage options that reach it."""
    server_module = pytest.importorskip("moto.server", reason="needs moto's server mode (pip install 'moto[server]')")
    pytest.importorskip("s3fs", reason="S3 URLs need s3fs")
    boto3 = pytest.importorskip("boto3")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket="shards")
        for path in sorted(shard_dir.iterdir()):
            client.put_object(Bucket="shards", Key=f"train/{path.name}", Body=path.read_bytes())
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        yield {"client": client, "options": options}
    finally:
        server.stop()


def s3_urls() -> List[str]:
    return [f"s3://shards/train/{name}" for name in shard_names()]


# -- tests --------------------------------------------------------------------------------
def test_staging_local_s3_shards_equal_the_local_files(s3: Dict[str, Any], shard_dir: Path, tmp_path: Path) -> None:
    """staging#local, staging#whole: shards from an S3-compatible server land byte-equal in the
    cache under <cache>/s3/<bucket>/<key>, read the same values, leave no temporary file."""
    cache = ShardCache(tmp_path / "cache", storage_options=s3["options"])
    with cache.stage(s3_urls()) as staged:
        assert [p.name for p in staged] == shard_names()
        assert staged[0] == tmp_path / "cache" / "s3" / "shards" / "train" / shard_names()[0]
        for path in staged:
            assert path.read_bytes() == (shard_dir / path.name).read_bytes()
            np.testing.assert_array_equal(first_x(path), first_x(shard_dir / path.name))
    assert leftovers(tmp_path / "cache") == []


def test_staging_once_s3_second_stage_downloads_nothing(s3: Dict[str, Any], tmp_path: Path) -> None:
    """staging#once: staging the same shards again leaves each cached file untouched (same
    inode, same modification time)."""
    cache = ShardCache(tmp_path / "cache", storage_options=s3["options"])
    first = cache.stage(s3_urls())
    seen = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in first]
    first.release()
    again = cache.stage(s3_urls())
    assert again == first
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in again] == seen
    again.release()


def test_staging_whole_s3_truncated_object_refused(s3: Dict[str, Any], shard_dir: Path, tmp_path: Path) -> None:
    """staging#whole: an object cut short in the store (its builder's .sha256 beside it) is
    refused naming the URL; nothing is left under the final name nor as a temporary file."""
    whole = (shard_dir / shard_names()[0]).read_bytes()
    s3["client"].put_object(Bucket="shards", Key="cut/part-00000.mrec.lmdb", Body=whole[: len(whole) // 2])
    s3["client"].put_object(Bucket="shards", Key="cut/part-00000.mrec.lmdb.sha256",
                            Body=(shard_dir / (shard_names()[0] + ".sha256")).read_bytes())
    cache = ShardCache(tmp_path / "cache", storage_options=s3["options"])
    url = "s3://shards/cut/part-00000.mrec.lmdb"
    with pytest.raises(ChecksumMismatchError, match="^s3://shards/cut/part-00000.mrec.lmdb: SHA-256") as err:
        cache.stage([url])
    assert err.value.rule == "staging#whole"
    assert not cache.path_for(url).exists()
    assert leftovers(tmp_path / "cache") == []


def test_staging_whole_s3_missing_object_named(s3: Dict[str, Any], tmp_path: Path) -> None:
    """staging#whole: an object the store does not have is a RemoteError naming the URL."""
    with pytest.raises(RemoteError, match="^s3://shards/train/nope.mrec.lmdb: no such object"):
        ShardCache(tmp_path / "cache", storage_options=s3["options"]).stage(["s3://shards/train/nope.mrec.lmdb"])


def test_staging_s3_shard_urls_lists_a_prefix_and_a_glob(s3: Dict[str, Any]) -> None:
    """A directory URL names its *.mrec.lmdb objects (not the .sha256 files), sorted; a glob its matches."""
    assert shard_urls("s3://shards/train/", s3["options"]) == s3_urls()
    assert shard_urls("s3://shards/train/part-0000[12].mrec.lmdb", s3["options"]) == s3_urls()[1:]


def test_staging_once_http_second_stage_asks_the_server_nothing(http: RangeServer, shard_dir: Path,
                                                                tmp_path: Path) -> None:
    """staging#once: over the project's HTTP server, the first stage downloads each shard once
    (and reads its .sha256); the second sends no request at all — it works with the server gone."""
    urls = [http.url_of(name) for name in shard_names()]
    cache = ShardCache(tmp_path / "cache")
    with cache.stage(urls) as staged:
        for path in staged:
            assert path.read_bytes() == (shard_dir / path.name).read_bytes()
    assert [shard_gets(http, n) for n in shard_names()] == [1] * SHARDS
    assert [shard_gets(http, n + ".sha256") for n in shard_names()] == [1] * SHARDS
    served = http.requests
    with cache.stage(urls) as again:
        assert again == staged
    assert http.requests == served
    http.close()
    with stage(urls, tmp_path / "cache") as offline:
        assert offline == staged


@pytest.mark.parametrize("fault", ["truncate", "500"])
def test_staging_whole_http_torn_download_and_server_error_refused(http: RangeServer, tmp_path: Path,
                                                                   fault: str) -> None:
    """staging#whole: a body cut short (the connection closed mid-shard) and an HTTP 500 are
    MolrecErrors naming the URL; nothing under the final name, no temporary file; once the
    server answers again the same call stages the shard."""
    name = shard_names()[1]
    url = http.url_of(name)
    http.state[name] = fault
    cache = ShardCache(tmp_path / "cache")
    with pytest.raises(MolrecError, match=f"^{url}: ") as err:
        cache.stage([url])
    assert err.value.rule == "staging#whole" and err.value.store == url
    assert not cache.path_for(url).exists()
    assert leftovers(tmp_path / "cache") == []
    http.state.clear()
    with cache.stage([url]) as staged:
        assert staged[0].exists()


def test_staging_whole_digest_file_for_another_shard_refused(http: RangeServer, shard_dir: Path,
                                                             tmp_path: Path) -> None:
    """staging#whole: a .sha256 line naming another file is refused, not trusted."""
    (shard_dir / "odd.mrec.lmdb").write_bytes((shard_dir / shard_names()[0]).read_bytes())
    (shard_dir / "odd.mrec.lmdb.sha256").write_text(f"{'0' * 64}  other.mrec.lmdb\n")
    try:
        with pytest.raises(CorruptDataError, match="not a sha256sum line for 'odd.mrec.lmdb'"):
            ShardCache(tmp_path / "cache").stage([http.url_of("odd.mrec.lmdb")])
    finally:
        (shard_dir / "odd.mrec.lmdb").unlink()
        (shard_dir / "odd.mrec.lmdb.sha256").unlink()


def test_staging_whole_stale_temporary_files_swept(http: RangeServer, tmp_path: Path) -> None:
    """staging#whole: a killed download's temporary file is removed by the next download."""
    cache = ShardCache(tmp_path / "cache")
    url = http.url_of(shard_names()[0])
    place = cache.path_for(url)
    place.parent.mkdir(parents=True)
    (place.parent / f".{place.name}.999-dead.part").write_bytes(b"half a shard")
    with cache.stage([url]):
        pass
    assert leftovers(tmp_path / "cache") == []


_STAGE_ONE = """
import sys
from molrec_raw.dataset.staging import stage
with stage([sys.argv[1]], sys.argv[2]) as staged:
    print(staged[0].stat().st_size)
"""


def test_staging_once_two_processes_download_a_shard_once(http: RangeServer, shard_dir: Path,
                                                          tmp_path: Path) -> None:
    """staging#once: two processes staging the same shard into one cache at once (the server
    slowed so that they overlap) download it once; both get the whole file."""
    name = shard_names()[2]
    http.latency = 0.3
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-c", _STAGE_ONE, http.url_of(name), str(tmp_path / "cache")]
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    size = (shard_dir / name).stat().st_size
    assert [int(out) for out, _ in outs] == [size, size]
    assert shard_gets(http, name) == 1


def test_staging_local_without_a_cache_directory_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """staging#local: no cache= and no MOLREC_RAW_CACHE: refused, naming both."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    with pytest.raises(InvalidValueError, match=f"cache=<directory> or set the environment variable {CACHE_ENV}"):
        stage(["s3://bucket/a.mrec.lmdb"])
    monkeypatch.setenv(CACHE_ENV, "/somewhere")
    assert ShardCache().directory == Path("/somewhere")


def test_staging_local_urls_that_cannot_be_a_cache_path_refused(tmp_path: Path) -> None:
    """staging#local: a URL without a path, or with a '..' or hidden segment, is refused."""
    cache = ShardCache(tmp_path)
    for url in ("s3://bucket", "https://host/a/../b.mrec.lmdb", "s3://bucket/.hidden.mrec.lmdb", "plain/path"):
        with pytest.raises(InvalidValueError, match="not a URL of a shard"):
            cache.path_for(url)
    assert cache.path_for("https://user:pw@host:8080/d/x.mrec.lmdb?sig=1") == tmp_path / "https" / "host:8080" / "d" / "x.mrec.lmdb"


# -- the budget (fsspec's in-memory file system: the bookkeeping, no server needed) -----------
@pytest.fixture
def memory_shards() -> Iterator[List[str]]:
    """Four 1000-byte objects under memory://budget/."""
    import fsspec
    fs = fsspec.filesystem("memory")
    urls = []
    for k in range(4):
        fs.pipe_file(f"/budget/s{k}.mrec.lmdb", bytes([k]) * 1000)
        urls.append(f"memory://budget/s{k}.mrec.lmdb")
    yield urls
    fs.rm("/budget", recursive=True)


def test_staging_evict_least_recently_used_not_in_use(memory_shards: List[str], tmp_path: Path) -> None:
    """staging#evict: with room for two shards, staging a third evicts the least recently
    staged shard no process holds — a held one stays even when it is older."""
    cache = ShardCache(tmp_path, budget=2000)
    held = cache.stage([memory_shards[0]])
    os.utime(cache.path_for(memory_shards[0]).with_name(".s0.mrec.lmdb.use-lock"), (1, 1))  # the oldest use
    cache.stage([memory_shards[1]]).release()
    with cache.stage([memory_shards[2]]):
        assert sorted(p.name for p in cache.usage()) == ["s0.mrec.lmdb", "s2.mrec.lmdb"]
        held.release()
        with cache.stage([memory_shards[3]]):
            assert sorted(p.name for p in cache.usage()) == ["s2.mrec.lmdb", "s3.mrec.lmdb"]
    assert sum(cache.usage().values()) == 2000


def test_staging_evict_refuses_what_cannot_fit(memory_shards: List[str], tmp_path: Path) -> None:
    """staging#evict: shards asked for that alone exceed the budget are refused before any
    download; a cache whose other shards are all in use is refused naming the cache."""
    cache = ShardCache(tmp_path, budget=1500)
    with pytest.raises(ResourceLimitError, match="take 2000 bytes, more than the cache's budget of 1500"):
        cache.stage(memory_shards[:2])
    assert cache.usage() == {}
    with cache.stage([memory_shards[0]]):
        with pytest.raises(ResourceLimitError, match="every other shard is in use"):
            cache.stage([memory_shards[1]])
    assert list(cache.usage()) == [cache.path_for(memory_shards[0])]


def test_staging_evict_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """staging#evict: MOLREC_RAW_CACHE_BUDGET sets the budget (bytes); anything else is refused."""
    monkeypatch.setenv("MOLREC_RAW_CACHE_BUDGET", "4096")
    assert ShardCache(tmp_path).budget == 4096
    monkeypatch.setenv("MOLREC_RAW_CACHE_BUDGET", "4G")
    with pytest.raises(InvalidValueError, match="a number of bytes"):
        ShardCache(tmp_path)


def test_staging_staged_shards_pickle_as_paths(memory_shards: List[str], tmp_path: Path) -> None:
    """A StagedShards pickles as the plain list of its paths (the locks stay with this process)."""
    import pickle
    with ShardCache(tmp_path).stage(memory_shards[:2]) as staged:
        copy = pickle.loads(pickle.dumps(staged))
        assert type(copy) is list and copy == list(staged)
        assert staged.held
    assert not staged.held


def test_staging_local_open_dataset_over_an_s3_prefix_reads_as_the_local_shards(s3: Dict[str, Any], shard_dir: Path,
                                                                                tmp_path: Path) -> None:
    """staging#local, staging#evict: open_dataset of an S3 prefix (its *.mrec.lmdb objects,
    sorted) stages the shards and reads the same records as the local directory; the shards
    stay in use (no budget evicts them) until the dataset closes."""
    cache = ShardCache(tmp_path / "cache", storage_options=s3["options"])
    remote = mr.open_dataset("s3://shards/train/", cache=cache)
    with mr.open_dataset(shard_dir) as local:
        assert [s.path.name for s in remote.shards] == [s.path.name for s in local.shards]
        assert len(remote) == len(local) == 4 * SHARDS
        ids = [11, 0, 5, 7]
        mine, theirs = remote.batch(ids), local.batch(ids)
        assert set(mine) == set(theirs)
        for name in theirs:
            np.testing.assert_array_equal(mine[name], theirs[name])
    lock = cache.path_for(s3_urls()[0]).with_name(f".{shard_names()[0]}.use-lock")
    assert not cache._evict(cache.path_for(s3_urls()[0]))  # in use: the eviction's lock is refused
    remote.close()
    assert lock.exists() and cache._evict(cache.path_for(s3_urls()[0]))


def test_staging_local_open_dataset_of_urls_with_the_cache_from_the_environment(
        http: RangeServer, shard_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """staging#local: a list of http URLs opens through MOLREC_RAW_CACHE, in the given order."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))
    names = shard_names()[::-1]
    with mr.open_dataset([http.url_of(n) for n in names]) as ds:
        assert [s.path for s in ds.shards] == [tmp_path / "env-cache" / "http" / http.url.split("//")[1] / n
                                               for n in names]
        assert ds.batch([0, 4])["pe"].tolist() == [8.0, 4.0]


def test_bench_staging_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/staging.py at a tiny size: every row comes out (no timing is asserted)."""
    pytest.importorskip("aiohttp", reason="fsspec's HTTP file system needs aiohttp")
    import importlib.util as util
    spec = util.spec_from_file_location("bench_staging", ROOT / "bench" / "staging.py")
    assert spec is not None and spec.loader is not None
    bench = util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--shards", "2", "--mib", "1", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("  run ") == 2 and "plain/staging (>= 0.9 asked)" in out and "by hand" in out
