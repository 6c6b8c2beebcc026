"""Regenerate ``expected/*.txt``: what each program of ``programs/`` prints under molrs.

Run with the Python that has molrs (0.19, CPython >= 3.12), from the repository root::

    PYTHONPATH=$PWD /work/venv312/bin/python tests/dropin/regenerate_expected.py

The files are the test data of the Python 3.10 job, where molrs has no wheel and the
programs run against the drop-in alone (test_molrs_dropin.py).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dropin_harness as harness  # noqa: E402


def main() -> None:
    import molrs

    harness.EXPECTED.mkdir(exist_ok=True)
    for program in harness.PROGRAMS:
        with tempfile.TemporaryDirectory() as tmp:
            harness.expected_path(program).write_text(harness.run(program, molrs, Path(tmp)), encoding="utf-8")
        print("wrote", harness.expected_path(program).name)


if __name__ == "__main__":
    main()
