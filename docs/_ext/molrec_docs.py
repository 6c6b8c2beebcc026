"""Pages of the site generated at build time from the sources they describe.

- ``generated/cli.md``: the command-line reference, from ``molrec_raw.cli.parser.build_parser()``
  (each subcommand's help page as argparse prints it, under a heading of its own);
- ``generated/rules.md``: the rule catalogue, from ``molrec_raw.rules`` (every chapter, every rule,
  each with an anchor ``rule-<chapter>-<key>``);
- ``generated/api/*.rst``: the API reference, autodoc directives for every public name
  (``molrec_raw.__all__`` and ``molrec_raw.errors``, ``molrec_raw.zarr.__all__``,
  ``molrec_raw.rules``, ``molrec_raw.plot`` and every module of ``molrec_raw.integrations``).

The pages are written on ``builder-inited`` into ``docs/generated/`` (not tracked), and only
when their text changed, so an incremental build re-reads nothing it does not need to.
``tests/test_docs.py`` calls the same functions to check that every public name is documented.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

HELP_WIDTH = 88


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _fence(text: str, language: str = "text") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}\n"


# -- the command line ---------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> List[Tuple[str, argparse.ArgumentParser]]:
    found: List[Tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub not in [s for _, s in found]:
                    found.append((name, sub))
    return found


def cli_page() -> str:
    """The CLI reference page (MyST Markdown): the overview, then every subcommand (and the
    subcommands of a group, e.g. ``unpack zip``) as ``molrec-raw SUB --help`` prints it."""
    from molrec_raw.cli.parser import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_WIDTH)  # argparse wraps to the terminal: fix it
    try:
        parser = build_parser()
        parts = ["# Command-line reference\n",
                 "Generated from the parser (`molrec_raw.cli.parser.build_parser()`) at every build: what "
                 "`molrec-raw --help` and `molrec-raw SUBCOMMAND --help` print. A tour of the commands is "
                 "in the guide, [Command line](../guide/command-line.md).\n",
                 "## molrec-raw\n", _fence(parser.format_help())]

        def walk(prefix: str, node: argparse.ArgumentParser, level: int) -> None:
            for name, sub in _subparsers(node):
                full = f"{prefix} {name}"
                parts.append(f"{'#' * level} {full}\n")
                parts.append(_fence(sub.format_help()))
                walk(full, sub, level + 1)

        walk("molrec-raw", parser, 2)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(parts)


# -- the rule catalogue -------------------------------------------------------------------------


def _md(text: str) -> str:
    """Catalogue prose as Markdown text: characters MyST would read as markup are escaped."""
    return re.sub(r"([\\`*_\[\]<>{}|$])", r"\\\1", text)


def rule_anchor(rule_id: str) -> str:
    """The page anchor of a rule id: ``trajectory#W18`` -> ``rule-trajectory-W18``."""
    return "rule-" + re.sub(r"[^A-Za-z0-9]+", "-", rule_id).strip("-")


def rules_page() -> str:
    """The rule catalogue page: every chapter of ``molrec_raw.rules`` with every rule."""
    from molrec_raw import rules

    parts = ["(rule-catalogue)=\n# Rule catalogue\n",
             "Every rule id molrec_raw cites — in errors (`MolrecError.rule`), in `validate`'s violations, "
             "in docstrings and test names — defined in this project's words: what it requires, whom it "
             "binds (readers, writers or both) and which public chapter it comes from. Generated from "
             "`molrec_raw.rules` at every build; `molrec-raw explain --rule ID` prints one entry "
             f"(`--json` for tools). {len(rules.catalogue())} rules in {len(rules.chapters())} chapters.\n"]
    parties = {rules.READER: "readers", rules.WRITER: "writers", rules.BOTH: "readers and writers"}
    for chapter in rules.chapters():
        chapter_rules = rules.rules_of(chapter.name)
        parts.append(f"(rule-chapter-{chapter.name})=\n## `{chapter.name}` — {_md(chapter.title)}\n")
        if chapter.about:
            parts.append(_md(chapter.about) + "\n")
        parts.append(f"From: {_md(chapter.source)}. Digest: `{chapter.digest}`. {len(chapter_rules)} rules.\n")
        for rule in chapter_rules:
            parts.append(f"({rule_anchor(rule.id)})=\n### `{rule.id}` — {_md(rule.title)}\n")
            parts.append(f"{_md(rule.requires)}\n")
            parts.append(f"*Binds:* {parties[rule.who]}. *From:* {_md(rule.source or chapter.source)}.\n")
    return "\n".join(parts)


# -- the API reference --------------------------------------------------------------------------


def _directive(qualified: str, obj: Any) -> str:
    if getattr(obj, "__sphinx_mock__", False):  # a value of a mocked tool's type: no source to read
        return (f".. py:data:: {qualified}\n\n   A value built from an optional tool that is not installed where "
                "this page was built.\n")
    if inspect.isclass(obj):
        return f".. autoclass:: {qualified}\n   :members:\n"
    if callable(obj):
        return f".. autofunction:: {qualified}\n"
    return f".. autodata:: {qualified}\n   :annotation:\n"


def _heading(title: str, mark: str) -> str:
    return f"{title}\n{mark * len(title)}\n"


def _integration_modules() -> List[str]:
    import molrec_raw.integrations

    return [f"molrec_raw.integrations.{info.name}" for info in pkgutil.iter_modules(molrec_raw.integrations.__path__)]


OPTIONAL_TOOLS = ("MDAnalysis", "mdtraj", "openmm", "ase", "xarray", "dask", "distributed", "fsspec",
                  "matplotlib", "torch")


def missing_tools() -> List[str]:
    """The optional tools (integrations' imports) not installed here: the build mocks them."""
    return [tool for tool in OPTIONAL_TOOLS if importlib.util.find_spec(tool) is None]


def _names(module_name: str) -> List[str]:
    """The public names of a module as its ``__all__`` lists them (integrations are read from
    their source when the tool is missing and importing them would fail)."""
    module = importlib.import_module(module_name)
    return [n for n in getattr(module, "__all__", ()) if n not in ("__version__",)]


def api_pages() -> Dict[str, str]:
    """The API reference: page name -> reStructuredText, with every public name once."""
    import molrec_raw

    pages: Dict[str, str] = {}
    top = [n for n in molrec_raw.__all__ if n not in ("errors", "__version__")]
    groups: Dict[str, List[str]] = {}
    for name in top:
        module = getattr(getattr(molrec_raw, name), "__module__", "molrec_raw")
        area = module.split(".")[2] if module.startswith("molrec_raw.record.") else "other"
        groups.setdefault(area, []).append(name)
    titles = {"model": "Data model", "doors": "Sections of a record", "molrec": "Whole records",
              "violations": "Whole records", "forcefield": "Data model", "observables": "Data model",
              "trajectory": "Trajectories", "metrics": "Metrics", "pack": "Packing", "repair": "Repair",
              "salvage": "Repair"}
    by_title: Dict[str, List[str]] = {}
    for area, names in groups.items():
        by_title.setdefault(titles.get(area, "Other"), []).extend(names)
    body = [".. _api-molrec-raw:\n", _heading("molrec_raw", "="),
            ".. automodule:: molrec_raw\n",
            "The package's public names (``molrec_raw.__all__``), each imported on first use. "
            f"``molrec_raw.__version__`` is ``{molrec_raw.__version__}``.\n"]
    for title in ["Data model", "Sections of a record", "Whole records", "Trajectories", "Metrics", "Packing",
                  "Repair", "Other"]:
        if title not in by_title:
            continue
        body.append(_heading(title, "-"))
        body += [_directive(f"molrec_raw.{n}", getattr(molrec_raw, n)) for n in by_title[title]]
    pages["molrec_raw"] = "\n".join(body)

    pages["errors"] = "\n".join([_heading("molrec_raw.errors", "="),
                                 ".. automodule:: molrec_raw.errors\n\n",
                                 "Every error the package raises is a :class:`molrec_raw.errors.MolrecError`.\n"]
                                + [_directive(f"molrec_raw.errors.{n}", getattr(molrec_raw.errors, n))
                                   for n in molrec_raw.errors.__all__])
    for module_name, title in (("molrec_raw.zarr", "molrec_raw.zarr — the Zarr V3 layer"),
                               ("molrec_raw.rules", "molrec_raw.rules — the rule catalogue"),
                               ("molrec_raw.plot", "molrec_raw.plot — pictures of a run")):
        module = importlib.import_module(module_name)
        pages[module_name.split(".")[-1]] = "\n".join(
            [_heading(title, "="), f".. automodule:: {module_name}\n\n"]
            + [_directive(f"{module_name}.{n}", getattr(module, n)) for n in _names(module_name)])
    for module_name in _integration_modules():
        module = importlib.import_module(module_name)
        pages["integrations." + module_name.rsplit(".", 1)[1]] = "\n".join(
            [_heading(module_name, "="), f".. automodule:: {module_name}\n\n"]
            + [_directive(f"{module_name}.{n}", getattr(module, n)) for n in _names(module_name)])
    index = [_heading("API reference", "="),
             "Every public name, generated from the modules' ``__all__`` at every build.\n",
             ".. toctree::\n   :maxdepth: 1\n\n" + "".join(f"   {name}\n" for name in pages)]
    pages["index"] = "\n".join(index)
    return pages


def documented_names(pages: Dict[str, str]) -> List[str]:
    """Every qualified name an API page documents (for tests/test_docs.py)."""
    return re.findall(r"^\.\. (?:auto(?:class|function|data)|py:data):: (\S+)", "\n".join(pages.values()), re.MULTILINE)


def generate(app: Any) -> None:
    """Write the generated pages (``builder-inited``)."""
    from sphinx.ext.autodoc.mock import mock

    out = Path(app.srcdir) / "generated"
    _write(out / "cli.md", cli_page())
    _write(out / "rules.md", rules_page())
    with mock(app.config.autodoc_mock_imports):  # integrations whose tool is missing
        pages = api_pages()
    for name, text in pages.items():
        _write(out / "api" / f"{name}.rst", text)


def _no_type_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    """A constant without a ``#:`` comment would get its type's docstring (``dict``'s): drop it."""
    if what in ("data", "attribute") and not inspect.isclass(obj) and not callable(obj):
        own = inspect.getdoc(type(obj)) or ""
        if lines and "\n".join(lines).strip() == own.strip():
            lines.clear()


def setup(app: Any) -> Dict[str, Any]:
    """Sphinx entry point."""
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-docstring", _no_type_docstring)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
