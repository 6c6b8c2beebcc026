"""The reference kit's subcommands: ``explain``, ``dump`` and ``conform``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List

from molrec_raw.errors import MolrecError

if TYPE_CHECKING:
    from molrec_raw.zarr.explain import Explanation, Section


def _explain_rule(args: argparse.Namespace) -> int:
    """``explain --rule ID``: one catalogue entry (``--rule CHAPTER``: all of that chapter)."""
    from molrec_raw import rules

    if args.path is not None or args.node is not None or args.chunk is not None or args.frame is not None:
        raise MolrecError("--rule explains a rule id, not a record: give either --rule ID or PATH [NODE]")
    one = "#" in args.rule
    entries = [rules.lookup(args.rule)] if one else list(rules.rules_of(args.rule))
    if args.json:
        doc = entries[0].to_json() if one else [e.to_json() for e in entries]
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        print("\n\n".join(e.text() for e in entries))
    return 0


def _cited_rules(report: "Explanation") -> List[str]:
    """The rule ids an explanation cites, in order of first appearance."""
    found: Dict[str, None] = {}

    def walk(section: "Section") -> None:
        for part in section.parts:
            if part.rule:
                found.setdefault(part.rule)
        for sub in section.sections:
            walk(sub)
    for section in report.sections:
        walk(section)
    if report.fault is not None and report.fault.rule:
        found.setdefault(report.fault.rule)
    return list(found)


def _legend(report: "Explanation") -> str:
    """The cited rules with their titles from the catalogue, after the explanation."""
    from molrec_raw import rules

    lines = ["", "rules cited ('molrec-raw explain --rule ID' prints one in full):"]
    for rule_id in _cited_rules(report):
        try:
            title = rules.lookup(rule_id).title
        except rules.UnknownRuleError:
            title = "(not in the rule catalogue)"
        lines.append(f"  {rule_id:24} {title}")
    return "\n".join(lines) if len(lines) > 2 else ""


def run_explain(args: argparse.Namespace) -> int:
    """Exit 0 when the value is explained to its end, 1 when the explanation ends in a fault
    (something a reader refuses), 2 on a usage error (an unknown rule id among them)."""
    if args.rule is not None:
        return _explain_rule(args)
    if args.path is None:
        raise MolrecError("give a record PATH to explain (or --rule ID for a rule of the catalogue)")
    from molrec_raw.collection.inspection import explain_key, is_collection_path

    if is_collection_path(args.path):
        if args.chunk is not None or args.frame is not None:
            raise MolrecError("a collection's values are explained by key: PATH KEY with KEY meta, index, ff, "
                              "r/N, s/N or f/J (no --chunk, no --frame)")
        report = explain_key(args.path, args.node)
    else:
        from molrec_raw.record.explain import explain

        report = explain(args.path, args.node, chunk=args.chunk, frame=args.frame)
    print(json.dumps(report.to_json(), indent=1, ensure_ascii=False) if args.json else report.text() + _legend(report))
    return 1 if report.fault is not None else 0


def run_dump(args: argparse.Namespace) -> int:
    from molrec_raw.conformance import canonical_bytes
    from molrec_raw.conformance.dump import dump_path

    sys.stdout.buffer.write(canonical_bytes(dump_path(args.path)))
    sys.stdout.flush()
    return 0


def run_conform(args: argparse.Namespace) -> int:
    from molrec_raw.conformance.runner import command_reader, run_corpus

    from molrec_raw.conformance import default_corpus

    corpus = args.corpus if args.corpus is not None else default_corpus()
    if not (Path(corpus) / "index.json").is_file():
        raise MolrecError(f"{corpus}: not a conformance corpus (no index.json)")
    shown = (lambda o: print(o.line(), flush=True)) if args.verbose else (
        lambda o: None if not o.failed else print(o.line(), flush=True))
    outcomes = run_corpus(Path(corpus), command_reader(args.reader, args.timeout), only=args.case,
                          strict_rules=args.strict_rules, progress=shown)
    failed = sum(o.failed for o in outcomes)
    skipped = [o for o in outcomes if o.skipped is not None]
    ran = len(outcomes) - len(skipped)
    cases = len({o.case for o in outcomes})
    line = f"{ran - failed}/{ran} passed ({cases} cases: valid ones as a directory and a zip)"
    if skipped:
        extras = sorted({str(o.skipped) for o in skipped})
        line += (f"; {len(skipped)} skipped: the dumper lacks the extra(s) "
                 + ", ".join(f"[{e}] (pip install 'molrec-raw[{e}]')" for e in extras))
    print(line)
    return 1 if failed else 0
