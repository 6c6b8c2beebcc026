"""Reading over HTTP(S) with the standard library only (``http.client``).

Two read-only stores share one client:

- :class:`HttpFile` — one remote object read by byte ranges, the range source of a remote
  zip: ``ZipStore(HttpFile("https://host/run.mrec.zip"))`` finds the end-of-central-
  directory record with one suffix range (ZIP64 too), reads the central directory once,
  then each entry by range;
- :class:`HttpStore` — a Zarr hierarchy served as files under a base URL (``<url>/<key>``).
  Plain HTTP has no listing, so ``list``/``list_dir`` are refused: arrays open by path, a
  hierarchy that must be discovered (a MolRec directory record) cannot be read this way.

The client keeps connections alive (at most ``max_connections``, also the number of
requests in flight at once), merges adjacent ranges into one request, and retries timeouts,
dropped connections, truncated bodies and 5xx/429 answers with exponential backoff before
raising :class:`~molrec_raw.errors.RemoteError` naming the URL and the range.  A ranged GET
must be answered ``206`` with a ``Content-Range`` matching the request: a ``200`` (the
server ignored the range and sends the whole object) or a wrong range is an error at once —
the body is never read, so a record is never downloaded whole behind the caller's back.
"""
from __future__ import annotations

import http.client
import re
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar
from urllib.parse import quote, urlsplit

from molrec_raw.errors import InvalidValueError, RemoteError, UnsupportedFeatureError
from molrec_raw.zarr.ranges import DEFAULT_GAP, read_coalesced
from molrec_raw.zarr.store import ReadOnlyStore, validate_key
from molrec_raw.zarr.urls import redact

__all__ = ["HttpOptions", "HttpFile", "HttpStore"]

_T = TypeVar("_T")
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")
_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_DRAIN_LIMIT = 64 * 1024  # error bodies up to this size are read so the connection stays usable
_TRANSIENT = (OSError, http.client.HTTPException)  # timeouts, resets, truncated bodies, bad status lines


@dataclass(frozen=True)
class HttpOptions:
    """How the client talks to the server.  ``timeout`` (seconds) bounds connecting and every
    wait for bytes; a failed request is tried ``retries`` more times, after ``backoff``,
    ``2*backoff``, ... seconds; ``token`` is sent as ``Authorization: Bearer <token>``,
    ``headers`` with every request; ``gap`` is the largest hole between two ranges still
    read in one request."""

    timeout: float = 10.0
    retries: int = 3
    backoff: float = 0.1
    max_connections: int = 4
    token: Optional[str] = None
    headers: Mapping[str, str] = field(default_factory=dict)
    gap: int = DEFAULT_GAP
    ssl_context: Optional[ssl.SSLContext] = None

    def __post_init__(self) -> None:
        if not (self.timeout > 0 and self.retries >= 0 and self.backoff >= 0 and self.max_connections >= 1
                and self.gap >= 0):
            raise InvalidValueError("HttpOptions: timeout > 0, retries >= 0, backoff >= 0, max_connections >= 1, "
                                    "gap >= 0")


def _options(options: Optional[HttpOptions], overrides: Dict[str, Any]) -> HttpOptions:
    base = options or HttpOptions()
    if not overrides:
        return base
    unknown = set(overrides) - set(HttpOptions.__dataclass_fields__)
    if unknown:
        raise InvalidValueError(f"unknown HTTP option(s) {sorted(unknown)} (known: "
                                f"{', '.join(HttpOptions.__dataclass_fields__)})")
    values = {name: getattr(base, name) for name in HttpOptions.__dataclass_fields__}
    values.update(overrides)
    return HttpOptions(**values)


class _Client:
    """Kept-alive connections to one origin and the request/validate/retry loop."""

    def __init__(self, url: str, options: HttpOptions) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidValueError(f"not an http(s) URL: {redact(url)!r}")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.options = options
        self.requests = 0  # requests sent (every attempt counts), for tests and benchmarks
        self._headers = {"User-Agent": "molrec-raw", "Accept-Encoding": "identity",
                         **({"Authorization": f"Bearer {options.token}"} if options.token else {}),
                         **dict(options.headers)}
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(options.max_connections)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._closed = False

    # -- connections ---------------------------------------------------------
    def _connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            context = self.options.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.options.timeout, context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.options.timeout)

    def _exchange(self, method: str, target: str, headers: Dict[str, str],
                  wants_body: Callable[[int], bool]) -> Tuple[int, Dict[str, str], bytes]:
        """One request on a pooled connection: (status, lower-cased headers, body).  The body
        is read only when ``wants_body(status)``; otherwise the connection is dropped."""
        self._slots.acquire()
        try:
            with self._lock:
                if self._closed:
                    raise RemoteError("HTTP store is closed", store=redact(self.scheme + "://" + self.host))
                conn = self._idle.pop() if self._idle else None
            fresh = conn is None
            for _ in range(2):  # a kept-alive connection the server has closed meanwhile: once more, fresh
                if conn is None:
                    conn = self._connect()
                with self._lock:
                    self.requests += 1
                try:
                    conn.request(method, target, headers={**self._headers, **headers})
                    response = conn.getresponse()
                    status = response.status
                    found = {k.lower(): v for k, v in response.getheaders()}
                    if not wants_body(status):
                        length = found.get("content-length", "")
                        if status < 400 or not length.isdigit() or int(length) > _DRAIN_LIMIT:
                            conn.close()  # e.g. a whole object sent instead of a range: never read
                            return status, found, b""
                        response.read()  # a short error page: read it, keep the connection
                        body = b""
                    else:
                        body = response.read()  # HEAD: b"", and the response is finished
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                    conn.close()
                    conn = None
                    if fresh:
                        raise
                    fresh = True
                    continue
                except BaseException:
                    conn.close()
                    raise
                if response.will_close:
                    conn.close()
                else:
                    with self._lock:
                        self._idle.append(conn)
                return status, found, body
            raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
        finally:
            self._slots.release()

    def _attempts(self, what: str, url: str, once: Callable[[], Tuple[bool, _T]]) -> _T:
        """Run ``once`` until it reports done, retrying transient failures with backoff."""
        last = "no answer"
        tries = self.options.retries + 1
        for attempt in range(tries):
            if attempt:
                time.sleep(self.options.backoff * 2 ** (attempt - 1))
            try:
                done, value = once()
            except ssl.SSLCertVerificationError as exc:  # not transient: the same certificate next time
                raise RemoteError(f"{what}: the server's certificate is not trusted ({exc.verify_message}); pass "
                                  "ssl_context= to trust it", store=redact(url)) from None
            except TimeoutError:
                last = f"timed out after {self.options.timeout:g} s"
                continue
            except _TRANSIENT as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if done:
                return value
            last = str(value)
        raise RemoteError(f"{what} failed after {tries} attempt(s): {last}", store=redact(url))

    def map(self, fn: Callable[[Any], _T], items: Sequence[Any]) -> Iterator[_T]:
        """``fn`` over ``items``, at most ``max_connections`` at once."""
        if len(items) < 2 or self.options.max_connections < 2:
            return map(fn, items)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.options.max_connections,
                                                thread_name_prefix="molrec-http")
            pool = self._pool
        return pool.map(fn, items)

    # -- requests ------------------------------------------------------------
    def get(self, url: str, target: str) -> Optional[bytes]:
        """The whole object (answer ``200``); None when it does not exist."""
        what = f"GET {redact(url)}"

        def once() -> Tuple[bool, Any]:
            status, found, body = self._exchange("GET", target, {}, lambda s: s == 200)
            if status == 200:
                self._check_encoding(what, url, found)
                return True, body
            return self._refusal(what, url, status, found, ranged=False)

        result: Optional[bytes] = self._attempts(what, url, once)
        return result

    def get_range(self, url: str, target: str, start: int,
                  length: Optional[int]) -> Optional[Tuple[bytes, Optional[int]]]:
        """``(bytes, object size or None)`` of a byte range (answer ``206`` with the matching
        ``Content-Range``): ``start < 0`` is a suffix of ``-start`` bytes, ``length`` None
        runs to the end; a range past the end is ``b""``.  None when the object does not exist."""
        if start < 0:
            spec = f"bytes={start}"
        elif length is None:
            spec = f"bytes={start}-"
        elif length <= 0:
            return b"", None
        else:
            spec = f"bytes={start}-{start + length - 1}"
        what = f"GET {redact(url)} ({spec})"

        def once() -> Tuple[bool, Any]:
            status, found, body = self._exchange("GET", target, {"Range": spec}, lambda s: s == 206)
            if status == 206:
                self._check_encoding(what, url, found)
                return True, self._checked_range(what, url, found.get("content-range"), body, start, length)
            return self._refusal(what, url, status, found, ranged=True)

        result: Optional[Tuple[bytes, Optional[int]]] = self._attempts(what, url, once)
        return result

    @staticmethod
    def _check_encoding(what: str, url: str, found: Dict[str, str]) -> None:
        encoding = found.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", ""):
            raise RemoteError(f"{what}: the server sent a {encoding!r}-encoded body although identity was asked",
                              store=redact(url))

    def size(self, url: str, target: str) -> Optional[int]:
        """``Content-Length`` of a HEAD request; None when the object does not exist."""
        what = f"HEAD {redact(url)}"

        def once() -> Tuple[bool, Any]:
            status, found, _ = self._exchange("HEAD", target, {}, lambda s: s == 200)
            if status == 200:
                length = found.get("content-length", "")
                if not length.isdigit():
                    raise RemoteError(f"{what}: no Content-Length in the answer", store=redact(url))
                return True, int(length)
            return self._refusal(what, url, status, found, ranged=False)

        result: Optional[int] = self._attempts(what, url, once)
        return result

    def _refusal(self, what: str, url: str, status: int, found: Dict[str, str], *, ranged: bool) -> Tuple[bool, Any]:
        """(done, value) for an answer that is not the expected success."""
        if status in (404, 410):
            return True, None
        if ranged and status == 416:  # the range starts past the end: an empty read
            match = _CONTENT_RANGE.match(found.get("content-range", ""))
            total = match.group(3) if match else "*"
            return True, (b"", None if total == "*" else int(total))
        if ranged and status == 200:
            raise RemoteError(f"{what}: the server ignored the Range header and answered 200 with the whole "
                              "object; records are read by byte ranges (HTTP 206), never downloaded whole "
                              "behind the caller's back — serve them from a server that supports ranges",
                              store=redact(url))
        if status in _RETRY_STATUS:
            return False, f"HTTP {status}"
        if status in (401, 403):
            raise RemoteError(f"{what}: access denied (HTTP {status}); pass token= or headers=", store=redact(url))
        raise RemoteError(f"{what}: unexpected answer HTTP {status}", store=redact(url))

    def _checked_range(self, what: str, url: str, header: Optional[str], body: bytes, start: int,
                       length: Optional[int]) -> Tuple[bytes, Optional[int]]:
        """The body of a 206 when its Content-Range is the one asked for; (body, total size)."""
        match = _CONTENT_RANGE.match(header or "")
        if match is None or match.group(1) is None:
            raise RemoteError(f"{what}: answered 206 with Content-Range {header!r}, not 'bytes a-b/size'",
                              store=redact(url))
        first, last = int(match.group(1)), int(match.group(2))
        total = None if match.group(3) == "*" else int(match.group(3))
        wrong = last < first or len(body) != last - first + 1 or (total is not None and last >= total)
        if start < 0:  # a suffix: the last min(n, size) bytes
            wrong = wrong or total is None or last != total - 1 or last - first + 1 != min(-start, total)
        else:
            end = None if length is None else start + length - 1  # last byte asked for
            wrong = wrong or first != start or (end is not None and last > end)
            short = (end is None or last < end)
            wrong = wrong or (short and (total is None or last != total - 1))
        if wrong:
            raise RemoteError(f"{what}: the server answered with Content-Range {header!r} and {len(body)} bytes, "
                              "which is not the range asked for", store=redact(url))
        return body, total

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            pool, self._pool = self._pool, None
        for conn in idle:
            conn.close()
        if pool is not None:
            pool.shutdown(wait=False)


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _HttpBase:
    """What both HTTP readers hold: the URL, the options and the client (read-only, assumed
    not to change while read)."""

    immutable = True

    def __init__(self, url: str, options: Optional[HttpOptions], overrides: Dict[str, Any]) -> None:
        self.url = url
        self.options = _options(options, overrides)
        self._client = _Client(url, self.options)
        self.concurrency = self.options.max_connections

    @property
    def requests(self) -> int:
        """Requests sent so far (retries included)."""
        return self._client.requests

    def describe(self) -> str:
        return redact(self.url)

    def close(self) -> None:
        self._client.close()


class HttpFile(_HttpBase):
    """One remote object read by byte ranges (the range source of a remote zip).

    ``HttpFile(url, token=..., headers=..., timeout=..., retries=...)`` or with an
    :class:`HttpOptions`.  The object is assumed not to change while it is read (a packed
    record is closed)."""

    def __init__(self, url: str, options: Optional[HttpOptions] = None, **overrides: Any) -> None:
        super().__init__(url, options, overrides)
        self._target = _target(url)

    def _range(self, start: int, length: Optional[int]) -> Tuple[bytes, Optional[int]]:
        found = self._client.get_range(self.url, self._target, start, length)
        if found is None:
            raise RemoteError("no such object (HTTP 404)", store=redact(self.url))
        return found

    def tail(self, length: int) -> Tuple[int, bytes]:
        data, total = self._range(-length, None) if length > 0 else (b"", None)
        if total is None:
            raise RemoteError("the server did not state the object's size in Content-Range", store=redact(self.url))
        return total, data

    def read(self, offset: int, length: int) -> bytes:
        return self._range(offset, length)[0] if length > 0 else b""

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        return read_coalesced(ranges, self.read, gap=self.options.gap, each=self._client.map)


class HttpStore(_HttpBase, ReadOnlyStore):
    """A read-only store over files served under a base URL: key ``k`` is ``<url>/k``.

    Reads by ranged GETs (``206`` required), sizes by HEAD.  There is no listing over plain
    HTTP, so ``list``/``list_dir`` raise :class:`UnsupportedFeatureError`: open arrays by
    path; to read a hierarchy that must be discovered, pack it into a zip
    (``ZipStore(HttpFile(url))``) or use an object store (``FsspecStore``)."""

    immutable = True  # served values are assumed not to change while they are read

    def __init__(self, url: str, options: Optional[HttpOptions] = None, **overrides: Any) -> None:
        if urlsplit(url).path.rstrip("/").lower().endswith(".zip"):
            raise InvalidValueError(f"{redact(url)} names a zip archive: read it with ZipStore(HttpFile(url)) "
                                    "(or molrec_raw.zarr.remote.open_url(url)); HttpStore serves keys under a base URL")
        super().__init__(url.rstrip("/"), options, overrides)
        parts = urlsplit(self.url)
        self._base, self._query = parts.path.rstrip("/"), (f"?{parts.query}" if parts.query else "")

    def _where(self, key: str) -> Tuple[str, str]:
        """(URL for messages, request target) of ``key``."""
        path = f"{self._base}/{quote(validate_key(key), safe='/')}"
        return f"{self.url.split('?')[0]}/{key}", path + self._query

    def get(self, key: str) -> Optional[bytes]:
        url, target = self._where(key)
        return self._client.get(url, target)

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        url, target = self._where(key)
        found = self._client.get_range(url, target, start, length)
        return None if found is None else found[0]

    def get_ranges(self, key: str, ranges: Sequence[Tuple[int, int]]) -> List[Optional[bytes]]:
        if any(start < 0 for start, _ in ranges):
            return super().get_ranges(key, ranges)
        url, target = self._where(key)
        missing = False

        def fetch(start: int, length: int) -> bytes:
            nonlocal missing
            found = self._client.get_range(url, target, start, length)
            if found is None:
                missing = True
                return b""
            return found[0]

        data = read_coalesced(ranges, fetch, gap=self.options.gap, each=self._client.map)
        return [None] * len(ranges) if missing else list(data)

    def size(self, key: str) -> Optional[int]:
        url, target = self._where(key)
        return self._client.size(url, target)

    def _no_listing(self) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            "plain HTTP has no listing, so this store cannot list keys: open arrays by path, or pack the "
            "hierarchy into a zip (read by ranges) or serve it from an object store (FsspecStore)",
            store=self.describe())

    def list(self, prefix: str = "") -> Iterator[str]:
        raise self._no_listing()

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        raise self._no_listing()
