"""HttpFile / HttpStore against a loopback server with injected faults (zarr-v3-subset#9.2
over HTTP): ranged GETs must be answered 206 with the matching Content-Range, transient
failures are retried with backoff, everything else is a RemoteError naming URL and range."""
from __future__ import annotations

import numpy as np
import pytest

from molrec_raw.errors import ReadOnlyError, RemoteError, UnsupportedFeatureError
from molrec_raw.zarr import open_array, open_group
from molrec_raw.zarr.httpstore import HttpFile, HttpOptions, HttpStore
from remote_helpers import faulty_server

DATA = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture
def served(tmp_path):
    (tmp_path / "blob.bin").write_bytes(DATA)
    with faulty_server(tmp_path) as server:
        try:
            yield server
        finally:
            server.state.released.set()  # a hung request ends, unanswered


def fast(**extra):
    return dict(retries=2, backoff=0.01, timeout=5.0, **extra)


def test_ranged_get_returns_exact_bytes_and_suffix_gives_size(served):
    f = HttpFile(served.url_of("blob.bin"), **fast())
    assert f.read(100, 50) == DATA[100:150]
    size, tail = f.tail(1000)
    assert size == len(DATA) and tail == DATA[-1000:]
    assert f.tail(10**6) == (len(DATA), DATA)  # a suffix longer than the object: all of it
    assert f.read(len(DATA) - 5, 50) == DATA[-5:]  # short at the end, never past it
    assert f.read(len(DATA) + 10, 5) == b""  # 416: an empty read
    assert [r for _, _, r in served.log] == ["bytes=100-149", "bytes=-1000", "bytes=-1000000",
                                             f"bytes={len(DATA) - 5}-{len(DATA) + 44}",
                                             f"bytes={len(DATA) + 10}-{len(DATA) + 14}"]


def test_connections_are_kept_alive(served):
    f = HttpFile(served.url_of("blob.bin"), **fast())
    for i in range(20):
        assert f.read(i * 10, 10) == DATA[i * 10:i * 10 + 10]
    assert served.requests == 20 and len(served.state.ports) == 1


def test_adjacent_ranges_coalesce_into_one_request(served):
    f = HttpFile(served.url_of("blob.bin"), **fast())
    ranges = [(0, 100), (100, 50), (150, 1000), (1200, 10)]  # a 50-byte hole is still merged
    assert f.read_many(ranges) == [DATA[o:o + n] for o, n in ranges]
    assert served.requests == 1


def test_distant_ranges_are_fetched_concurrently(served):
    served.latency = 0.2
    f = HttpFile(served.url_of("blob.bin"), **fast(gap=0))
    ranges = [(0, 10), (4000, 10), (8000, 10), (12000, 10)]
    assert f.read_many(ranges) == [DATA[o:o + n] for o, n in ranges]
    # each request is held 0.2 s by the server: two at once means they were sent concurrently
    assert served.requests == 4 and served.state.max_in_flight >= 2


def test_a_5xx_then_success_is_retried(served):
    served.state.faults.extend(["503", "503"])
    f = HttpFile(served.url_of("blob.bin"), **fast())
    assert f.read(10, 10) == DATA[10:20]
    assert served.requests == 3


def test_persistent_5xx_names_url_and_range(served):
    served.state.faults.extend(["503"] * 3)
    f = HttpFile(served.url_of("blob.bin"), **fast())
    with pytest.raises(RemoteError, match=r"blob\.bin \(bytes=10-19\) failed after 3 attempt\(s\): HTTP 503") as info:
        f.read(10, 10)
    assert served.url in str(info.value)


def test_a_truncated_body_is_retried_then_refused(served):
    served.state.faults.append("truncate")
    f = HttpFile(served.url_of("blob.bin"), **fast())
    assert f.read(0, 4000) == DATA[:4000]
    served.state.faults.extend(["truncate"] * 3)
    with pytest.raises(RemoteError, match="IncompleteRead"):
        f.read(0, 4000)


def test_a_200_instead_of_206_is_refused_at_once_without_reading_the_body(served):
    served.state.faults.append("ignore-range")
    f = HttpFile(served.url_of("blob.bin"), **fast())
    with pytest.raises(RemoteError, match="ignored the Range header"):
        f.read(0, 10)
    assert served.requests == 1  # not retried: a server that ignores ranges never will
    assert f.read(0, 10) == DATA[:10]  # the client is still usable


def test_a_wrong_content_range_is_refused(served):
    served.state.faults.append("wrong-range")
    f = HttpFile(served.url_of("blob.bin"), **fast())
    with pytest.raises(RemoteError, match="not the range asked for"):
        f.read(100, 10)
    served.state.faults.append("wrong-range")
    with pytest.raises(RemoteError, match="not the range asked for"):
        f.tail(100)


def test_a_hang_past_the_timeout_is_retried_then_refused(served):
    """A hung request never gets an answer (until the test ends): only the client's own
    timeout ends each attempt, so the test needs no clock of its own."""
    served.state.faults.append("hang")
    f = HttpFile(served.url_of("blob.bin"), timeout=0.3, retries=1, backoff=0.01)
    assert f.read(0, 10) == DATA[:10]  # the second attempt is answered
    served.state.faults.extend(["hang", "hang"])
    with pytest.raises(RemoteError, match=r"timed out after 0\.3 s"):
        f.read(0, 10)
    assert served.state.hung == 3  # every attempt reached the server and was given up


def test_bearer_token_and_headers_are_sent(served):
    f = HttpFile(served.url_of("blob.bin"), token="s3cret", headers={"X-Test": "yes"}, **fast())
    f.read(0, 1)
    assert served.state.authorization[-1] == "Bearer s3cret" and served.state.extra[-1] == "yes"
    served.state.faults.append("403")
    with pytest.raises(RemoteError, match="access denied.*token="):
        f.read(0, 1)


def test_errors_do_not_show_query_strings(served):
    f = HttpFile(served.url_of("blob.bin") + "?signature=TOPSECRET", **fast())
    served.state.faults.extend(["503"] * 3)
    with pytest.raises(RemoteError) as info:
        f.read(0, 1)
    assert "TOPSECRET" not in str(info.value) and "blob.bin?…" in str(info.value)


def test_missing_object(served):
    with pytest.raises(RemoteError, match="404"):
        HttpFile(served.url_of("nope.zip"), **fast()).tail(100)


def test_options_are_checked():
    with pytest.raises(Exception, match="unknown HTTP option"):
        HttpFile("http://127.0.0.1:1/x", tiemout=3)
    with pytest.raises(Exception, match="timeout > 0"):
        HttpOptions(timeout=0)


# -- HttpStore: a hierarchy as files under a base URL ---------------------------------------
def test_http_store_reads_arrays_by_path_and_refuses_listing(tmp_path):
    root = open_group(tmp_path / "data.zarr", mode="w")
    values = np.arange(1000.0).reshape(100, 10)
    root.create_array("a", shape=values.shape, dtype="float64", chunks=(10, 10), shards=(50, 10))[...] = values
    with faulty_server(tmp_path) as server:
        store = HttpStore(server.url_of("data.zarr"), **fast())
        assert store.get("zarr.json") == (tmp_path / "data.zarr" / "zarr.json").read_bytes()
        assert store.get("missing") is None and store.size("missing") is None
        assert store.size("zarr.json") == (tmp_path / "data.zarr" / "zarr.json").stat().st_size
        assert store.get_range("zarr.json", -3) == (tmp_path / "data.zarr" / "zarr.json").read_bytes()[-3:]
        arr = open_array(store, "a")
        np.testing.assert_array_equal(arr[12:47], values[12:47])
        with pytest.raises(UnsupportedFeatureError, match="no listing"):
            list(store.list())
        with pytest.raises(UnsupportedFeatureError, match="no listing"):
            store.list_dir("")
        with pytest.raises(ReadOnlyError):
            store.set("x", b"1")
        with pytest.raises(Exception, match="names a zip archive"):
            HttpStore(server.url_of("data.zip"))


def test_https_with_a_trusted_certificate_and_a_refused_one(tmp_path):
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    (tmp_path / "blob.bin").write_bytes(DATA)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    from molrec_raw.zarr.rangeserver import RangeServer

    with RangeServer(tmp_path, ssl_context=server_context) as server:
        assert server.url.startswith("https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        f = HttpFile(server.url_of("blob.bin"), ssl_context=trusted, **fast())
        assert f.read(7, 9) == DATA[7:16] and f.tail(3) == (len(DATA), DATA[-3:])
        with pytest.raises(RemoteError, match="certificate is not trusted"):
            HttpFile(server.url_of("blob.bin"), **fast()).read(0, 1)
