"""Runs the molrs programs of ``programs/`` against a module (``molrs`` or
``molrec_raw.molrs``) in-process and turns what they print, and the records they write,
into text that compares exactly (floats by ``repr``: every bit).

A program is ``programs/pNN_<what>.py`` defining ``run(molrs, out, show)``: ``molrs`` is the
module under test, ``out`` a directory for its records, ``show`` a :class:`Show` that prints.
Known differences between molrs and the drop-in (spec-notes/dropin.md) are kept out of the
printed text in one place each: ``Show.record_meta`` drops the ``molrec_version`` stamp the
drop-in writes (checked on its own by the tests), and blocks read from a record list their
columns sorted (molrs's order there is its own, unspecified).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, List

import numpy as np

HERE = Path(__file__).resolve().parent
PROGRAMS = sorted(HERE.glob("programs/p*.py"))
EXPECTED = HERE / "expected"


def text(value: Any) -> str:
    """A value as exact text: arrays with dtype, shape and every element's repr."""
    if isinstance(value, np.ndarray):
        return f"array<{value.dtype.str}>{list(value.shape)}{text(value.tolist())}"
    if isinstance(value, np.generic):
        return f"{type(value).__name__}({value.item()!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(text(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {text(v)}" for k, v in value.items()) + "}"
    if type(value).__name__ == "MetaDocument":
        return f"doc{text(value.copy())}"
    if type(value).__name__ == "Box":
        return (f"Box(matrix={text(value.matrix)}, origin={text(value.origin)}, pbc={text(value.pbc)}, "
                f"defined={value.is_cell_defined}, style={value.style!r})")
    return repr(value)


class Show:
    """What a program prints with: every value through :func:`text`."""

    def __init__(self, module: ModuleType) -> None:
        self.molrs = module

    def __call__(self, label: str, *values: Any) -> None:
        print(label, *(text(v) for v in values))

    def raises(self, label: str, call: Callable[[], Any]) -> None:
        """The exception type ``call`` raises (messages are each side's own), or its value."""
        try:
            got = call()
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            kinds = [k.__name__ for k in type(exc).__mro__ if k.__module__ == "builtins"]
            print(label, "raises", kinds[0] if kinds else type(exc).__name__)
            return
        print(label, "returns", text(got))

    def record_meta(self, label: str, meta: dict) -> None:
        """A record's ``meta`` without the drop-in's ``molrec_version`` stamp."""
        self(label, {k: v for k, v in meta.items() if k != "molrec_version"})

    def block(self, label: str, block: Any, sort: bool = True) -> None:
        """Every column of a block: dtype name, values, mask, precision, target."""
        self(label + ".n_rows", block.n_rows, block.shape, block.structural_shape)
        for key in (sorted(block.keys()) if sort else block.keys()):
            self(f"{label}[{key}]", block.dtype(key), block[key], block.validity(key), block.precision(key),
                 block.target(key))

    def frame(self, label: str, frame: Any, sort: bool = True) -> None:
        """Blocks (sorted when read from a record), the box and typed meta in order."""
        if frame is None:
            self(label, None)
            return
        self(label + ".keys", sorted(frame.keys()) if sort else frame.keys())
        for name in (sorted(frame.keys()) if sort else frame.keys()):
            self.block(f"{label}/{name}", frame[name], sort)
        self(label + ".box", frame.box)
        self(label + ".meta", [(k, frame.meta.dtype(k), frame.meta[k]) for k in frame.meta.keys()])


def load(program: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"dropin_program_{program.stem}", program)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(program: Path, module: ModuleType, out: Path) -> str:
    """Everything ``program`` prints when run against ``module`` (records under ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    cwd = os.getcwd()
    os.chdir(out)  # programs name their records relative to ``out``: paths print the same
    try:
        with contextlib.redirect_stdout(buffer):
            load(program).run(module, Path("."), Show(module))
    finally:
        os.chdir(cwd)
    return buffer.getvalue()


def records(out: Path) -> List[Path]:
    """Every record a program left: ``*.mrec`` directories and ``*.mrec.zip`` archives."""
    return sorted(p for p in out.iterdir() if p.name.endswith((".mrec", ".mrec.zip")))


def dump(record: Path, module: ModuleType) -> str:
    """A record as ``module`` reads it: sections, meta, frame, system, force field, trajectory."""
    mrec = module.io.mrec
    buffer = io.StringIO()
    show = Show(module)
    with contextlib.redirect_stdout(buffer):
        f = mrec.MrecFile(record)
        sections = f.sections()
        show("sections", [s for s in sections if s != "status"])
        show.record_meta("meta", f.meta())
        show.frame("frame", f.frame())
        show.frame("system", f.system())
        ff = f.forcefield()
        if ff is not None:
            show("forcefield", ff.document, ff.name)
            for name, table in sorted(ff.tables.items()):
                show.block(f"forcefield/{name}", table)
        if "trajectory" in sections:
            with mrec.MrecReader(record) as reader:
                show("trajectory", len(reader), reader.step, reader.time, reader.block_names())
                for i in range(len(reader)):
                    show.frame(f"trajectory[{i}]", reader[i])
    return buffer.getvalue()


def expected_path(program: Path) -> Path:
    return EXPECTED / f"{program.stem}.txt"
