"""Examples that cannot drift: the runner behind tests/test_readme.py and tests/test_docs.py.

The convention (docs/contributing.md states it for writers of pages):

- A fenced ```` ```python ```` block is an example. It runs in a fresh temporary folder, in a
  fresh namespace (``__name__ == "__example__"``), and what it prints on stdout is compared with
  the ```` ```text ```` block that follows it (only blank lines between them). A python block
  with no output block must print nothing.
- A ```` ```console ```` block is a shell session: each line starting with ``$ `` is a command,
  run with bash in the folder of the page's latest python block (a fresh folder if there is
  none yet), with the package's console scripts on ``PATH``; the lines after it, up to the next
  ``$ ``, are what it prints (stdout and stderr together).
- In shown output ``...`` matches any text, within a line or across lines (doctest's
  ``ELLIPSIS``): write it where output varies (timings, paths, pids, sizes that depend on the
  file system) or where a long output is cut. Trailing spaces are ignored.
- ```` ```sh ```` blocks are commands for the reader to type (set-up, commands on the reader's
  own files) and are not run; CI runs the set-up commands themselves (``.ci/run``).

A block that imports zarr-python is skipped unless zarr-python 3 is importable (Python >= 3.11);
one that imports an optional tool (MDAnalysis, mdtraj, OpenMM, ASE, xarray, dask, distributed,
fsspec, matplotlib, or their integrations) is skipped, with the reason, when the tool is missing.
Tracebacks point at the page's line numbers.
"""
from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
_USES_ZARR_PYTHON = re.compile(r"^\s*(import zarr\b|from zarr\b)", re.MULTILINE)
# A block importing an optional tool (or its integration module) needs the tool installed; the
# extra that installs it is named in the skip reason.
_TOOL_EXTRAS = {"MDAnalysis": "mdanalysis", "mdtraj": "mdtraj", "openmm": "openmm", "ase": "ase",
                "xarray": "xarray", "dask": "dask", "distributed": "dask", "fsspec": "remote",
                "matplotlib": "plot", "lmdb": "lmdb", "torch": "torch",
                "molrs": "test", "molpy": "test", "molplot": "test"}  # the peers: Python >= 3.12
_USES_TOOL = re.compile(r"^\s*(?:import|from)\s+(?:molrec_raw\.integrations\.)?(" + "|".join(_TOOL_EXTRAS) + r")\b",
                        re.MULTILINE | re.IGNORECASE)
# molrec_raw.plot.figure needs matplotlib although the block never imports it
_NEEDS_MATPLOTLIB = re.compile(r"\bplot\.figure\(")
_CHECKER = doctest.OutputChecker()


class Example(NamedTuple):
    """One example of a page: ``kind`` is ``python`` or ``console``."""

    page: Path
    heading: str
    line: int  # page line of the block's first code line
    kind: str
    code: str
    expected: str  # the output shown (python: the following text block; console: per command)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "top"


def _fences(text: str, page: Path) -> List[Tuple[str, int, str, str]]:
    """Every fenced block of ``text``: (language, first body line, body, nearest heading)."""
    found: List[Tuple[str, int, str, str]] = []
    heading = "top"
    fence: Optional[str] = None
    marker = "```"
    body: List[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence is None:
            if stripped.startswith("```"):
                marker = stripped[:len(stripped) - len(stripped.lstrip("`"))]
                fence, body, start = stripped[len(marker):].strip().lower(), [], number + 1
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif stripped == marker:
            found.append((fence, start, "\n".join(body) + "\n", heading))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        raise AssertionError(f"{page}: a ``` fence opened before line {start} is never closed")
    return found


def examples(page: Path) -> List[Example]:
    """The python and console examples of ``page``, in page order, each with its shown output."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    fences = _fences(text, page)
    found: List[Example] = []
    for i, (language, start, body, heading) in enumerate(fences):
        if language == "python":
            expected = ""
            if i + 1 < len(fences) and fences[i + 1][0] == "text":
                # only blank lines between this block's closing fence and the text block's opening one
                closing = start + len(body.splitlines())  # 1-based line of the closing fence
                between = lines[closing:fences[i + 1][1] - 2]
                if all(not line.strip() for line in between):
                    expected = fences[i + 1][2]
            found.append(Example(page, heading, start, "python", body, expected))
        elif language == "console":
            found.append(Example(page, heading, start, "console", body, ""))
    return found


def example_ids(found: List[Example]) -> List[str]:
    """Test ids: the heading's slug, numbered when a heading has several examples."""
    ids: List[str] = []
    for example in found:
        base = _slug(example.heading)
        n = sum(1 for i in ids if i == base or i.startswith(base + "-"))
        ids.append(base if n == 0 else f"{base}-{n + 1}")
    return ids


def _zarr_python_3() -> bool:
    try:
        import zarr
    except ImportError:
        return False
    major = str(getattr(zarr, "__version__", "0")).split(".")[0]
    return major.isdigit() and int(major) >= 3


def skip_reason(code: str) -> Optional[str]:
    """Why an example cannot run here (a missing optional tool), or None."""
    if _USES_ZARR_PYTHON.search(code) and not _zarr_python_3():
        return "needs zarr-python >= 3"
    names = {m.lower() for m in _USES_TOOL.findall(code)}
    if _NEEDS_MATPLOTLIB.search(code):
        names.add("matplotlib")
    for name in sorted(names):
        tool = next(t for t in _TOOL_EXTRAS if t.lower() == name)
        if importlib.util.find_spec(tool) is None:
            return f"needs {tool} (pip install 'molrec-raw[{_TOOL_EXTRAS[tool]}]')"
    return None


def matches(expected: str, got: str) -> bool:
    """``got`` is ``expected`` with ``...`` standing for any text; trailing spaces ignored."""
    def tidy(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"

    return _CHECKER.check_output(tidy(expected), tidy(got), doctest.ELLIPSIS)


def run_python(example: Example) -> str:
    """Run a python example in the current directory; what it printed on stdout."""
    code = compile("\n" * (example.line - 1) + example.code, str(example.page), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__example__"})
    return out.getvalue()


def console_commands(example: Example) -> List[Tuple[int, str, str]]:
    """The ``$ `` commands of a console example: (page line, command, output shown)."""
    commands: List[Tuple[int, str, str]] = []
    for offset, line in enumerate(example.code.splitlines()):
        if line.startswith("$ "):
            commands.append((example.line + offset, line[2:], ""))
        elif commands:
            number, command, shown = commands[-1]
            commands[-1] = (number, command, shown + line + "\n")
        elif line.strip():
            raise AssertionError(f"{example.page}:{example.line + offset}: console output before any '$ ' command")
    return commands


def run_command(command: str, cwd: Path) -> str:
    """Run one shell command as a reader would; stdout and stderr together."""
    env = dict(os.environ, COLUMNS="100", PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    return done.stdout


def check_page(example: Example, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``example`` in ``folder`` and compare what it prints with what the page shows."""
    reason = skip_reason(example.code)
    if reason:
        pytest.skip(reason)
    monkeypatch.chdir(folder)
    where = f"{example.page.relative_to(ROOT)}:{example.line}"
    if example.kind == "python":
        got = run_python(example)
        assert matches(example.expected, got), (
            f"{where}: the example printed\n{got}\nbut the page shows\n{example.expected}")
        return
    for number, command, shown in console_commands(example):
        got = run_command(command, folder)
        assert matches(shown, got), (
            f"{example.page.relative_to(ROOT)}:{number}: `{command}` printed\n{got}\nbut the page shows\n{shown}")


class Folders:
    """A fresh folder per python example; a console example runs in the folder of its page's
    latest python example before it (run first, unchecked, when it has not run yet: a test
    selected alone), or in a folder of its page's own when there is none."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.made: Dict[Tuple[Path, int], Path] = {}

    def _new(self) -> Path:
        folder = self.base / f"example-{len(self.made) + 1}"
        folder.mkdir()
        return folder

    def folder_for(self, example: Example, every: List[Example]) -> Path:
        """The folder ``example`` runs in (``every``: all the examples, in page order)."""
        if example.kind == "python":
            folder = self.made[(example.page, example.line)] = self._new()
            return folder
        before = [e for e in every if e.page == example.page and e.kind == "python" and e.line < example.line]
        key = (example.page, before[-1].line) if before else (example.page, 0)
        if key not in self.made:
            self.made[key] = folder = self._new()
            if before:
                cwd = os.getcwd()
                os.chdir(folder)
                try:
                    run_python(before[-1])
                finally:
                    os.chdir(cwd)
        return self.made[key]


def actual_outputs(page: Path, base: Path) -> None:  # pragma: no cover - a tool for page writers
    """Print what each example of ``page`` prints (``python tests/doc_examples.py PAGE``)."""
    (base / page.stem).mkdir()
    folders = Folders(base / page.stem)
    found = examples(page)
    for example in found:
        folder = folders.folder_for(example, found)
        print(f"--- {page}:{example.line} ({example.kind}, {example.heading})")
        if skip_reason(example.code):
            print("SKIP", skip_reason(example.code))
            continue
        os.chdir(folder)
        if example.kind == "python":
            try:
                print(run_python(example), end="")
            except Exception as exc:  # noqa: BLE001 - show it and go on
                print("RAISED", type(exc).__name__, exc)
        else:
            for _, command, _ in console_commands(example):
                print("$ " + command)
                print(run_command(command, folder), end="")


if __name__ == "__main__":  # pragma: no cover
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for page in [Path(name).resolve() for name in sys.argv[1:]]:
            actual_outputs(page, Path(scratch))
