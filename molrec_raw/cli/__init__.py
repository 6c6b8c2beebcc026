"""``molrec-raw``: write a sample record, look into, check, pack, unpack, convert and follow
records from the command line; explain their bytes, dump their content in the canonical
JSON form and run another implementation over the conformance corpus.

Argument parsing and printing only; the work is done by the record layer.  The parser
(``parser.py``) imports nothing heavy: each subcommand's module is imported only when it
runs, so ``molrec-raw --help`` stays fast.  Errors print one line (no traceback) and exit 2;
``validate`` exits 1 when it finds violations.  Bare ``molrec-raw`` prints the overview and
exits 2 (no command was given; ``molrec-raw --help`` prints it and exits 0).  Long work (pack, unpack, validate) draws a
progress bar on stderr when stderr is a terminal.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Optional, Sequence

from molrec_raw.cli.parser import build_parser, parse_args
from molrec_raw.cli.progress import ProgressBar
from molrec_raw.errors import MolrecError

__all__ = ["ProgressBar", "build_parser", "main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:  # bare `molrec-raw`: the overview, and a usage status for scripts
        build_parser().print_help()
        return 2
    module, _, function = args.run.partition(":")
    try:
        return int(getattr(importlib.import_module(module), function)(args))
    except BrokenPipeError:  # e.g. `molrec-raw inspect big.mrec | head`: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (MolrecError, OSError) as exc:
        print(f"molrec-raw {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
