"""The ``molrec-raw`` argument parser: argparse only, no record-layer import.  Each subcommand
names its implementation as ``"module:function"``; ``main`` imports it when it runs.

Every subcommand has a description and every argument a help text (a test walks the
parser).  ``parse_args`` is what ``main`` calls: it lets a span option take a value that
starts with a minus (``--frames -1:``), which argparse alone reads as an unknown option.
"""
from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from molrec_raw import __version__

__all__ = ["build_parser", "parse_args", "SPAN_OPTIONS"]

_SPAN = re.compile(r"(-?\d+)?(:(-?\d+)?)?")
# Options whose value is a span A:B; argparse takes "-1:" for an option, parse_args joins it.
SPAN_OPTIONS = ("--frames", "--rows")


def _span(text: str, what: str) -> Tuple[Optional[int], bool, Optional[int]]:
    """``A:B`` (either side may be empty, negatives count from the end) or one integer ``A``:
    ``(A, has_colon, B)``."""
    match = _SPAN.fullmatch(text.strip())
    if match is None or not text.strip():
        raise argparse.ArgumentTypeError(f"{what} is A:B, A:, :B or N with integers (negatives count from the "
                                         f"end), not {text!r}")
    start, colon, stop = match[1], match[2], match[3]
    return (None if start is None else int(start)), colon is not None, (None if stop is None else int(stop))


def _frames(text: str) -> str:
    """``--frames``: checked here, handed on as written (``integrations.convert.parse_frames``
    turns it into the slice: ``N`` alone is frame N)."""
    _span(text, "--frames")
    return text


class _OneOrMany(argparse.Action):
    """A positional of one or more values: one is stored as itself, several as a list
    (``convert``'s inputs: one source, or many into a directory of shards)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, values[0] if len(values) == 1 else list(values))


def _rows(text: str) -> slice:
    """``--rows``: ``N`` is the first N rows, ``A:B`` rows A to B (Python slice rules)."""
    start, colon, stop = _span(text, "--rows")
    if not colon:
        if start is None or start < 0:
            raise argparse.ArgumentTypeError(f"--rows N takes a count of rows (N >= 0), not {text!r}; "
                                             "A:B selects rows A to B")
        return slice(0, start)
    if start is not None and stop is not None and (start >= 0) == (stop >= 0) and stop <= start:
        raise argparse.ArgumentTypeError(f"--rows {text} selects no rows ({stop} is not past {start}); "
                                         "A:B selects rows A to B-1")
    return slice(start, stop)


def _pixels(text: str) -> Tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"a size is WIDTHxHEIGHT in pixels, e.g. 1200x800, not {text!r}")
    return int(width), int(height)


_WHERE = "a record: *.mrec, *.mrec.zip, or a URL (https://.../x.mrec.zip, s3://.../x.mrec with molrec-raw[remote])"
_OR_COLLECTION = " - or a collection, *.mrec.lmdb (molrec-raw[lmdb])"
_LOCAL = "a record directory (*.mrec) on this machine"
_EXIT = "Exit status: 0 done, 2 usage error or unreadable input (one line on stderr)."


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, wrapping each paragraph of a description on its own; a line
    that starts with two spaces (an example) is printed as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line.startswith("  ") or not line.strip() else
                         textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent,
                                       break_on_hyphens=False, break_long_words=False)
                         for line in text.splitlines())

    def _split_lines(self, text: str, width: int) -> List[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)


def _follow_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--follow", action="store_true", help=what)
    p.add_argument("--interval", type=float, default=0.5, metavar="S", help="seconds between polls when following "
                   "(default 0.5)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop following after this many seconds without news (a killed writer never says it ended)")
    p.add_argument("--stop-after", type=float, default=None, metavar="S",
                   help="stop following after this many seconds in all")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every subcommand, its description and its arguments."""
    parser = argparse.ArgumentParser(
        prog="molrec-raw", formatter_class=_Formatter,
        description="MolRec records on Zarr V3: write a sample, look into, check, repair, pack, convert and "
                    "follow records; explain their bytes; run another implementation over the conformance corpus.",
        epilog="Run 'molrec-raw COMMAND --help' for a command's arguments; start with 'molrec-raw demo demo.mrec'.\n"
               "Bare 'molrec-raw' prints this overview and exits 2 (no command given).")
    parser.add_argument("--version", action="version", version=f"molrec-raw {__version__}",
                        help="print the version of molrec-raw and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands",
                                help="one of the commands below ('molrec-raw COMMAND --help' for its arguments)")

    def command(name: str, summary: str, description: str, run: str) -> argparse.ArgumentParser:
        """A subcommand: ``summary`` for the overview, ``description`` for its own --help
        (with the exit statuses: the common ones unless it states its own)."""
        if "Exit status" not in description:
            description = f"{description}\n\n{_EXIT}"
        p = sub.add_parser(name, help=summary, description=description,
                           formatter_class=_Formatter)
        p.set_defaults(run=run)
        return p

    p = command("demo", "write a sample record (a small MD run) and inspect it",
                "Write a sample record - 32 waters, 300 frames, a force field, per-step meta, metrics and a changing "
                "cell - through the public API, print its tree, and draw its picture when matplotlib is installed. "
                "Refuses a PATH that exists unless --force.", "molrec_raw.cli.demo:run_demo")
    p.add_argument("path", help="the record to create, e.g. demo.mrec (must not exist)")
    p.add_argument("--frames", type=int, default=300, help="frames of the sample run (default 300)")
    p.add_argument("--force", action="store_true", help="replace a record already at PATH")

    p = command("inspect", "a readable tree of a record; --follow redraws it as a run commits",
                "Print a record's tree - groups with their attributes, arrays with shape, dtype, chunk and shard "
                "geometry, codecs and stored bytes - and the trajectory summary (frames, steps, times, cell "
                "updates, blocks, an uncommitted tail).  Percent-encoded names (force-field tables, metrics "
                "series) are shown decoded with the stored name beside them.  A collection (*.mrec.lmdb): its "
                "document, declaration, index columns, counts and keys by kind.", "molrec_raw.cli.inspect:run_inspect")
    p.add_argument("path", help=_WHERE + _OR_COLLECTION)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _follow_options(p, "redraw the summary after every commit until the run is over")

    p = command("validate", "every violated rule (exit 0 clean, 1 violations, 2 unreadable)",
                "Check a record against every rule this library knows and print each violation as "
                "RULE<TAB>NODE<TAB>MESSAGE ('molrec-raw explain --rule RULE' says what a rule requires).  A "
                "collection (*.mrec.lmdb) is checked record by record, every frame resolved as a reader does.\n\n"
                "Exit status: 0 valid, 1 violations found, 2 usage error or unreadable record.",
                "molrec_raw.cli.check:run_validate")
    p.add_argument("path", help=_WHERE + _OR_COLLECTION)

    p = command("repair", "restore a crashed record in place (exit 0 when sound afterwards)",
                "Restore a record a killed writer left behind: roll a torn trajectory commit back to its last "
                "committed frame (or its checkpoint), truncate a torn metrics WAL tail, remove stray temporary "
                "files.\n\nExit status: 0 sound afterwards, 1 not sound, 2 usage error or unreadable record.",
                "molrec_raw.cli.check:run_repair")
    p.add_argument("path", help=_LOCAL + " (a zip is read-only: readers recover it without writing)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")

    p = command("salvage", "a new record of every frame a damaged one still reads",
                "Write a NEW record OUT holding every trajectory frame of DAMAGED that reads intact (its values bit "
                "for bit, its steps, times, cell and per-step meta, under DAMAGED's own sequence schema) and every "
                "other section that reads; DAMAGED is only read.  Prints each run of frames lost with the nodes that "
                "refuse it, each section lost and every damaged chunk (the same survey as validate and repair).  "
                "OUT's meta notes its origin (modules['molrec_raw.salvage']).  Refuses an OUT that exists unless "
                "--force.\n\nExit status: 0 nothing was lost, 1 OUT written but frames, sections or chunks were "
                "lost, 2 usage error or unreadable record (nothing written).", "molrec_raw.cli.salvage:run_salvage")
    p.add_argument("damaged", help=_WHERE)
    p.add_argument("out", help="the new record to write (*.mrec, or *.mrec.zip: packed)")
    p.add_argument("--force", action="store_true", help="replace a record already at OUT (never DAMAGED itself)")
    p.add_argument("--json", action="store_true", help="the report as JSON")

    p = command("pack", "<stem>.mrec -> <stem>.mrec.zip",
                "Pack a record directory into the at-rest form <stem>.mrec.zip beside it: stored (uncompressed) "
                "entries named relative to the root, sorted, ZIP64 when needed.  Refuses a record that fails "
                "validation and an existing zip unless --force.", "molrec_raw.cli.pack:run_pack")
    p.add_argument("path", help="the record directory to pack (<stem>.mrec)")
    p.add_argument("--remove-source", action="store_true",
                   help="remove the directory once the zip is complete and verified (default: keep it)")
    p.add_argument("--force", action="store_true",
                   help="pack a record that fails validation, and replace a zip already there")

    p = command("unpack", "a packed record back into a directory",
                "Extract a packed record (*.mrec.zip) into a directory.  Every entry name is checked before "
                "anything is written (no absolute paths, no '..', no duplicates).", "molrec_raw.cli.pack:run_unpack")
    p.add_argument("zip", help="the packed record (*.mrec.zip)")
    p.add_argument("dest", help="the directory to extract into (must not exist, or be empty), e.g. run.mrec")
    p.add_argument("--force", action="store_true", help="replace a record already at DEST")

    p = command("convert", "a trajectory MDAnalysis reads -> a record, a record -> any format it writes; "
                "extxyz / ASE db <-> a collection",
                "Convert through MDAnalysis (pip install 'molrec-raw[mdanalysis]'): any trajectory it reads into a "
                "record, or a record into any format it writes (chosen by the target's extension).\n\n"
                "Collections (*.mrec.lmdb, pip install 'molrec-raw[lmdb]'): extended XYZ, an ASE database (*.db) "
                "or any file ASE reads into a collection, each image a record (--group-by KEY: consecutive images "
                "of one atoms.info[KEY] as one record of many frames), in ASE's units (angstrom, eV; pip install "
                "'molrec-raw[ase]'); a collection to extended XYZ; a record's frames into a collection, each frame "
                "a record (--frames-as-records).\n\n"
                "Examples:\n"
                "  molrec-raw convert run.xtc run.mrec --topology run.gro --precision 0.001   (0.001 angstrom)\n"
                "  molrec-raw convert run.mrec last.pdb --frames -1\n"
                "  molrec-raw convert train.extxyz train.mrec.lmdb --group-by config_id\n"
                "  molrec-raw convert run.mrec frames.mrec.lmdb --frames-as-records\n"
                "  molrec-raw convert a.extxyz b.extxyz c.db train/ --records-per-shard 10000 --workers 2",
                "molrec_raw.cli.convert:run_convert")
    p.add_argument("source", nargs="+", action=_OneOrMany, help="input trajectory (XTC, TRR, DCD, NetCDF, GRO, PDB, XYZ, H5MD, *.mrec, "
                   "...), extended XYZ or an ASE database (*.db) for a collection, or a collection (*.mrec.lmdb); "
                   "several inputs (extended XYZ / ASE files, or records with --frames-as-records) into a directory "
                   "of shards with --records-per-shard or --shards")
    p.add_argument("target", help="output: *.mrec (*.mrec.zip: a packed record), or any format MDAnalysis writes "
                   "(by extension); a collection *.mrec.lmdb; extended XYZ (*.xyz, *.extxyz) from a collection")
    p.add_argument("--topology", default=None, help="topology file for inputs that carry none (PSF, PDB, GRO, ...)")
    p.add_argument("--precision", type=float, default=None, metavar="LENGTH",
                   help="record output: round positions to a grid of this step, in the record's length unit "
                        "(angstrom: convert writes records in MDAnalysis's units, angstrom, ps, kJ/mol), e.g. 0.001; "
                        "default lossless")
    p.add_argument("--stride", type=int, default=1, help="every N-th frame (default 1)")
    p.add_argument("--frames", type=_frames, default=None, metavar="A:B",
                   help="frames A:B of the input (A:, :B, or one frame N; negatives count from the end: -1:, -10:-5)")
    p.add_argument("--format", default=None, help="input format when its extension does not say it (e.g. LAMMPSDUMP)")
    p.add_argument("--group-by", default=None, metavar="KEY", help="into a collection: consecutive images sharing "
                   "atoms.info[KEY] form one record of many frames (default: each image a record)")
    p.add_argument("--frames-as-records", action="store_true",
                   help="a record (*.mrec) into a collection: each trajectory frame becomes one record")
    p.add_argument("--units", default=None, metavar="Q=U,...", help="units the source record leaves unstated, e.g. "
                   "length=nm,energy=kJ/mol,force=kJ/mol/nm (a unit is never guessed); with --frames-as-records "
                   "the collection's units when the record states none")
    p.add_argument("--force", action="store_true", help="replace an existing TARGET (never the SOURCE itself)")
    shards = p.add_argument_group("a directory of shards (a dataset: molrec_raw.open_dataset)")
    shards.add_argument("--records-per-shard", type=int, default=None, metavar="N",
                        help="write TARGET as a directory of shards of N records each, in input order (a rerun keeps "
                        "the shards already finished)")
    shards.add_argument("--shards", type=int, default=None, metavar="K", help="as --records-per-shard, the records "
                        "cut into K shards (of ceil(records / K) each)")
    shards.add_argument("--workers", type=int, default=None, metavar="W", help="shards written by W Dask worker "
                        "processes (a LocalCluster: pip install 'molrec-raw[dask]'); default this process")

    p = command("metrics", "latest value of every metric series; --follow tails the WAL",
                "Print one row per metrics series - points, last step, last value, min and max of the finite "
                "values - from a record (dense series and the WAL tail past its watermark) or a host WAL "
                "(*.mlp.jsonl); --follow then prints every event as it is logged.",
                "molrec_raw.cli.metrics:run_metrics")
    p.add_argument("path", help="a record (*.mrec, *.mrec.zip, or a URL of one) or a local host WAL (*.mlp.jsonl)")
    _follow_options(p, "then print events as they are appended, until the run is over")

    p = command("plot", "draw every per-step meta and metrics series, one panel per key",
                "Draw every per-step meta series of the trajectory and every metrics series, one panel per key, "
                "into an image (matplotlib: pip install 'molrec-raw[plot]') or a Vega-Lite specification.",
                "molrec_raw.cli.plot:run_plot")
    p.add_argument("path", help="a record (*.mrec, *.mrec.zip) or a host WAL (*.mlp.jsonl)")
    p.add_argument("--out", default=None, help="image .png, .svg or .pdf (needs matplotlib: "
                   "pip install 'molrec-raw[plot]'); default <stem>.png beside PATH unless --vega is given")
    p.add_argument("--vega", default=None, help="write a Vega-Lite v5 specification (e.g. run.mlp.vl.json), "
                   "decimated data inline")
    p.add_argument("--series", nargs="+", default=None, metavar="KEY", help="only these series, in this order")
    p.add_argument("--x", choices=["step", "time"], default="step", help="the shared x axis (default step)")
    p.add_argument("--log-y", nargs="+", default=None, metavar="KEY",
                   help="series drawn on a log scale ('none' for none; default: positive series named *loss*)")
    p.add_argument("--size", type=_pixels, default=None, metavar="WxH", help="image size in pixels")
    p.add_argument("--follow", action="store_true", help="redraw as the run commits or logs")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between polls when following "
                   "(default 1)")
    p.add_argument("--stop-after", type=float, default=None, metavar="S", help="stop following after this many seconds")

    p = command("cat", "print a frame's columns",
                "Print the columns of the frame section, or of trajectory frame I with --frame I, block by block "
                "(the first 20 rows of each unless --rows says otherwise).  --follow prints one line per "
                "committed frame instead - step, time and per-step meta - as the run commits.\n\n"
                "Example:\n"
                "  molrec-raw cat demo.mrec --frame -1 --block bonds --rows 10:20", "molrec_raw.cli.cat:run_cat")
    p.add_argument("path", help=_WHERE)
    p.add_argument("--frame", type=int, default=None, metavar="I",
                   help="trajectory frame I (negatives count from the end); default: the frame section")
    p.add_argument("--block", default=None, metavar="NAME", help="only this block (an unknown name is an error "
                   "that lists the frame's blocks)")
    p.add_argument("--rows", type=_rows, default=slice(0, 20), metavar="N|A:B",
                   help="rows to print per block: the first N, or rows A:B (A:, :B, negatives from the end); "
                        "default 20")
    _follow_options(p, "print each frame's step, time and per-step meta, then each new one as it commits "
                       "(from --frame, default 0), until the run is over")

    p = command("explain", "what every byte means: a zarr.json, a chunk or shard, a zip, a frame; --rule ID",
                "Explain a record's bytes field by field with the rule each follows: the root (or the zip "
                "container of a *.mrec.zip), a node's zarr.json, a chunk or shard, how trajectory frame I is "
                "resolved, a checkpoint or the metrics WAL.  Explaining stops at the first thing a reader "
                "refuses and names its byte offset.  A collection (*.mrec.lmdb): its keys, or one key's value "
                "(meta, index, ff, r/N, s/N, f/J) - the frame-bytes prefix, header, padding and every buffer at its "
                "offset.  --rule ID prints what a rule of the catalogue requires "
                "(--rule CHAPTER: every rule of that chapter).\n\n"
                "Exit status: 0 explained, 1 the explanation ends in a fault, 2 usage error or unreadable input.",
                "molrec_raw.cli.kit:run_explain")
    p.add_argument("path", nargs="?", default=None, help=_WHERE + _OR_COLLECTION + " (not with --rule)")
    p.add_argument("node", nargs="?", default=None,
                   help="a node (frame/atoms/x), a store key (frame/atoms/x/c/0, trajectory/__molrec_checkpoint, "
                        "metrics/metrics.jsonl); default: the root (of a *.mrec.zip: its zip container); of a collection "
                "a key: meta, index, ff, r/N, s/N, f/J (default: its keys)")
    p.add_argument("--chunk", default=None, metavar="COORDS", help="a chunk of the array NODE: grid coordinates "
                   "(0, 0.1) or its key (c/0)")
    p.add_argument("--frame", type=int, default=None, metavar="I", help="how trajectory frame I is resolved")
    p.add_argument("--json", action="store_true", help="the explanation as a JSON document (its fields: the docs' page \"A reference kit for implementers\")")
    p.add_argument("--rule", default=None, metavar="ID",
                   help="print the catalogue's entry for a rule id (trajectory#W18, documents#9.15, ...) instead; "
                        "a chapter name (trajectory) prints its every rule")

    p = command("dump", "a record's decoded content in the canonical JSON form (conformance corpus)",
                "Print a record's decoded content as the canonical JSON document the conformance corpus "
                "compares (described in the corpus's README, molrec_raw/conformance/README.md); a record a reader must refuse is a one-line error naming "
                "its rule, exit 2.  A collection (*.mrec.lmdb) dumps its document, declaration, index, force field "
                "and every record.", "molrec_raw.cli.kit:run_dump")
    p.add_argument("path", help=_WHERE + _OR_COLLECTION)

    p = command("conform", "run another implementation's dumper over the conformance corpus",
                "Run another implementation's dumper over the conformance corpus shipped with this package: "
                "every valid case as a directory and a zip, compared with its expected document; every invalid "
                "case must be refused.\n\n"
                "Example:\n"
                "  molrec-raw conform --reader \"mydump {path}\"\n\n"
                "Exit status: 0 every case passed, 1 a case failed, 2 usage error or a dumper that cannot start.",
                "molrec_raw.cli.kit:run_conform")
    p.add_argument("--reader", required=True, metavar="COMMAND",
                   help='the dumper as a command line, {path} standing for the record, e.g. "mydump {path}"')
    p.add_argument("--corpus", type=Path, default=None, metavar="DIR",
                   help="the corpus (default: the one installed with molrec-raw)")
    p.add_argument("--case", action="append", default=None, metavar="PATTERN",
                   help="only cases matching this shell pattern (repeatable), e.g. 'valid/traj-*'")
    p.add_argument("--strict-rules", action="store_true",
                   help="an invalid case passes only when the dumper's stderr names its rule id")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds per run of the dumper (default 120)")
    p.add_argument("--verbose", action="store_true", help="print every case, not only the failures")
    return parser


def _join_negative_spans(argv: Sequence[str]) -> List[str]:
    """``--frames -1:`` -> ``--frames=-1:``: a span that starts with a minus and is not a plain
    negative number would otherwise be taken for an option."""
    out: List[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        if (args[i] in SPAN_OPTIONS and i + 1 < len(args) and args[i + 1].startswith("-")
                and ":" in args[i + 1] and _SPAN.fullmatch(args[i + 1])):
            out.append(f"{args[i]}={args[i + 1]}")
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line ``argv`` parsed; exits as argparse does on a usage error (2)."""
    return build_parser().parse_args(_join_negative_spans(argv))
