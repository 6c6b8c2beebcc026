"""The ``molrec-raw`` argument parser: argparse only, no record-layer import.  Each subcommand
names its implementation as ``"module:function"``; ``main`` imports it when it runs."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Tuple


def _pixels(text: str) -> Tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"a size is WIDTHxHEIGHT in pixels, e.g. 1200x800, not {text!r}")
    return int(width), int(height)


_WHERE = "a record: *.mrec, *.mrec.zip, or a URL (https://.../x.mrec.zip, s3://.../x.mrec with molrec-raw[remote])"


def _follow_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--follow", action="store_true", help=what)
    p.add_argument("--interval", type=float, default=0.5, help="seconds between polls when following")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop following after this many seconds without news (a killed writer never says it ended)")
    p.add_argument("--stop-after", type=float, default=None, help="stop following after this many seconds in all")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="molrec-raw", description="MolRec records on Zarr V3")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="write a sample record (a small MD run) and inspect it")
    p.add_argument("path")
    p.add_argument("--frames", type=int, default=300, help="frames of the sample run (default 300)")
    p.add_argument("--force", action="store_true", help="replace a record already at PATH")
    p.set_defaults(run="molrec_raw.cli.demo:run_demo")
    p = sub.add_parser("inspect", help="a readable tree of a record; --follow redraws it as a run commits")
    p.add_argument("path", help=_WHERE)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _follow_options(p, "redraw the summary after every commit until the run is over")
    p.set_defaults(run="molrec_raw.cli.inspect:run_inspect")
    p = sub.add_parser("validate", help="every violated rule (exit 0 clean, 1 violations, 2 unreadable)")
    p.add_argument("path", help=_WHERE)
    p.set_defaults(run="molrec_raw.cli.check:run_validate")
    p = sub.add_parser("repair", help="restore a crashed record in place (exit 0 when sound afterwards)")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.set_defaults(run="molrec_raw.cli.check:run_repair")
    p = sub.add_parser("pack", help="<stem>.mrec -> <stem>.mrec.zip")
    p.add_argument("path")
    p.add_argument("--remove-source", action="store_true")
    p.add_argument("--force", action="store_true",
                   help="pack a record that fails validation, and replace a zip already there")
    p.set_defaults(run="molrec_raw.cli.pack:run_pack")
    p = sub.add_parser("unpack", help="a packed record back into a directory")
    p.add_argument("zip")
    p.add_argument("dest")
    p.add_argument("--force", action="store_true", help="replace a record already at DEST")
    p.set_defaults(run="molrec_raw.cli.pack:run_unpack")
    p = sub.add_parser("convert", help="a trajectory MDAnalysis reads -> a record, a record -> any format it writes")
    p.add_argument("source", help="input trajectory (XTC, TRR, DCD, NetCDF, GRO, PDB, XYZ, H5MD, *.mrec, ...)")
    p.add_argument("target", help="output: *.mrec, or any format MDAnalysis writes (by extension)")
    p.add_argument("--topology", default=None, help="topology file for inputs that carry none (PSF, PDB, GRO, ...)")
    p.add_argument("--precision", type=float, default=None, help="record output: round positions to this (default lossless)")
    p.add_argument("--stride", type=int, default=1, help="every N-th frame (default 1)")
    p.add_argument("--frames", default=None, help="frames A:B of the input (A:, :B, negatives allowed)")
    p.add_argument("--format", default=None, help="input format when its extension does not say it (e.g. LAMMPSDUMP)")
    p.add_argument("--force", action="store_true", help="replace an existing TARGET (never the SOURCE itself)")
    p.set_defaults(run="molrec_raw.cli.convert:run_convert")
    p = sub.add_parser("metrics", help="latest value of every metric series; --follow tails the WAL")
    p.add_argument("path", help="a record (*.mrec, *.mrec.zip, or a URL of one) or a local host WAL (*.mlp.jsonl)")
    _follow_options(p, "then print events as they are appended, until the run is over")
    p.set_defaults(run="molrec_raw.cli.metrics:run_metrics")
    p = sub.add_parser("plot", help="draw every per-step meta and metrics series, one panel per key")
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
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls when following")
    p.add_argument("--stop-after", type=float, default=None, help="stop following after this many seconds")
    p.set_defaults(run="molrec_raw.cli.plot:run_plot")
    p = sub.add_parser("cat", help="print a frame's columns")
    p.add_argument("path", help=_WHERE)
    p.add_argument("--frame", type=int, default=None, help="trajectory frame (default: the frame section)")
    p.add_argument("--block", default=None)
    p.add_argument("--rows", type=int, default=20)
    _follow_options(p, "print each frame's step, time and per-step meta, then each new one as it commits "
                       "(from --frame, default 0), until the run is over")
    p.set_defaults(run="molrec_raw.cli.cat:run_cat")
    p = sub.add_parser("explain", help="what every byte means: a zarr.json, a chunk or shard, a zip, a frame")
    p.add_argument("path", help=_WHERE)
    p.add_argument("node", nargs="?", default=None,
                   help="a node (frame/atoms/x), a store key (frame/atoms/x/c/0, trajectory/__molrec_checkpoint, "
                        "metrics/metrics.jsonl); default: the root (of a *.mrec.zip: its zip container)")
    p.add_argument("--chunk", default=None, metavar="COORDS", help="a chunk of the array NODE: grid coordinates "
                   "(0, 0.1) or its key (c/0)")
    p.add_argument("--frame", type=int, default=None, metavar="I", help="how trajectory frame I is resolved")
    p.add_argument("--json", action="store_true", help="the explanation as a JSON document (spec-notes/cli.md)")
    p.set_defaults(run="molrec_raw.cli.kit:run_explain")
    p = sub.add_parser("dump", help="a record's decoded content in the canonical JSON form (conformance corpus)")
    p.add_argument("path", help=_WHERE)
    p.set_defaults(run="molrec_raw.cli.kit:run_dump")
    p = sub.add_parser("conform", help="run another implementation's dumper over the conformance corpus")
    p.add_argument("--reader", required=True, metavar="COMMAND",
                   help='the dumper as a command line, {path} standing for the record, e.g. "mydump {path}"')
    p.add_argument("--corpus", type=Path, default=None, help="the corpus (default: tests/conformance/corpus of "
                   "this checkout)")
    p.add_argument("--case", action="append", default=None, metavar="PATTERN",
                   help="only cases matching this shell pattern (repeatable), e.g. 'valid/traj-*'")
    p.add_argument("--strict-rules", action="store_true",
                   help="an invalid case passes only when the dumper's stderr names its rule id")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run of the dumper (default 120)")
    p.add_argument("--verbose", action="store_true", help="print every case, not only the failures")
    p.set_defaults(run="molrec_raw.cli.kit:run_conform")
    return parser
