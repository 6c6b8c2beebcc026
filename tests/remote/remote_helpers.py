"""A loopback HTTP server with injected faults."""
from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Deque, Optional

from molrec_raw.zarr.rangeserver import RangeRequestHandler, RangeServer

class Plan:
    """Faults to inject, one per request in order (then normal answers), and what was seen."""

    def __init__(self) -> None:
        self.faults: Deque[str] = deque()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.ports: set = set()  # client ports seen: one per connection
        self.authorization: list = []  # Authorization headers seen
        self.extra: list = []  # X-Test headers seen
        self.hung = 0  # requests answered by a hang
        self.released = threading.Event()  # set: every hung request ends (without an answer)

    def next(self) -> Optional[str]:
        try:
            return self.faults.popleft()
        except IndexError:
            return None


class FaultyHandler(RangeRequestHandler):
    """``server.state`` is a :class:`Plan`; faults: ``503``, ``403``, ``ignore-range`` (200 with the
    whole file), ``wrong-range`` (206 for the range one byte later), ``truncate`` (half the
    body, then the connection is closed), ``hang`` (no answer until ``released`` is set)."""

    def do_GET(self) -> None:
        self._tracked(super().do_GET)

    def do_HEAD(self) -> None:
        self._tracked(super().do_HEAD)

    def _tracked(self, serve) -> None:
        plan: Plan = self.server.state
        with plan.lock:
            plan.in_flight += 1
            plan.max_in_flight = max(plan.max_in_flight, plan.in_flight)
            plan.ports.add(self.client_address[1])
            plan.authorization.append(self.headers.get("Authorization"))
            plan.extra.append(self.headers.get("X-Test"))
        try:
            serve()
        finally:
            with plan.lock:
                plan.in_flight -= 1

    def answer(self, *, head: bool) -> None:
        self._answer(self.server.state.next(), head)

    def _answer(self, fault: Optional[str], head: bool) -> None:
        if fault is None:
            super().answer(head=head)
            return
        if fault in ("503", "403"):
            self.send_response(int(fault))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "hang":
            plan = self.server.state
            with plan.lock:
                plan.hung += 1
            plan.released.wait()
            self.close_connection = True
            return
        found = self.requested()
        if found is None:
            return
        path, size = found
        wanted = self.byte_range(size)
        first, last = wanted if isinstance(wanted, tuple) else (0, size - 1)
        if fault == "ignore-range":
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.send_bytes(path, 0, size)
        elif fault == "wrong-range":
            first, last = min(first + 1, size - 1), min(last + 1, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            self.send_bytes(path, first, last - first + 1)
        elif fault == "truncate":
            self.send_response(206 if wanted is not None else 200)
            if wanted is not None:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            self.send_bytes(path, first, (last - first + 1) // 2)
            self.close_connection = True
        else:  # pragma: no cover - a typo in a test
            raise AssertionError(f"unknown fault {fault!r}")


def faulty_server(root: Path, latency: float = 0.0) -> RangeServer:
    server = RangeServer(root, latency=latency, handler=FaultyHandler)
    server.state = Plan()
    return server
