#!/usr/bin/env python
"""Mutants of the checks that protect data (issue 36): each one an exact edit of one check
in a COPY of the package, run against the tests that guard it; every mutant must be killed.

A mutant is ``Mutant(name, file, old, new, guards)``: in ``file`` (relative to the repository)
the text ``old`` — found exactly once, else the script stops before running anything, so the
list cannot rot silently — becomes ``new``; ``guards`` are pytest node ids that must fail on
it.  Adding one is three lines in ``MUTANTS``.

The working tree is never edited: each worker copies ``molrec_raw/`` into a temporary folder
and runs pytest there (that folder first on ``sys.path`` and ``PYTHONPATH``, so a test's
child processes import the mutant too; the script checks the copy is what is imported).  A
mutant is *killed* when pytest reports a failing test (exit status 1), *survived* when its
guards pass, and an *error* otherwise (a guard that does not collect, a timeout): survivors,
errors and edits that do not apply all make the exit status 1.  Before the mutants, the
guards run once against the unmutated copy and must pass (a guard that fails anyway proves
nothing).

    python bench/mutants.py [--workers 2] [--only NAME ...] [--list] [--timeout 600]

CI runs it after the campaigns (``.ci/run``); tests/test_mutants_list.py checks in the
default suite that every edit applies.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "molrec_raw"


class Mutant(NamedTuple):
    name: str
    file: str          # relative to the repository
    old: str           # exact text, found exactly once in ``file``
    new: str
    guards: Tuple[str, ...]  # pytest node ids (relative to the repository) that must fail


def M(name: str, file: str, old: str, new: str, *guards: str) -> Mutant:
    return Mutant(name, file, old, new, tuple(guards))


FB = "molrec_raw/collection/frame_bytes.py"
LC = "molrec_raw/collection/layout_cache.py"  # LayoutCache.quick (the quick decode)
QR = "tests/collection/test_quick_reads.py"

MUTANTS: List[Mutant] = [
    # -- the collection's quick read path (LayoutCache.quick) -------------------------------------------
    M("quick: a string column's count unchecked", LC,
      "if strings is None or len(strings) != strung.count:", "if strings is None:",
      f"{QR}::test_lmdb_L12_a_quick_read_refuses_a_string_column_of_another_count"),
    M("quick: meta not checked to be an object", LC,
      'or "meta" in found and type(found["meta"]) is not dict or (', "or (",
      f"{QR}::test_lmdb_L17_a_quick_read_refuses_a_meta_that_is_not_an_object"),
    M("quick: the header's zero padding unchecked", LC,
      "if payload != stop and value.count(0, stop, payload) != payload - stop:\n            return None\n        strings",
      "if False:\n            return None\n        strings", f"{QR}::test_lmdb_L17_a_quick_match_is_exactly_the_decoded_value"),
    M("quick: buffers inside the value unchecked", LC,
      "if payload + layout.need > end:\n            return None\n        return layout, head",
      "if False:\n            return None\n        return layout, head",
      f"{QR}::test_lmdb_L17_quick_reads_refuse_damage_as_the_general_reads"),
    M("quick: unknown top keys accepted", LC, "not found.keys() <= _TOP_KEYS or ", "",
      f"{QR}::test_lmdb_L17_a_quick_read_refuses_an_unknown_top_key"),
    M("quick: an update's meta keys unchecked", "molrec_raw/collection/reader.py",
      "meta.keys() == self._meta_tags.keys():\n            return layout.makers",
      "True:\n            return layout.makers",
      f"{QR}::test_lmdb_L15_a_quick_read_refuses_an_update_with_other_meta_keys"),
    # -- frame bytes ----------------------------------------------------------------------------------------
    M("frame bytes: a bool byte other than 0/1 accepted", FB, "if count and int(flags.max()) > 1:", "if False:",
      "tests/collection/test_frame_bytes.py::test_lmdb_L11_L13_refuses_a_bool_buffer_that_is_not_0_or_1"),
    M("collection: a missing frame not refused", "molrec_raw/collection/reader.py",
      "if raw is None:\n            raise _fail(CorruptDataError, f\"frame {k} of record {r}",
      "if False:\n            raise _fail(CorruptDataError, f\"frame {k} of record {r}",
      f"{QR}::test_lmdb_L8_a_missing_frame_is_refused_naming_its_key"),
    # -- checksums --------------------------------------------------------------------------------------------
    M("crc32c codec: a mismatch accepted", "molrec_raw/zarr/codecs/crc32c_codec.py",
      "if actual != stored:", "if False:", "tests/zarr_layer/test_codecs_kat.py::test_crc32c_mismatch_is_refused"),
    M("chunk reads: the crc32c of a chunk read in place unchecked", "molrec_raw/zarr/chunkread.py",
      "if stored != actual:\n            raise axis.array._context(ChecksumMismatchError(",
      "if False:\n            raise axis.array._context(ChecksumMismatchError(",
      "tests/trajectory/test_read_engine.py::test_zarr_5_5_a_plain_chunk_read_in_place_checks_its_checksum"),
    M("zip: an entry's CRC-32 unchecked on a whole read", "molrec_raw/zarr/zipstore.py",
      "if zlib.crc32(data) != entry.crc:", "if False:",
      "tests/zarr_layer/test_zipstore.py::test_every_truncation_and_byte_flip_raises_only_own_errors"),
    M("zip: an entry name escaping the archive accepted", "molrec_raw/zarr/zipstore.py",
      "validate_key(name[:-1] if is_dir else name)\n            except InvalidKeyError:",
      "pass\n            except InvalidKeyError:",
      "tests/zarr_layer/test_zipstore.py::test_hostile_names_refused_at_open"),
    # -- range checks ---------------------------------------------------------------------------------------
    M("shard index: an entry past the shard's end accepted", "molrec_raw/zarr/codecs/sharding.py",
      "return present & ((ends > shard_size) | (ends < index[:, 0]))", "return present & (ends < index[:, 0])",
      "tests/zarr_layer/test_hostile.py::test_zarr_v3_subset_7_a_shard_index_entry_past_the_end_is_refused_by_the_index_check"),
    # (not listed: sharding.py's "a short inner chunk read" check — the index check above
    # already refuses every entry past the shard's end, so no test can reach it alone)
    # -- the landed index (trajectory#10, zarr-v3-subset#7) -------------------------------------------------
    M("landed index: an older index accepted", "molrec_raw/zarr/chunkread.py",
      "if end is not None and sharding.index_end(index) < end:", "if False:",
      "tests/powercut/test_landed_index.py::test_trajectory_10_no_reordered_state_reads_a_stale_index_as_data[suite]"),
    M("landed index: a landed shard that is not stored accepted", "molrec_raw/zarr/chunkread.py",
      "if end is not None:\n                raise CorruptDataError(f\"shard {list(coords)} was landed in",
      "if False:\n                raise CorruptDataError(f\"shard {list(coords)} was landed in",
      "tests/powercut/test_landed_index.py::test_trajectory_10_no_reordered_state_reads_a_stale_index_as_data[suite]"),
    # -- fsyncs -------------------------------------------------------------------------------------------------
    M("store: a durable value written without fsync", "molrec_raw/zarr/store.py",
      "if durable:\n                    ops.fsync(fd)", "if False:\n                    ops.fsync(fd)",
      "tests/zarr_layer/test_stores.py::test_zarr_durable_replace_fsyncs_the_new_bytes_before_the_rename_and_the_directory_after"),
    M("fileops: a directory's entries not made durable", "molrec_raw/zarr/fileops.py",
      "fd = os.open(path, os.O_RDONLY | getattr(os, \"O_DIRECTORY\", 0) | _CLOEXEC)\n        try:\n            os.fsync(fd)",
      "fd = os.open(path, os.O_RDONLY | getattr(os, \"O_DIRECTORY\", 0) | _CLOEXEC)\n        try:\n            pass",
      "tests/zarr_layer/test_stores.py::test_zarr_durable_replace_fsyncs_the_new_bytes_before_the_rename_and_the_directory_after"),
    # -- the unit table -----------------------------------------------------------------------------------------
    M("units: the angstrom a hundredth of a nm", "molrec_raw/record/units.py",
      '"angstrom": 0.1, "nm": 1.0', '"angstrom": 0.01, "nm": 1.0', "tests/integrations/test_conventions.py::test_derived_units_stated_directly_convert_13_5"),
    M("units: kcal/mol as 4.0 kJ/mol", "molrec_raw/record/units.py",
      '"kcal/mol": 4.184', '"kcal/mol": 4.0', "tests/integrations/test_conventions.py::test_derived_units_stated_directly_convert_13_5"),
    M("units: kelvin a hundredth off", "molrec_raw/record/units.py",
      '"temperature": {"K": 1.0, "kelvin": 1.0}', '"temperature": {"K": 1.0, "kelvin": 1.01}',
      "tests/integrations/test_unit_matrix.py::test_unit_matrix_values_in_the_readers_units_13_5[stated-mdanalysis]"),
    M("units: a temperature with an offset converted as a factor", "molrec_raw/record/units.py",
      "    if affine:\n", "    if False:\n",
      "tests/integrations/test_unit_matrix.py::test_a_temperature_scale_with_an_offset_is_refused_naming_the_rule_13_5[degC]"),
    # -- opening a collection file (lmdb#L18, lmdb#L19): the structure check before liblmdb maps it --------
    M("structure: the check before the map skipped", "molrec_raw/collection/binding.py",
      "if not writable and check_structure:", "if False:",
      "tests/collection/test_structure.py::test_lmdb_L18_a_copy_cut_short_is_refused_not_a_sigbus",
      "tests/fuzz/test_fuzz.py::test_fixed_seed_fuzz_run_raises_only_molrec_errors[suite-lmdb_file]"),
    # -- the codec threads' runs of chunks unshuffled together (zarr-v3-subset#5.6) ------------------------
    M("runs: a target not checked to follow the one before it", "molrec_raw/zarr/codecs/batch.py",
      "\n                or _address(job.target) != start + count * size):", "):",
      "tests/zarr_layer/test_codec_threads.py::test_zarr_5_6_chunks_into_targets_that_do_not_follow_one_another_are_not_run_together"),
    M("runs: a part of a chunk taken as the first of a run", "molrec_raw/zarr/codecs/batch.py",
      "and pipeline.direct and first.whole and", "and pipeline.direct and",
      "tests/zarr_layer/test_codec_threads.py::test_zarr_5_6_chunks_into_targets_that_do_not_follow_one_another_are_not_run_together"),
    # -- the drop-in's values -----------------------------------------------------------------------------
    M("drop-in: an f64 MetaValue rounded to 6 places", "molrec_raw/molrs/core.py",
      "self._value = _normalized(dtype, _thaw(value))",
      "self._value = _normalized(dtype, round(value, 6) if dtype == 'f64' else _thaw(value))",
      "tests/dropin/test_molrs_dropin.py::test_issue30_the_dropin_prints_what_molrs_printed"),
]


def check_applies(mutants: Sequence[Mutant] = MUTANTS, root: Path = ROOT) -> List[str]:
    """Every problem of the list: an edit whose old text is not found exactly once, a name
    used twice, a mutant without guards or with a guard file that does not exist."""
    problems, seen = [], set()
    for m in mutants:
        if m.name in seen:
            problems.append(f"{m.name}: the name is used twice")
        seen.add(m.name)
        if not m.guards:
            problems.append(f"{m.name}: no guard tests")
        for guard in m.guards:
            if not (root / guard.split("::")[0]).is_file():
                problems.append(f"{m.name}: guard file {guard.split('::')[0]} does not exist")
        path = root / m.file
        if not path.is_file():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        found = path.read_text(encoding="utf-8").count(m.old)
        if found != 1:
            problems.append(f"{m.name}: {m.file}: the old text is found {found} times, not once: {m.old!r}")
        if m.old == m.new:
            problems.append(f"{m.name}: the new text is the old one")
    return problems


class Worker:
    """A private copy of the package; one mutant at a time."""

    def __init__(self, base: Path, index: int) -> None:
        self.dir = base / f"w{index}"
        shutil.copytree(ROOT / PACKAGE, self.dir / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        self.stamp = time.time() + 10 * index  # distinct mtimes: a cached .pyc of an edit is never reused
        self.env = dict(os.environ, PYTHONPATH=str(self.dir))
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def _write(self, relative: str, text: str) -> None:
        target = self.dir / relative
        target.write_text(text, encoding="utf-8")
        self.stamp += 2
        os.utime(target, (self.stamp, self.stamp))

    def imported_from(self) -> str:
        return subprocess.run([sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"], cwd=self.dir,
                              env=self.env, capture_output=True, text=True, check=True).stdout.strip()

    def pytest(self, guards: Sequence[str], timeout: float) -> Tuple[Optional[int], str, float]:
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-m", "", "--rootdir", str(ROOT),
                   "-c", str(ROOT / "pyproject.toml"), *[str(ROOT / g) for g in guards]]
        started = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=self.dir, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out", time.perf_counter() - started
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        first = next((line.split(" - ")[0] for line in lines if line.startswith(("FAILED", "ERROR"))), "")
        last = (lines[-1] if lines else done.stderr.strip()[-200:]) + (f"; {first}" if first else "")
        return done.returncode, last, time.perf_counter() - started

    def run(self, m: Mutant, timeout: float) -> Tuple[str, str, float]:
        relative = m.file[len(PACKAGE) + 1:] if m.file.startswith(PACKAGE + "/") else None
        assert relative is not None, f"{m.name}: only files of {PACKAGE}/ are mutated"
        original = (ROOT / m.file).read_text(encoding="utf-8")
        self._write(m.file, original.replace(m.old, m.new, 1))
        try:
            code, last, took = self.pytest(m.guards, timeout)
        finally:
            self._write(m.file, original)
        outcome = {1: "killed", 0: "survived"}.get(code, "error") if code is not None else "error"
        return outcome, last, took


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="mutants run at once, each in its own copy")
    parser.add_argument("--only", nargs="+", default=None, help="run only the mutants whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="list the mutants and their guards, run nothing")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per pytest run")
    args = parser.parse_args(argv)
    problems = check_applies()
    if problems:
        print("the list of mutants does not apply to this tree:", *problems, sep="\n  ")
        return 1
    chosen = [m for m in MUTANTS if args.only is None or any(part in m.name for part in args.only)]
    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.file}: {m.old!r} -> {m.new!r}\n  guards: {', '.join(m.guards)}")
        return 0
    with tempfile.TemporaryDirectory(prefix="molrec-mutants-") as base:
        workers = [Worker(Path(base), i) for i in range(max(1, args.workers))]
        for worker in workers:
            where = worker.imported_from()
            if not where.startswith(str(worker.dir)):
                print(f"the copy is not what is imported ({where}): is {PACKAGE} first on sys.path elsewhere?")
                return 1
        guards = sorted({g for m in chosen for g in m.guards})
        code, last, took = workers[0].pytest(guards, args.timeout * 2)
        print(f"baseline (no mutant, {len(guards)} guards): {last} [{took:.0f} s]", flush=True)
        if code != 0:
            print("the guards fail without a mutant: fix them first")
            return 1
        free = list(workers)
        lock = threading.Lock()
        results: Dict[str, str] = {}

        def one(m: Mutant) -> None:
            with lock:
                worker = free.pop()
            try:
                outcome, last, took = worker.run(m, args.timeout)
            finally:
                with lock:
                    free.append(worker)
            with lock:
                results[m.name] = outcome
                print(f"{outcome:8} {m.name}  ({last}) [{took:.0f} s]", flush=True)

        with ThreadPoolExecutor(len(workers)) as pool:
            list(pool.map(one, chosen))
    killed = sum(1 for outcome in results.values() if outcome == "killed")
    print(f"{killed} of {len(chosen)} mutants killed" + ("" if killed == len(chosen) else
          f"; not killed: {', '.join(n for n, o in results.items() if o != 'killed')}"))
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
