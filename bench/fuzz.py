#!/usr/bin/env python
"""Fuzz campaign over every parser a record passes through (issue 12 §3).

Targets (tests/fuzz/fuzz_targets.py, shared with the suite's fixed-seed run): ``zip`` (end
records, ZIP64, central and local headers, over honest and lying range sources),
``zarr_json`` (metadata, fill values, codec configurations, read through ``Array``),
``chunk`` / ``shard`` / ``vlen_utf8`` (stored values through every codec chain: gzip and
zstd bombs, lying sizes, shard indexes), ``wal`` (metrics WAL lines),
``typed_meta``, ``sequence_schema``, ``checkpoint`` (a live trajectory's recovery snapshot,
read back through its view), ``frame_bytes`` (a collection's MRF1 values, decoded fresh and
through a layout cache, lmdb#L9-#L17), and whole doors (tests/fuzz/fuzz_whole.py):
``documents`` (the metadata and small values of a record's meta, status, method, observables,
force field, system and frame, through ``read_mrec`` and ``validate``), ``trajectory_layout``
(the trajectory's nodes, through ``MrecReader``), ``collection_values`` (a collection's ``meta``
and per-record values, through ``read_collection``) and ``lmdb_file`` (a ``*.mrec.lmdb`` file
with bytes changed, read in a separate process: a crash is counted, every error must name the
file; outcomes are also counted by kind of edit: cut short, zeroed pages, meta-page flips, page
numbers overwritten in branch, leaf and overflow pages).  Inputs are seed files this package writes, mutated by bit flips, truncation, splicing
and structure-aware edits of length fields.

An escape is anything raised that is not a ``MolrecError`` naming its rule, and also an input an
edit knows to be invalid (a shard index entry past the end, a fixed-size chunk cut short, any
read through a source cutting reads short) that is read without an error or refused under
another rule; ``validate`` calling valid what a read refuses; a collection error not naming
the file.

Input ``i`` of campaign ``--seed s`` is a pure function of (target, s, i), so a campaign
runs in chunks of ``--chunk`` inputs, each in a fresh process (its RSS is its own); the
results (one JSON line per chunk) go to ``--out``/results.jsonl and the summary checks that
the chunks cover ``[0, --inputs)`` once.  An escape's input is saved under
``--out``/escapes/<target>/.

    python bench/fuzz.py [--targets zip,wal] [--inputs 100000] [--chunk 25000] [--seed 1] [--out DIR]
    python bench/fuzz.py --summary DIR            # the table of a finished (or resumed) campaign
    python bench/fuzz.py --engine atheris --targets zip --inputs 20000   # coverage-guided (atheris)

``--engine atheris`` (wheels for Python 3.11-3.13) runs libFuzzer with the molrec_raw modules
instrumented and the same structure-aware mutators as its custom mutator; it counts inputs
the same way.  Already finished chunks are skipped when a campaign is resumed with the same
``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from random import Random
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "fuzz"), str(HERE.parent)]

NAMES = ("zip", "zarr_json", "chunk", "shard", "vlen_utf8", "wal", "typed_meta", "sequence_schema", "checkpoint",
         "frame_bytes", "documents", "trajectory_layout", "collection_values", "lmdb_file")


def _report_line(report: Any, engine: str, kinds: Any = None) -> Dict[str, Any]:
    return {
        "kinds": kinds,  # lmdb_file: outcomes by kind of edit (fuzz_whole.LmdbTally)
        "target": report.target, "seed": report.seed, "start": report.start, "count": report.count,
        "engine": engine, "escapes": report.escapes, "details": report.details,
        "slowest_seconds": report.slowest_seconds, "slowest_input": report.slowest_input,
        "rss_before_kib": report.rss_before_kib, "rss_peak_kib": report.rss_peak_kib,
        "rss_growth_kib": report.rss_growth_kib, "peak_reset": report.peak_reset, "seconds": report.seconds,
        "python": sys.version.split()[0],
    }


def _worker(args: argparse.Namespace) -> int:
    """One chunk of one target in this process; prints its report as one JSON line."""
    if args.engine == "atheris":
        return _atheris_worker(args)
    import fuzz_targets

    target = fuzz_targets.targets()[args.worker]
    report = fuzz_targets.run_campaign(target, args.seed, args.start, args.count, save=args.out / "escapes")
    tally = getattr(target.slots[0].context, "counts", None)
    print(json.dumps(_report_line(report, "mutator", tally)), flush=True)
    return 0


def _atheris_worker(args: argparse.Namespace) -> int:
    """libFuzzer (atheris) with coverage of molrec_raw; our mutators as its custom mutator.
    ``args.count`` inputs are run, then the report is printed and the process ends."""
    import atheris

    with atheris.instrument_imports(include=["molrec_raw"]):
        import molrec_raw  # noqa: F401  (instrumented before the targets import it)
        import fuzz_targets
    target = fuzz_targets.targets()[args.worker]
    fuzz_targets.check_seeds(target)
    report = fuzz_targets.CampaignReport(target.name, args.seed, args.start, 0)
    save = args.out / "escapes"
    report.begin()

    marks: Dict[bytes, Any] = {}  # inputs our mutator knew invalid (libFuzzer hands back plain bytes)

    def one(data: bytes) -> None:
        index = args.start + report.count
        data = marks.pop(data, data)
        report.add(index, fuzz_targets.outcome(target, data), data, save, f"atheris-{args.seed}-{index}.bin")
        if report.count >= args.count:
            report.end()
            print(json.dumps(_report_line(report, "atheris")), flush=True)
            os._exit(0)  # libFuzzer would run on; the report is complete

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = Random(seed)
        if rng.random() < 0.2:  # libFuzzer's own byte mutator, now and then
            return bytes(atheris.Mutate(data, max_size))
        made = fuzz_targets.mutate_input(target, rng, data)
        if len(made) <= max_size and hasattr(made, "rule"):
            if len(marks) > 4096:
                marks.clear()
            marks[bytes(made)] = made
        return made[:max_size]

    corpus = Path(tempfile.mkdtemp(prefix=f"molrec-atheris-{target.name}-"))
    for number, data in enumerate(target.seed_inputs() + target.seed_inputs(valid=False)):
        (corpus / f"seed-{number}").write_bytes(data)
    atheris.Setup([sys.argv[0], f"-seed={args.seed}", "-max_len=4194304", "-rss_limit_mb=0",
                   "-timeout=30", "-print_final_stats=0", str(corpus)],
                  one, custom_mutator=mutate)
    atheris.Fuzz()
    return 0


def _finished(results: Path) -> List[Dict[str, Any]]:
    if not results.exists():
        return []
    return [json.loads(line) for line in results.read_text().splitlines() if line.strip()]


SLOWEST_SECONDS = 1.0  # no input may take longer (the suite asserted it before issue 23: a timing, so here)


def _kinds_table(tallies: List[Any]) -> None:
    """The lmdb_file target's outcomes by kind of edit, summed over chunks: read, refused under
    each rule, deaths of the reading process, foreign exceptions."""
    counts: Dict[str, Dict[str, int]] = {}
    for tally in tallies:
        for kind, row in (tally or {}).items():
            into = counts.setdefault(kind, {})
            for what, number in row.items():
                into[what] = into.get(what, 0) + number
    if not counts:
        return
    print("    by kind of edit:")
    for kind, row in sorted(counts.items()):
        cells = ", ".join(f"{what} {number}" for what, number in sorted(row.items()))
        print(f"    {kind:16} {sum(row.values()):>6}  {cells}")


def _summary(out: Path, expected: Any = None) -> int:
    """Per target and engine: inputs (chunks must not overlap), escapes by kind, the largest
    RSS growth of a chunk, the slowest input.  ``expected``: (engine, seed, inputs) of the
    campaign just run, whose rows must have every input."""
    rows: Dict[Any, List[Dict[str, Any]]] = {}
    for line in _finished(out / "results.jsonl"):
        rows.setdefault((line["target"], line["engine"], line["seed"]), []).append(line)
    print(f"{'target':16} {'engine':8} {'seed':>4} {'inputs':>8} {'escapes':>7} {'RSS growth':>11} "
          f"{'slowest':>9}  {'CPU s':>6}")
    status = 0
    for (target, engine, seed), lines in sorted(rows.items()):
        spans = sorted((line["start"], line["start"] + line["count"]) for line in lines)
        if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            print(f"{target}: overlapping chunks {spans}", file=sys.stderr)
            status = 1
        count = sum(line["count"] for line in lines)
        escapes: Dict[str, int] = {}
        for line in lines:
            for kind, numbers in line["escapes"].items():
                escapes[kind] = escapes.get(kind, 0) + len(numbers)
        growth = max(line["rss_growth_kib"] for line in lines) / 1024
        slow = max(lines, key=lambda line: line["slowest_seconds"])
        print(f"{target:16} {engine:8} {seed:>4} {count:>8} {sum(escapes.values()):>7} {growth:>8.1f} MiB "
              f"{slow['slowest_seconds'] * 1000:>6.1f} ms  {sum(line['seconds'] for line in lines):>6.0f}"
              f"   (slowest: input {slow['slowest_input']})")
        for kind, number in sorted(escapes.items()):
            print(f"    {number:>7}  {kind}")
        _kinds_table([line.get("kinds") for line in lines])
        if slow["slowest_seconds"] >= SLOWEST_SECONDS:
            print(f"    input {slow['slowest_input']} took {slow['slowest_seconds']:.2f} s, over {SLOWEST_SECONDS} s",
                  file=sys.stderr)
            status = 1
        if expected is not None and expected[:2] == (engine, seed) and count < expected[2]:
            print(f"    only {count} of {expected[2]} inputs ran", file=sys.stderr)
            status = 1
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(NAMES))
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per target")
    parser.add_argument("--chunk", type=int, default=25_000, help="inputs per worker process")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engine", choices=("mutator", "atheris"), default="mutator")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "molrec-fuzz")
    parser.add_argument("--summary", type=Path, help="print the table of the campaign in this directory")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # the target of one chunk (a child process)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.summary is not None:
        return _summary(args.summary)
    if args.worker:
        return _worker(args)
    names = [n for n in args.targets.split(",") if n]
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"unknown targets {unknown} (known: {', '.join(NAMES)})")
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = {(r["target"], r["engine"], r["seed"], r["start"]) for r in _finished(results)}
    for name in names:
        for start in range(0, args.inputs, args.chunk):
            if (name, args.engine, args.seed, start) in done:
                continue
            count = min(args.chunk, args.inputs - start)
            command = [sys.executable, __file__, "--worker", name, "--engine", args.engine, "--seed", str(args.seed),
                       "--start", str(start), "--count", str(count), "--out", str(args.out)]
            began = time.time()
            logs = args.out / "logs"
            logs.mkdir(exist_ok=True)
            with (logs / f"{name}-{args.engine}-{args.seed}-{start}.log").open("w") as log:
                finished = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True)
            lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
            if finished.returncode != 0 or not lines:
                print(f"{name} [{start}, {start + count}): worker failed ({finished.returncode})", file=sys.stderr)
                return 1
            with results.open("a") as fh:
                fh.write(lines[-1] + "\n")
            line = json.loads(lines[-1])
            print(f"{name:16} [{start:>6}, {start + line['count']:>6}) {sum(map(len, line['escapes'].values()))} escapes, "
                  f"slowest {line['slowest_seconds'] * 1000:.1f} ms, RSS +{line['rss_growth_kib'] / 1024:.1f} MiB, "
                  f"{time.time() - began:.0f} s", flush=True)
    return _summary(args.out, (args.engine, args.seed, args.inputs))


if __name__ == "__main__":
    sys.exit(main())
