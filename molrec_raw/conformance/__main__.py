"""``python -m molrec_raw.conformance build DIR [--frozen SRC]`` builds the corpus;
``freeze-zarr-python DIR`` lays the frozen zarr-python cases out anew (zarr-python 3.4.2)
and prints the digests to pin in ``cases/zarr_python.py``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m molrec_raw.conformance")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="write the conformance corpus into DIR (deterministic)")
    p.add_argument("dir", type=Path)
    p.add_argument("--frozen", type=Path, default=None,
                   help="the corpus holding the frozen cases (default: the one shipped in the package, "
                        "molrec_raw/conformance/corpus)")
    p = sub.add_parser("freeze-zarr-python", help="lay out the zarr-python cases into DIR and print their digests")
    p.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        from molrec_raw.conformance.build import BuildError, build_corpus
        try:
            report = build_corpus(args.dir, frozen_from=args.frozen)
        except BuildError as exc:
            print(f"build: error: {exc}", file=sys.stderr)
            return 2
        print(f"{report.path}: {report.valid} valid and {report.invalid} invalid cases")
        return 0
    from molrec_raw.conformance.build import case_digest
    from molrec_raw.conformance.cases.zarr_python import LAYOUTS, lay_out
    for name in LAYOUTS:
        lay_out(name, args.dir / name)
        print(f'    "{name}": "{case_digest(args.dir / name)}",')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
