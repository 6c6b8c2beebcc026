"""A loopback HTTP server with byte ranges, for tests, examples and benchmarks.

``serve_directory(root)`` serves the files under ``root`` on ``127.0.0.1`` (a free port)
from a background thread: HTTP/1.1 with kept-alive connections, ``GET``/``HEAD``, one
range per request (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``) answered ``206`` with its
``Content-Range`` (``416`` past the end), no directory listings.  ``latency`` adds that many
seconds before every answer (to measure round-trip-bound reading on one machine);
``requests`` counts the requests served.  The standard library's ``http.server`` does not
serve ranges, hence this small handler.  Not a production server.
"""
from __future__ import annotations

import os
import re
import ssl
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, List, Optional, Tuple, Type, Union

__all__ = ["RangeRequestHandler", "RangeServer", "serve_directory"]

_RANGE = re.compile(r"bytes=(\d*)-(\d*)\s*$")


class RangeRequestHandler(SimpleHTTPRequestHandler):
    """Serves files with single byte ranges; subclass and override :meth:`answer` to alter
    answers (the test suite injects faults this way)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stalls)
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._count_and_wait()
        self.answer(head=False)

    def do_HEAD(self) -> None:
        self._count_and_wait()
        self.answer(head=True)

    def _count_and_wait(self) -> None:
        with self.server.lock:
            self.server.requests += 1
            self.server.log.append((self.command, self.path, self.headers.get("Range")))
        if self.server.latency:
            time.sleep(self.server.latency)

    def requested(self) -> Optional[Tuple[str, int]]:
        """(file path, size) of the requested file, or None (404 sent)."""
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404, "not found")
            return None
        return path, os.path.getsize(path)

    def byte_range(self, size: int) -> Union[None, Tuple[int, int], str]:
        """The asked range as ``(first, last)`` inclusive, None for the whole file, or
        ``"unsatisfiable"``."""
        header = self.headers.get("Range")
        if header is None:
            return None
        match = _RANGE.match(header.strip())
        if match is None or (not match.group(1) and not match.group(2)):
            return None  # several ranges or an unknown unit: the whole file, as RFC 9110 allows
        first, last = match.group(1), match.group(2)
        if not first:  # a suffix
            n = int(last)
            if n == 0 or size == 0:
                return "unsatisfiable"
            return max(0, size - n), size - 1
        lo = int(first)
        hi = size - 1 if not last else min(int(last), size - 1)
        if lo >= size or (last and int(last) < lo):
            return "unsatisfiable"
        return lo, hi

    def answer(self, *, head: bool) -> None:
        found = self.requested()
        if found is None:
            return
        path, size = found
        wanted = self.byte_range(size)
        if wanted == "unsatisfiable":
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if wanted is None:
            first, last = 0, size - 1
            self.send_response(200)
        else:
            assert isinstance(wanted, tuple)
            first, last = wanted
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not head:
            self.send_bytes(path, first, last - first + 1)

    def send_bytes(self, path: str, offset: int, length: int) -> None:
        """``length`` bytes of the file from ``offset``: ``sendfile`` (no copy through Python)."""
        self.wfile.flush()
        with open(path, "rb") as fh:
            self.connection.sendfile(fh, offset, length)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: Tuple[str, int], handler: Any, latency: float) -> None:
        super().__init__(address, handler)
        self.latency = latency
        self.lock = threading.Lock()
        self.requests = 0
        self.log: List[Tuple[str, str, Optional[str]]] = []
        self.state: Any = None  # free for a handler subclass (injected faults)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (or refused our certificate) is not worth a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class RangeServer:
    """A running loopback server (see the module docstring); a context manager."""

    def __init__(self, root: Union[str, "os.PathLike[str]"], *, latency: float = 0.0,
                 handler: Type[RangeRequestHandler] = RangeRequestHandler, host: str = "127.0.0.1",
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.root = os.fspath(root)
        self._server = _Server((host, 0), partial(handler, directory=self.root), latency)
        if ssl_context is not None:  # HTTPS with the caller's certificate
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="molrec-range-server", daemon=True)
        self._thread.start()
        scheme = "https" if ssl_context is not None else "http"
        self.url = f"{scheme}://{host}:{self._server.server_address[1]}"

    @property
    def requests(self) -> int:
        """Requests answered so far (GET and HEAD)."""
        with self._server.lock:
            return self._server.requests

    @property
    def log(self) -> List[Tuple[str, str, Optional[str]]]:
        """(method, path, Range header) of every request so far."""
        with self._server.lock:
            return list(self._server.log)

    @property
    def state(self) -> Any:
        return self._server.state

    @state.setter
    def state(self, value: Any) -> None:
        self._server.state = value

    @property
    def latency(self) -> float:
        return self._server.latency

    @latency.setter
    def latency(self, value: float) -> None:
        self._server.latency = value

    def url_of(self, relative: Union[str, "os.PathLike[str]"]) -> str:
        """The URL of a file under the root (given relative to it, or as a path inside it)."""
        path = os.fspath(relative)
        if os.path.isabs(path):
            path = os.path.relpath(path, self.root)
        return f"{self.url}/{path.replace(os.sep, '/')}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "RangeServer":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


def serve_directory(root: Union[str, "os.PathLike[str]"], *, latency: float = 0.0,
                    handler: Type[RangeRequestHandler] = RangeRequestHandler) -> RangeServer:
    """Serve ``root`` on loopback; use as ``with serve_directory(".") as server: server.url``."""
    return RangeServer(root, latency=latency, handler=handler)

