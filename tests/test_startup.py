"""Start-up cost (issue 24, "a fast import"): what ``import molrec_raw`` and ``molrec-raw
--help`` load, and what that costs relative to the four dependencies in the same run.

Every check runs a fresh interpreter (bytecode written by a first run).  No absolute time is
asserted: the figures in milliseconds are ``bench/startup.py``'s.  The cost test compares
the package's own import with its dependencies' import, best of several runs in one test.
"""
from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import molrec_raw
import molrec_raw.zarr

ROOT = Path(__file__).resolve().parents[1]

# Loaded only by what needs them: the network and TLS, the remote and zip stores, the
# optional tools, and the tools of the command line.
NEVER_ON_IMPORT = (
    "http.client", "ssl", "socket", "subprocess", "zipfile", "numpy", "molrec_raw.record", "molrec_raw.zarr.array",
    "molrec_raw.zarr.httpstore", "molrec_raw.zarr.fsspecstore", "molrec_raw.zarr.zipstore", "molrec_raw.integrations",
    "molrec_raw.record.explain", "molrec_raw.zarr.explain", "molrec_raw.plot", "molrec_raw.record.repair",
    "molrec_raw.conformance", "molrec_raw.cli", "molrec_raw.rules", "matplotlib", "fsspec",
)
# Using the record layer on a local record does not load the network, TLS or the tools either.
NEVER_ON_FIRST_USE = (
    "http.client", "ssl", "subprocess", "molrec_raw.zarr.httpstore", "molrec_raw.zarr.fsspecstore",
    "molrec_raw.integrations", "molrec_raw.record.explain", "molrec_raw.zarr.explain", "molrec_raw.plot",
    "molrec_raw.record.repair", "molrec_raw.conformance", "molrec_raw.cli", "matplotlib", "fsspec",
)
CORE_NAMES = ("read_mrec", "write_mrec", "read_mrec_frame", "write_mrec_frame", "MrecWriter", "MrecReader",
              "MetricsWriter", "read_metrics", "Frame", "Block")


def _python(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _loaded_after(code: str, cwd: Path) -> List[str]:
    """Modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    return json.loads(_python(f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))", cwd))


def _offenders(loaded: List[str], banned: tuple) -> List[str]:
    return [m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned)]


def test_issue24_import_loads_only_the_package_itself(tmp_path):
    loaded = _loaded_after("import molrec_raw", tmp_path)
    assert not _offenders(loaded, NEVER_ON_IMPORT), _offenders(loaded, NEVER_ON_IMPORT)
    mine = [m for m in loaded if m.startswith("molrec_raw")]
    assert mine == ["molrec_raw", "molrec_raw._lazy", "molrec_raw.errors"], mine


def test_issue24_first_use_of_the_record_layer_loads_no_network_and_no_tools(tmp_path):
    """Beyond what the four dependencies load themselves (numpy 2.2 on Python 3.10 imports
    subprocess, for one)."""
    touch = "; ".join(f"molrec_raw.{name}" for name in CORE_NAMES)
    loaded = _loaded_after(f"import molrec_raw\n{touch}\nimport molrec_raw.zarr as z; z.open_group; z.Array", tmp_path)
    theirs = set(_loaded_after("import numpy, zstandard, crc32c, orjson", tmp_path))
    offenders = [m for m in _offenders(loaded, NEVER_ON_FIRST_USE) if m not in theirs]
    assert not offenders, offenders
    assert "molrec_raw.record.trajectory.writer" in loaded and "molrec_raw.zarr.codecs.sharding" in loaded


def test_issue24_help_loads_neither_numpy_nor_the_record_layer(tmp_path):
    """`molrec-raw --help` (and bare `molrec-raw`, `--version`) import argparse and the parser."""
    for argv in (["--help"], [], ["--version"], ["cat", "--help"]):
        code = ("import io, sys\nfrom molrec_raw.cli import main\nshown, sys.stdout = sys.stdout, io.StringIO()\n"
                f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\nsys.stdout = shown")
        loaded = _loaded_after(code, tmp_path)
        heavy = _offenders(loaded, ("numpy", "zstandard", "orjson", "crc32c", "molrec_raw.record", "molrec_raw.zarr"))
        assert not heavy, (argv, heavy)


_COST = r"""
import json, time
c0 = time.process_time()
import numpy, zstandard, crc32c, orjson
c1 = time.process_time()
import molrec_raw
c2 = time.process_time()
print(json.dumps([c1 - c0, c2 - c1]))
"""


def test_issue24_import_costs_a_small_fraction_of_the_dependencies(tmp_path):
    """The issue's limit is 60 ms beyond the four dependencies, whose own import takes
    about twice that on a 2020s laptop; asserted here as a ratio measured in one run (CPU
    time, best of 7 fresh interpreters), which the machine's speed and load cancel out of.
    Before issue 24 the ratio was about 1 (every store, codec and record module loaded)."""
    _python(_COST, tmp_path)  # bytecode for the child's imports
    runs = [json.loads(_python(_COST, tmp_path)) for _ in range(7)]
    deps, own = min(r[0] for r in runs), min(r[1] for r in runs)
    assert own <= 0.25 * deps, f"import molrec_raw took {own * 1e3:.1f} ms CPU, the dependencies {deps * 1e3:.1f} ms"


def test_issue24_help_costs_less_than_importing_numpy(tmp_path):
    """`molrec-raw --help` (limit 0.25 s) against `python -c "import numpy, ..."` in the
    same run: both start an interpreter; the help must cost less than the dependencies it
    never imports (CPU time of the child, best of 5)."""
    def cpu(args: List[str]) -> float:
        import resource
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, cwd=tmp_path, capture_output=True, check=True, timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    help_args = [sys.executable, "-m", "molrec_raw", "--help"]
    deps_args = [sys.executable, "-c", "import numpy, zstandard, crc32c, orjson"]
    cpu(help_args), cpu(deps_args)
    helps, deps = min(cpu(help_args) for _ in range(5)), min(cpu(deps_args) for _ in range(5))
    assert helps < deps, f"--help {helps * 1e3:.1f} ms CPU, importing the dependencies {deps * 1e3:.1f} ms"


# -- the public face stays whole ---------------------------------------------------------
def _table_block(path: Path) -> Dict[str, str]:
    """``{name: module}`` of the ``if TYPE_CHECKING:`` block, as a type checker reads it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    return {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


@pytest.mark.parametrize("package, eager", [(molrec_raw, {"errors", "__version__"}), (molrec_raw.zarr, set())])
def test_issue24_lazy_names_are_what_type_checkers_see(package, eager):
    """``__all__`` is the TYPE_CHECKING block (what mypy reads) plus the eager names; every
    name resolves to the object of the module the block names; ``dir()`` lists them all."""
    table = _table_block(Path(package.__file__))
    assert set(package.__all__) == set(table) | eager and len(package.__all__) == len(set(package.__all__))
    for name, module in table.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name
    assert set(package.__all__) <= set(dir(package))


def test_issue24_star_import_and_help_see_every_public_name(tmp_path):
    names = json.loads(_python("from molrec_raw import *\nimport json\n"
                               "print(json.dumps(sorted(k for k in dir() if not k.startswith('_'))))", tmp_path))
    assert set(molrec_raw.__all__) - {"__version__"} <= set(names)
    text = _python("import pydoc, molrec_raw\nprint(pydoc.render_doc(molrec_raw, renderer=pydoc.plaintext))", tmp_path)
    for name in ("MrecWriter", "read_mrec_frame", "SequenceSchema", "repair_mrec"):
        assert name in text


def test_issue24_a_name_outside_the_table_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        molrec_raw.nope  # noqa: B018
    assert not hasattr(molrec_raw.zarr, "HttpStore")  # not public: reached through molrec_raw.zarr.httpstore


def test_issue24_malformed_table_line_is_refused(tmp_path):
    """The block admits only ``from M import N as N``: a line type checkers would read
    differently from the table is an ImportError naming the line."""
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nfrom molrec_raw import _lazy\n"
        "if TYPE_CHECKING:\n    from os.path import join as join\n    from os import sep\n"
        "__getattr__, __dir__, __all__ = _lazy.attach(__name__)\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import lazypkg"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": f"{tmp_path}{':' + str(ROOT)}"})
    assert done.returncode != 0 and "__init__.py:5: a public name is listed as" in done.stderr, done.stderr


def test_issue24_type_checkers_see_every_public_name_and_refuse_unknown_ones(tmp_path):
    """A user's module type-checked with ``mypy --strict``: the lazy names have their real
    types, and a misspelt one is still an error (the loader hides from type checkers)."""
    api = pytest.importorskip("mypy.api", reason="mypy is installed by the test extra on Python >= 3.12")
    user = tmp_path / "user.py"
    user.write_text(
        "import molrec_raw\nfrom molrec_raw import *\nfrom molrec_raw.zarr import Array, open_group\n"
        "frame: Frame = read_mrec_frame('x.mrec')\nreader: MrecReader = molrec_raw.MrecReader('x.mrec')\n"
        "def ndim(array: Array) -> int:\n    return array.ndim + len(open_group('x.mrec').attrs)\n"
        "version: str = molrec_raw.__version__\nrule: str = molrec_raw.errors.MolrecError('m').message\n"
        "reveal_type(molrec_raw.write_mrec_trajectory)\nmolrec_raw.MrecWritr\n", encoding="utf-8")
    out, err, status = api.run(["--strict", "--no-error-summary", "--follow-imports=silent",
                                "--cache-dir", str(ROOT / ".mypy_cache"), str(user)])
    # (mypy's cache may print the path this file had in an earlier run: match on its name)
    lines = [line.split("user.py:", 1)[1] for line in out.splitlines() if "user.py:" in line]
    # its real signature (an overload: a path gives the Path written, a bytearray the same buffer)
    assert any('Revealed type is "Overload(def (path:' in line and "-> pathlib.Path" in line
               and "-> bytearray" in line for line in lines), out
    assert [line for line in lines if "error" in line] == [
        '11: error: Module has no attribute "MrecWritr"; maybe "MrecWriter"?  [attr-defined]'], out
