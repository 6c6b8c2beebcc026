"""The reference kit's subcommands: ``explain``, ``dump`` and ``conform``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from molrec_raw.errors import MolrecError


def run_explain(args: argparse.Namespace) -> int:
    from molrec_raw.record.explain import explain

    report = explain(args.path, args.node, chunk=args.chunk, frame=args.frame)
    print(json.dumps(report.to_json(), indent=1, ensure_ascii=False) if args.json else report.text())
    return 0


def run_dump(args: argparse.Namespace) -> int:
    from molrec_raw.conformance import canonical_bytes, dump_record

    sys.stdout.buffer.write(canonical_bytes(dump_record(args.path)))
    sys.stdout.flush()
    return 0


def _default_corpus() -> Optional[Path]:
    from molrec_raw.conformance.build import default_frozen_source

    return default_frozen_source()


def run_conform(args: argparse.Namespace) -> int:
    from molrec_raw.conformance.runner import command_reader, run_corpus

    corpus = args.corpus if args.corpus is not None else _default_corpus()
    if corpus is None:
        raise MolrecError("no corpus here: give --corpus DIR (tests/conformance/corpus of a molrec_raw checkout)")
    if not (Path(corpus) / "index.json").is_file():
        raise MolrecError(f"{corpus}: not a conformance corpus (no index.json)")
    shown = (lambda o: print(o.line(), flush=True)) if args.verbose else (
        lambda o: None if o.passed else print(o.line(), flush=True))
    outcomes = run_corpus(Path(corpus), command_reader(args.reader, args.timeout), only=args.case,
                          strict_rules=args.strict_rules, progress=shown)
    failed = sum(not o.passed for o in outcomes)
    cases = len({o.case for o in outcomes})
    print(f"{len(outcomes) - failed}/{len(outcomes)} passed ({cases} cases: valid ones as a directory and a zip)")
    return 1 if failed else 0
