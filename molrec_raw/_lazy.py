"""PEP 562 lazy loading of a package's public names.

A package lists its public names under ``if TYPE_CHECKING:``, one import per line::

    if TYPE_CHECKING:
        from molrec_raw.record.model import Frame as Frame

Type checkers read these lines as imports (the ``X as X`` form marks an explicit
re-export); :func:`attach` reads the same lines, from the package's source, as the table
of which name comes from which module.  ``import package`` then imports none of them: a
name's module is imported on first use and the name cached in the package namespace.
Adding a public name is one line in that block; ``__all__`` is the block's names plus the
package's eager ones.  The same idea as Scientific Python's SPEC 1 (``lazy_loader``), which
reads a ``.pyi`` stub instead.
"""
from __future__ import annotations

import importlib
import re
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

__all__ = ["attach", "public_table"]

_HEADER = "if TYPE_CHECKING:"
_LINE = re.compile(r"from\s+([\w.]+)\s+import\s+(\w+)\s+as\s+(\w+)")


def public_table(module_name: str) -> Dict[str, str]:
    """``{name: module}`` from the ``if TYPE_CHECKING:`` block of ``module_name``'s source,
    in the block's order.  Every line of the block must be ``from M import N as N`` (or a
    comment): anything else is an ImportError naming the line, so the table cannot drift
    from what type checkers see."""
    path = getattr(sys.modules[module_name], "__file__", None)
    try:
        with open(str(path), encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:  # no source beside the bytecode, for one
        raise ImportError(f"{module_name}: its public names are read from its source file {path}, "
                          f"which cannot be read ({exc})") from None
    if _HEADER not in lines:
        raise ImportError(f"{module_name}: no '{_HEADER}' block listing its public names")
    table: Dict[str, str] = {}
    for number, line in enumerate(lines[lines.index(_HEADER) + 1:], lines.index(_HEADER) + 2):
        text = line.split("#", 1)[0].strip()
        if line and not line[0].isspace():
            break  # the block ends at the first line that is not indented
        if not text:
            continue
        match = _LINE.fullmatch(text)
        if match is None or match[2] != match[3]:
            raise ImportError(f"{path}:{number}: a public name is listed as 'from MODULE import NAME as NAME', "
                              f"not {text!r}")
        table[match[2]] = match[1]
    return table


def attach(module_name: str, eager: Sequence[str] = ()) -> Tuple[
        Callable[[str], Any], Callable[[], List[str]], List[str]]:
    """``(__getattr__, __dir__, __all__)`` for package ``module_name``: its lazy names from
    :func:`public_table`, after the ``eager`` names it defines itself."""
    table = public_table(module_name)

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        setattr(sys.modules[module_name], name, value)  # the next lookup does not come here
        return value

    def __dir__() -> List[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(table))

    return __getattr__, __dir__, [*eager, *table]
