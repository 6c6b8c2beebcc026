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

import argparse
import importlib
import os
import re
import sys
from typing import Optional, Sequence, Tuple

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
        _refuse_collection(args)
        return int(getattr(importlib.import_module(module), function)(args))
    except BrokenPipeError:  # e.g. `molrec-raw inspect big.mrec | head`: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (MolrecError, OSError) as exc:
        print(f"molrec-raw {args.command}: error: {for_command_line(path_first(exc, args))}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, or a library's error that slipped through: still one line, exit 2
        if isinstance(exc, ImportError) and "pip install 'molrec-raw[" in str(exc):
            print(f"molrec-raw {args.command}: error: {path_first(exc, args)}", file=sys.stderr)  # a missing extra
            return 2
        lmdb = sys.modules.get("lmdb")
        if lmdb is not None and isinstance(exc, getattr(lmdb, "Error", ())):  # a read the library did not wrap
            from molrec_raw.collection.binding import read_failure

            print(f"molrec-raw {args.command}: error: {read_failure(exc, str(getattr(args, 'path', '')))}",
                  file=sys.stderr)
            return 2
        if os.environ.get("MOLREC_RAW_TRACEBACK"):
            raise
        text = " ".join(str(exc).split()) or "(no message)"
        print(f"molrec-raw {args.command}: internal error: {type(exc).__name__}: {text} (a bug: please "
              "report it; MOLREC_RAW_TRACEBACK=1 shows where)", file=sys.stderr)
        return 2


def path_first(exc: BaseException, args: argparse.Namespace) -> str:
    """An error's message starting with the path it is about (the house rule: every message
    starts with the path): the error's ``store`` (an OSError's file name), else the command's
    input (``PATH``; convert's ``SOURCE``, unpack's ``ZIP``); a message that already starts
    with it is left as it is (safety#messages)."""
    text = str(exc)
    path = getattr(exc, "store", None)
    if isinstance(exc, OSError) and exc.filename is not None:
        path = os.fsdecode(exc.filename)
        text = f"{exc.strerror or exc}" + (f" ({os.fsdecode(exc.filename2)})" if exc.filename2 is not None else "")
    if path is None:
        given = next((getattr(args, a) for a in ("path", "source", "zip") if getattr(args, a, None) is not None), None)
        path = os.fspath(given) if isinstance(given, (str, os.PathLike)) else None
    if not path or text.startswith(path):
        return text
    return f"{path}: {text}"


# The library's messages name its Python arguments (``overwrite=True``); on the command line
# the same advice is a flag or the environment.  One table, applied to every error printed
# (spec-notes/cli.md "Messages name command-line flags").
_FLAGS: Tuple[Tuple[str, str], ...] = (
    (r"\(pass overwrite=True,? or --force(?: on the command line)?\)", "(--force replaces it)"),
    (r"--force / overwrite=True replaces it", "--force replaces it"),
    (r"--force / check=False packs it", "--force packs it"),
    (r"pass lock=False \(or set (\w+)=off\)", r"set \1=off"),
    (r"\boverwrite=True\b", "--force"),
    (r"\bcheck=False\b", "--force"),
    (r"\block=False\b", "MOLREC_RAW_LOCKING=off"),
    (r"\(assume_units=\{'length': 'nm', \.\.\.\}\)", "(--units length=nm,...)"),
)


def for_command_line(message: str) -> str:
    """An error message as the command line says it: Python arguments the library suggests
    (``overwrite=True``, ``check=False``, ``lock=False``, ``assume_units=``) become the flag or
    setting that does the same (``--force``, ``MOLREC_RAW_LOCKING=off``, ``convert --units``)."""
    for pattern, flag in _FLAGS:
        message = re.sub(pattern, flag, message)
    return message


# Subcommands that read a record only (a collection has its own answers in inspect, validate,
# explain, dump, convert and repair).
_RECORD_ONLY = ("cat", "metrics", "plot", "pack")


def _refuse_collection(args: argparse.Namespace) -> None:
    """A collection given to a subcommand that reads records: say what it is and what reads it."""
    from molrec_raw.collection.binding import SUFFIX

    path = getattr(args, "path", None)
    if args.command in _RECORD_ONLY and isinstance(path, str) and path.rstrip("/").endswith(SUFFIX):
        if not os.path.lexists(path):  # nothing there: the one answer to a missing path, not what it would be
            from molrec_raw.record.doors import not_a_record

            raise not_a_record(path, "no such file or directory")
        raise MolrecError(f"{path} is a collection ({SUFFIX}, lmdb#L1), not a record: '{args.command}' reads "
                          "records; look into a collection with 'molrec-raw inspect', 'validate', 'dump' or "
                          "'explain PATH r/N' (record N's meta; s/N its system, f/J a frame), or convert it "
                          "to extended XYZ with 'molrec-raw convert'", store=path, rule="lmdb#L1")


if __name__ == "__main__":
    raise SystemExit(main())
