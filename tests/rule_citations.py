"""Every rule id the package's source cites, found without running it.

An id is ``<chapter>#<rule>`` (``trajectory#W18``, ``documents#9.15``, ``README#decision-1``).
Three ways of citing one are found:

1. written out anywhere in a module's text - code, strings, docstrings, comments;
2. composed by a *prefixing helper*: a function whose parameter P is formatted into an
   f-string right after ``<chapter>#`` (``def spec_error(rule, ...): ... f"trajectory#{rule}"``);
   each call of it in a module that defines or imports it cites ``<chapter>#<argument>``;
3. composed by an f-string over ``range(A, B)`` (``f"trajectory#W{n}" for n in range(1, 12)``).

A helper's argument is resolved to strings statically: a string literal, either branch of a
conditional expression, or a name assigned such values in the enclosing function or the
module (tuple unpacking included), or a parameter of the enclosing function whose callers
pass such values.  An argument that cannot be resolved is reported, so a citation the scan
cannot see fails the catalogue test instead of slipping past it.

A GitHub reference is not a rule id: write it ``owner/repo#N`` (``zarr-developers/zarr-python#3558``).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

CHAPTER = r"(?:README|[a-z][a-z0-9]*(?:-[a-z0-9]+)*)"
ID = re.compile(rf"(?<![\w/.\-])({CHAPTER})#([A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?)(?![\w\-{{]|\.[\w{{])")
_PREFIX = re.compile(rf"(?<![\w/.\-])({CHAPTER})#([A-Za-z0-9.\-]*)$")


@dataclass
class Citations:
    """``ids``: id -> the ``file:line`` places citing it; ``unresolved``: helper calls whose
    argument the scan cannot evaluate; ``helpers``: (module, function) -> chapter."""

    ids: Dict[str, Set[str]] = field(default_factory=dict)
    unresolved: List[str] = field(default_factory=list)
    helpers: Dict[Tuple[str, str], str] = field(default_factory=dict)

    def add(self, rule_id: str, where: str) -> None:
        self.ids.setdefault(rule_id, set()).add(where)


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module
    parents: Dict[ast.AST, ast.AST]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _load(root: Path) -> List[_Module]:
    modules = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        modules.append(_Module(_module_name(root, path), path, tree, parents))
    return modules


def _enclosing_function(module: _Module, node: ast.AST) -> Optional[ast.FunctionDef]:
    while node in module.parents:
        node = module.parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node  # type: ignore[return-value]
    return None


def _find_helpers(module: _Module, found: Citations) -> Dict[str, Tuple[str, int, str]]:
    """Prefixing helpers defined in ``module``: name -> (chapter, parameter index, parameter)."""
    helpers: Dict[str, Tuple[str, int, str]] = {}
    for function in ast.walk(module.tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [a.arg for a in function.args.args]
        for node in ast.walk(function):
            if not isinstance(node, ast.JoinedStr):
                continue
            for text, value in zip(node.values, node.values[1:]):
                if (isinstance(text, ast.Constant) and isinstance(text.value, str)
                        and isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
                        and value.value.id in params):
                    match = _PREFIX.search(text.value)
                    if match and not match[2]:
                        helpers[function.name] = (match[1], params.index(value.value.id), value.value.id)
                        found.helpers[(module.name, function.name)] = match[1]
    return helpers


def _ranges(module: _Module, found: Citations) -> None:
    """``f"<chapter>#<prefix>{n}" for n in range(A, B)`` with constant A, B."""
    for comp in ast.walk(module.tree):
        if not isinstance(comp, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            continue
        for generator in comp.generators:
            it = generator.iter
            if not (isinstance(generator.target, ast.Name) and isinstance(it, ast.Call)
                    and getattr(it.func, "id", None) == "range"
                    and all(isinstance(a, ast.Constant) for a in it.args)):
                continue
            bounds = range(*[a.value for a in it.args])  # type: ignore[misc]
            for node in ast.walk(comp.elt):
                if not isinstance(node, ast.JoinedStr):
                    continue
                for text, value in zip(node.values, node.values[1:]):
                    if (isinstance(text, ast.Constant) and isinstance(value, ast.FormattedValue)
                            and isinstance(value.value, ast.Name) and value.value.id == generator.target.id):
                        match = _PREFIX.search(str(text.value))
                        if match:
                            for n in bounds:
                                found.add(f"{match[1]}#{match[2]}{n}", f"{module.path}:{node.lineno}")


def _assigned(scope: ast.AST, name: str, module: _Module) -> List[ast.expr]:
    """Expressions assigned to ``name`` directly in ``scope`` (tuple targets matched by position)."""
    values: List[ast.expr] = []
    for node in ast.walk(scope):
        if not isinstance(node, ast.Assign) or (scope is module.tree and _enclosing_function(module, node)):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name:
                values.append(node.value)
            elif isinstance(target, ast.Tuple):
                for i, element in enumerate(target.elts):
                    if isinstance(element, ast.Name) and element.id == name:
                        for rhs in ([node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp)
                                    else [node.value]):
                            if isinstance(rhs, ast.Tuple) and len(rhs.elts) == len(target.elts):
                                values.append(rhs.elts[i])
                            else:
                                values.append(rhs)  # unresolvable shape: reported by the caller
    return values


class _Resolver:
    def __init__(self, modules: List[_Module]) -> None:
        self.modules = modules

    def calls_of(self, function: str) -> Iterable[Tuple[_Module, ast.Call]]:
        for module in self.modules:
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Call) and _called_name(node) == function:
                    yield module, node

    def strings(self, module: _Module, expr: ast.expr, at: ast.AST, depth: int = 0) -> Optional[Set[str]]:
        """Every string ``expr`` can be, or None when that cannot be told statically."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.IfExp):
            a, b = self.strings(module, expr.body, at, depth), self.strings(module, expr.orelse, at, depth)
            return None if a is None or b is None else a | b
        if not isinstance(expr, ast.Name) or depth > 3:
            return None
        function = _enclosing_function(module, at)
        if function is not None:
            local = _assigned(function, expr.id, module)
            if local:
                return self._union(module, local, at, depth)
            params = [a.arg for a in function.args.args]
            if expr.id in params:
                index, out = params.index(expr.id), set()
                callers = list(self.calls_of(function.name))
                for caller_module, call in callers:
                    arg = _argument(call, index, expr.id)
                    if arg is None:
                        continue
                    got = self.strings(caller_module, arg, call, depth + 1)
                    if got is None:
                        return None
                    out |= got
                return out if callers else None
        module_level = _assigned(module.tree, expr.id, module)
        return self._union(module, module_level, at, depth) if module_level else None

    def _union(self, module: _Module, exprs: List[ast.expr], at: ast.AST, depth: int) -> Optional[Set[str]]:
        out: Set[str] = set()
        for e in exprs:
            got = self.strings(module, e, at, depth + 1)
            if got is None:
                return None
            out |= got
        return out


def _called_name(call: ast.Call) -> Optional[str]:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _argument(call: ast.Call, index: int, name: str) -> Optional[ast.expr]:
    if index < len(call.args):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _imports_from(module: _Module) -> Dict[str, str]:
    """Local name -> defining module for ``from X import name [as local]``."""
    out = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def scan(package_root: Path) -> Citations:
    """Every rule id cited under ``package_root`` (a package directory)."""
    found = Citations()
    modules = _load(package_root)
    resolver = _Resolver(modules)
    helpers_of = {m.name: _find_helpers(m, found) for m in modules}
    for module in modules:
        text = module.path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            for match in ID.finditer(line):
                found.add(f"{match[1]}#{match[2]}", f"{module.path}:{number}")
        _ranges(module, found)
        imported = _imports_from(module)
        visible = dict(helpers_of[module.name])
        for local, qualified in imported.items():
            origin, _, original = qualified.rpartition(".")
            if original in helpers_of.get(origin, {}):
                visible[local] = helpers_of[origin][original]
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Call) or _called_name(node) not in visible:
                continue
            chapter, index, param = visible[_called_name(node)]  # type: ignore[index]
            if _enclosing_function(module, node) is not None and \
                    _enclosing_function(module, node).name == _called_name(node):  # type: ignore[union-attr]
                continue  # the helper calling itself
            arg = _argument(node, index, param)
            if arg is None:
                continue
            values = resolver.strings(module, arg, node)
            where = f"{module.path}:{node.lineno}"
            if values is None:
                found.unresolved.append(f"{where}: {_called_name(node)}({ast.unparse(arg)}, ...)")
                continue
            for value in values:
                found.add(value if "#" in value else f"{chapter}#{value}", where)
    return found
