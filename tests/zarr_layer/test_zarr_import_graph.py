"""The Zarr layer's import graph (issue 29, "the house"): ``molrec_raw/zarr/`` imports nothing of
MolRec (the record, collection, integration and CLI layers sit on top of it) and its modules
import each other without a circle — the four that were (array <-> chunkread, the codecs'
base <-> batch <-> shuffle/zstd, pipeline <-> sharding, httpstore <-> remote) included.  An
import under ``if TYPE_CHECKING:`` is not a runtime import and is not counted; an import
inside a function is (it runs when the function does)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import molrec_raw

PACKAGE = Path(molrec_raw.__file__).parent
ZARR = PACKAGE / "zarr"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(path: Path) -> Set[str]:
    """The ``molrec_raw`` modules ``path`` imports at run time (relative imports resolved;
    ``from package import name`` counted as the submodule when one of that name exists)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: Set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("molrec_raw"))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if base.startswith("molrec_raw"):
                    for alias in child.names:
                        sub = f"{base}.{alias.name}"
                        exists = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists() or \
                            (PACKAGE.parent / Path(*sub.split(".")) / "__init__.py").exists()
                        found.add(sub if exists else base)
            visit(child)
    visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(module)
    return found


def _graph() -> Dict[str, Set[str]]:
    return {_module_name(p): _runtime_imports(p) for p in sorted(ZARR.rglob("*.py"))}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                out.append(sorted(members))
    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_zarr_modules_import_each_other_without_a_circle() -> None:
    graph = _graph()
    assert len(graph) >= 20, sorted(graph)  # the scan found the layer's modules
    assert "molrec_raw.zarr.chunkread" in graph["molrec_raw.zarr.array"] or \
        "molrec_raw.zarr.array" in graph["molrec_raw.zarr.chunkread"]  # the scan sees imports at all
    assert _cycles(graph) == []


def test_zarr_layer_knows_nothing_of_molrec() -> None:
    above = ("molrec_raw.record", "molrec_raw.collection", "molrec_raw.integrations", "molrec_raw.cli")
    wrong = {module: sorted(i for i in imports if i.startswith(above)) for module, imports in _graph().items()}
    assert {m: i for m, i in wrong.items() if i} == {}


def test_the_cycle_finder_finds_a_circle() -> None:
    """The oracle itself: a circle of three and a self-contained pair are found; a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
