"""Where the test suite spends its time (issue 36): a pytest plugin that adds up, per test
directory, the CPU time of the test process and of the children it waited for
(``resource.getrusage``, self + children: CPU, not wall, because the machine may be shared),
the wall time, and the child processes started (``subprocess`` launches, ``os.fork`` — which
covers multiprocessing's fork start method — and multiprocessing's spawn/forkserver starts).

    python -m pytest -q -p suite_profile --durations=50          # with bench/ on PYTHONPATH
    PYTHONPATH=$PWD:$PWD/bench python -m pytest -q -p suite_profile [-n 2]

The table is printed at the end of the run (without xdist) and, when ``$SUITE_PROFILE_JSON``
is set, kept there after every test (with ``-n``: one file per worker, ``<path>.gw0`` ...;
add them up with ``python bench/suite_profile.py <path>.gw*``).
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
from typing import Any, Dict, Generator, List

import pytest

_children = {"count": 0}
_table: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
_failed: List[str] = []


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
    _save()


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        _failed.append(report.nodeid)


def _save() -> None:
    """The table so far, to ``$SUITE_PROFILE_JSON`` (one file per xdist worker: ``.gw0`` ...)."""
    out = os.environ.get("SUITE_PROFILE_JSON")
    if out:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        Path(out + (f".{worker}" if worker else "")).write_text(
            json.dumps({"table": {k: dict(v) for k, v in _table.items()}, "failed": _failed}, indent=1),
            encoding="utf-8")


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


def main(paths: List[str]) -> None:
    """The per-directory table of one or more saved profiles (xdist workers' files added up)."""
    total: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
    failed: List[str] = []
    for path in paths:
        saved = json.loads(Path(path).read_text(encoding="utf-8"))
        failed += saved["failed"]
        for where, row in saved["table"].items():
            for k, v in row.items():
                total[where][k] += v
    print(f"{'directory':28} {'tests':>6} {'CPU s':>8} {'wall s':>8} {'children':>9}")
    for where, row in sorted(total.items(), key=lambda kv: -kv[1]["cpu"]):
        print(f"{where:28} {row['tests']:6.0f} {row['cpu']:8.1f} {row['wall']:8.1f} {row['children']:9.0f}")
    print(f"{'total':28} {sum(r['tests'] for r in total.values()):6.0f} {sum(r['cpu'] for r in total.values()):8.1f} "
          f"{sum(r['wall'] for r in total.values()):8.1f} {sum(r['children'] for r in total.values()):9.0f}")
    if failed:
        print("failed:", *failed, sep="\n  ")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
