"""Where the test suite spends its time (issue 36): a pytest plugin that adds up, per test
directory, the CPU time of the test process and of the children it waited for
(``resource.getrusage``, self + children: CPU, not wall, because the machine may be shared),
the wall time, and the child processes started (``subprocess`` launches, ``os.fork`` — which
covers multiprocessing's fork start method — and multiprocessing's spawn/forkserver starts).

    python -m pytest -q -p suite_profile --durations=50          # with bench/ on PYTHONPATH
    PYTHONPATH=$PWD:$PWD/bench python -m pytest -q -p suite_profile [-n 2]

The table is printed at the end of the run and written as JSON to ``$SUITE_PROFILE_JSON``
when set.  With pytest-xdist each worker's figures are its own: the plugin then reports
what the controller sees (run it without ``-n`` for the per-directory table).
"""
from __future__ import annotations

import json
import multiprocessing.process
import os
import resource
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, Generator

import pytest

_children = {"count": 0}
_table: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))


def _count(*_: Any) -> None:
    _children["count"] += 1


def _wrap_launches() -> None:
    execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _count()
        return execute(self, *args, **kwargs)

    subprocess.Popen._execute_child = counted  # type: ignore[attr-defined]
    start = multiprocessing.process.BaseProcess.start

    def started(self: Any) -> None:
        if getattr(self, "_start_method", None) not in (None, "fork") or \
                multiprocessing.get_start_method(allow_none=True) not in (None, "fork"):
            _count()  # spawn / forkserver (a fork start is counted by os.fork below)
        start(self)

    multiprocessing.process.BaseProcess.start = started  # type: ignore[method-assign]
    os.register_at_fork(after_in_parent=_count)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    _wrap_launches()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    cpu, wall, kids = _cpu(), time.perf_counter(), _children["count"]
    yield
    parts = Path(str(item.fspath)).resolve().parts
    where = "/".join(parts[parts.index("tests"):][:2]) if "tests" in parts else str(item.fspath)
    if where.endswith(".py"):
        where = "tests (top)"
    row = _table[where]
    row["cpu"] += _cpu() - cpu
    row["wall"] += time.perf_counter() - wall
    row["children"] += _children["count"] - kids
    row["tests"] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _table:
        return
    write = terminalreporter.write_line
    write("")
    write(f"{'directory':28} {'tests':>6} {'CPU s':>8} {'wall s':>8} {'children':>9}")
    total = defaultdict(float)
    for where, row in sorted(_table.items(), key=lambda kv: -kv[1]["cpu"]):
        write(f"{where:28} {row['tests']:6.0f} {row['cpu']:8.1f} {row['wall']:8.1f} {row['children']:9.0f}")
        for k, v in row.items():
            total[k] += v
    write(f"{'total':28} {total['tests']:6.0f} {total['cpu']:8.1f} {total['wall']:8.1f} {total['children']:9.0f}")
    out = os.environ.get("SUITE_PROFILE_JSON")
    if out:
        Path(out).write_text(json.dumps({k: dict(v) for k, v in _table.items()}, indent=1), encoding="utf-8")
