"""Every ```python block of README.md runs, in README order, each in a fresh directory.

Blocks are self-contained (each writes the records it reads; a remote read starts its own
loopback server).  A block that imports zarr-python is skipped unless zarr-python 3 is
importable (it needs Python >= 3.11); one that imports an optional tool (MDAnalysis, mdtraj,
OpenMM, ASE, xarray, dask, distributed, fsspec, or their integrations) is skipped, with the
reason, when that tool is missing.
Tracebacks point at README.md line numbers.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import List, NamedTuple

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_USES_ZARR_PYTHON = re.compile(r"^\s*(import zarr\b|from zarr\b)", re.MULTILINE)
# A block importing an optional tool (or its integration module) needs the tool installed; the
# extra that installs it is named in the skip reason.
_TOOL_EXTRAS = {"MDAnalysis": "mdanalysis", "mdtraj": "mdtraj", "openmm": "openmm", "ase": "ase",
                "xarray": "xarray", "dask": "dask", "distributed": "dask", "fsspec": "remote",
                "torch": "torch"}
_USES_TOOL = re.compile(r"^\s*(?:import|from)\s+(?:molrec_raw\.integrations\.)?(" + "|".join(_TOOL_EXTRAS) + r")\b",
                        re.MULTILINE | re.IGNORECASE)


class Block(NamedTuple):
    heading: str
    line: int  # README line of the block's first code line
    code: str


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "top"


def python_blocks(text: str) -> List[Block]:
    """The ```python fenced blocks of ``text`` with their nearest preceding heading."""
    blocks: List[Block] = []
    heading = "top"
    fence = None  # language of the open fence, or None outside one
    body: List[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence is None:
            if stripped.startswith("```"):
                fence, body, start = stripped[3:].strip().lower(), [], number + 1
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif stripped == "```":
            if fence == "python":
                blocks.append(Block(heading, start, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        raise AssertionError(f"README.md: a ``` fence opened before line {start} is never closed")
    return blocks


def _ids(blocks: List[Block]) -> List[str]:
    ids: List[str] = []
    for block in blocks:
        base = _slug(block.heading)
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


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_readme_has_python_examples():
    headings = {b.heading for b in BLOCKS}
    for expected in ("A streaming trajectory", "Metrics", "Packing", "Opening a record with zarr-python",
                     "What is guaranteed on a crash", "Reading a record where it lies",
                     "A block as an xarray dataset", "Analysis on a Dask cluster"):
        assert expected in headings, f"README.md has no python example under {expected!r}"


@pytest.mark.parametrize("block", BLOCKS, ids=_ids(BLOCKS))
def test_readme_example_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if _USES_ZARR_PYTHON.search(block.code) and not _zarr_python_3():
        pytest.skip("needs zarr-python >= 3")
    for name in sorted({m.lower() for m in _USES_TOOL.findall(block.code)}):
        tool = next(t for t in _TOOL_EXTRAS if t.lower() == name)
        if importlib.util.find_spec(tool) is None:
            pytest.skip(f"needs {tool} (pip install 'molrec-raw[{_TOOL_EXTRAS[tool]}]')")
    monkeypatch.chdir(tmp_path)
    code = compile("\n" * (block.line - 1) + block.code, str(README), "exec")
    exec(code, {"__name__": "__readme__"})
