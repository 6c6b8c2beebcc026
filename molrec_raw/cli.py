"""``molrec-raw``: write a sample record, look into, check, pack, unpack, convert and follow
records from the command line; explain their bytes, dump their content in the canonical
JSON form and run another implementation over the conformance corpus.

Argument parsing and printing only; the work is done by the record layer.  Errors print one
line (no traceback) and exit 2; ``validate`` exits 1 when it finds violations.  Long work
(pack, unpack, validate) draws a progress bar on stderr when stderr is a terminal.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record.doors import open_record
from molrec_raw.record import typed_json
from molrec_raw.record.metrics import follow_metrics, read_metrics
from molrec_raw.record.molrec import validate
from molrec_raw.record.pack import pack_mrec_zip, unpack_mrec_zip
from molrec_raw.record.repair import repair_mrec
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.zarr import Array, Group
from molrec_raw.zarr.remote import is_url

__all__ = ["main"]


class ProgressBar:
    """``bar(done, total)`` redraws one line on ``stream`` (stderr), at most ten times a
    second; silent when the stream is not a terminal, so pipes and logs stay clean."""

    WIDTH = 30

    def __init__(self, label: str, stream: Optional[IO[str]] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (done < total and now - self._last < 0.1):
            return
        self._last = now
        fraction = min(1.0, done / total) if total else 1.0
        filled = int(fraction * self.WIDTH)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {fraction:6.1%}")
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _array_info(array: Array) -> Dict[str, Any]:
    stored = sum(array.store.size(key) or 0 for key in array.store.list(f"{array.path}/")
                 if not key.endswith("zarr.json"))
    raw = array.size * (array.metadata.dtype.itemsize or 0)
    names = [c.get("name") if isinstance(c, dict) else c for c in array.metadata.codecs]
    if names == ["sharding_indexed"]:
        names = ["sharding_indexed"] + [c.get("name") for c in array.metadata.codecs[0]["configuration"]["codecs"]]
    return {"shape": list(array.shape), "dtype": array.metadata.dtype.name, "chunks": list(array.chunks),
            "shards": list(array.shards) if array.shards else None, "codecs": names, "stored_bytes": stored,
            "ratio": round(raw / stored, 2) if stored and raw else None}


def _tree(group: Group) -> Dict[str, Any]:
    node: Dict[str, Any] = {"attributes": dict(group.attrs), "members": {}}
    for name, member in group.members():
        node["members"][name] = _tree(member) if isinstance(member, Group) else _array_info(member)
    return node


def _print_tree(name: str, node: Dict[str, Any], indent: str, out: List[str]) -> None:
    if "members" in node:
        keys = ", ".join(list(node["attributes"])[:6]) + (", …" if len(node["attributes"]) > 6 else "")
        out.append(f"{indent}{name}/" + (f"  [{keys}]" if keys else ""))
        for child, sub in node["members"].items():
            _print_tree(child, sub, indent + "  ", out)
    else:
        geometry = f"chunks {node['chunks']}" + (f" in shards {node['shards']}" if node["shards"] else "")
        ratio = f", ratio {node['ratio']}" if node["ratio"] else ""
        out.append(f"{indent}{name}: {node['dtype']}{node['shape']}  {geometry}  {'+'.join(node['codecs'])}  "
                   f"{node['stored_bytes']} B stored{ratio}")


def _trajectory_summary(path: str) -> Optional[Dict[str, Any]]:
    with MrecReader(path) as reader:
        summary = reader.describe()
    return summary if summary["nstep"] or summary["blocks"] else None


def _trajectory_lines(t: Dict[str, Any]) -> List[str]:
    lines = [f"trajectory: {t['nstep']} committed frames, steps {t['steps']}, times {t['times']}, "
             f"{t['box_updates']} cell update(s), per-step meta {', '.join(t['meta_keys']) or '-'}"]
    for name, b in t["blocks"].items():
        tail = f", {b['uncommitted_rows']} uncommitted row(s) past nstep" if b["uncommitted_rows"] else ""
        rows = f", last update {b['last_rows']} rows" if b["last_rows"] is not None else ""
        lines.append(f"  block {name}: {b['layout']}, {b['updates']} update(s){rows}{tail}")
    if t["uncommitted_tail"]:
        lines.append("  uncommitted tail: arrays hold data past nstep (an interrupted commit); readers ignore it")
    return lines


def _inspect_lines(path: str, as_json: bool) -> List[str]:
    root = open_record(path)
    report: Dict[str, Any] = {"path": path, "tree": _tree(root)}
    if isinstance(root.get("trajectory"), Group):
        report["trajectory"] = _trajectory_summary(path)
    if as_json:
        return [json.dumps(report, indent=2, default=str)]
    lines: List[str] = []
    _print_tree(path, report["tree"], "", lines)
    if report.get("trajectory"):
        lines.extend(_trajectory_lines(report["trajectory"]))
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    if not args.follow:
        print("\n".join(_inspect_lines(args.path, args.json)))
        return 0
    clear = sys.stdout.isatty() and not args.json
    with MrecReader(args.path) as reader:  # its refresh is what tells a commit
        drawn: List[Any] = []

        def draw(n: int) -> None:
            lines = _inspect_lines(args.path, args.json)
            state = (reader.run_status() or {}).get("state")
            lines.append(f"run: {state or 'no status document'}; {n} committed frames")
            print(("\x1b[H\x1b[2J" if clear else "") + "\n".join(lines) + ("" if clear else "\n"), flush=True)
            drawn[:] = [state]
        try:
            for n in reader.watch(args.interval, args.timeout, stop_after=args.stop_after):
                draw(n)
            if drawn and (reader.run_status() or {}).get("state") != drawn[0]:
                draw(len(reader))  # the run ended after its last commit: once more, with its state
        except KeyboardInterrupt:
            pass
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from molrec_raw.demo import write_demo

    from molrec_raw import plot

    started = time.monotonic()
    path = write_demo(args.path, frames=args.frames)
    print("\n".join(_inspect_lines(str(path), False)))
    image = plot.default_image_path(path)
    try:
        print(f"\ndrew {plot.render(path, out=image)[0]}")
    except ImportError:  # the core installs without matplotlib; the record is complete anyway
        print(f"\n{image} not drawn: the picture needs matplotlib ({plot.EXTRA_HINT})")
    print(f"wrote {path} in {time.monotonic() - started:.1f} s; try: molrec-raw validate {path}, "
          f"molrec-raw metrics {path}, molrec-raw plot {path}, molrec-raw cat {path} --frame -1 --block bonds, "
          f"molrec-raw pack {path}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    with ProgressBar("validate") as bar:
        violations = validate(args.path, progress=bar)
    for v in violations:
        print(f"{v.rule}\t{v.node}\t{v.message}")
    if not violations:
        print(f"{args.path}: valid")
    return 1 if violations else 0


def cmd_repair(args: argparse.Namespace) -> int:
    report = repair_mrec(args.path, dry_run=args.dry_run)
    verb = "would" if args.dry_run else "did"
    for change in report.changes:
        print(f"{verb}: {change}")
    if report.nstep is not None:
        where = "the live state" if report.source == "live" else f"its checkpoint ({report.reason})"
        print(f"trajectory: {report.nstep} committed frames, read from {where}")
    if not report.changes:
        print(f"{args.path}: nothing to repair")
    print(f"{args.path}: {'sound' if report.sound else 'needs repair' if args.dry_run else 'NOT sound'}")
    return 0 if report.sound else 1


def cmd_pack(args: argparse.Namespace) -> int:
    with ProgressBar("pack") as bar:
        target = pack_mrec_zip(args.path, remove_source=args.remove_source, progress=bar)
    print(target)
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    with ProgressBar("unpack") as bar:
        target = unpack_mrec_zip(args.zip, args.dest, progress=bar)
    print(target)
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    try:
        from molrec_raw.integrations.convert import convert, parse_frames
    except ImportError as exc:  # the MDAnalysis extra is not installed
        raise MolrecError(str(exc)) from None
    with ProgressBar("convert") as bar, warnings.catch_warnings(record=True) as caught:
        report = convert(args.source, args.target, topology=args.topology, precision=args.precision,
                         stride=args.stride, frames=parse_frames(args.frames), in_format=args.format, progress=bar)
    shown = [w for w in caught if not issubclass(w.category, DeprecationWarning) and str(w.message).strip()]
    for message in dict.fromkeys(str(w.message).splitlines()[0] for w in shown):
        print(f"molrec-raw convert: warning: {message}", file=sys.stderr)
    print(f"{report.target}: {report.frames} frames of {report.atoms} atoms from {report.source} "
          f"in {report.seconds:.1f} s ({report.frames_per_second:.0f} frames/s)")
    return 0


def _metrics_table(path: str) -> List[str]:
    series = read_metrics(path)
    if not series:
        return [f"{path}: no metrics"]
    rows = [("series", "points", "last step", "last value", "min", "max")]
    for key, s in sorted(series.items()):
        values = np.asarray(s.values, dtype=np.float64)
        finite = values[np.isfinite(values)]
        last_step = "-" if s.steps is None or not len(s.steps) else str(int(s.steps[-1]))
        rows.append((key, str(len(values)), last_step, f"{values[-1]:.6g}" if len(values) else "-",
                     f"{finite.min():.6g}" if finite.size else "-", f"{finite.max():.6g}" if finite.size else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in rows]


def cmd_metrics(args: argparse.Namespace) -> int:
    """The table, then (``--follow``) every event logged from now on (``step key value``),
    through ``follow_metrics``: a torn last line waits for its newline, a bad complete line
    is an error, the run's end (a record's status) or ``--timeout`` stops it."""
    if args.follow and is_url(args.path):
        raise MolrecError("--follow tails the WAL of a local record; a record named by URL is read once")
    events = follow_metrics(args.path, args.interval, args.timeout, stop_after=args.stop_after) \
        if args.follow else None  # the offset is taken before the table: nothing logged meanwhile is missed
    print("\n".join(_metrics_table(args.path)), flush=True)
    if events is not None:
        print(f"following {args.path} (Ctrl-C to stop)", flush=True)
        try:
            for event in events:
                print(f"{'-' if event.step is None else event.step}\t{event.key}\t{event.value:.6g}", flush=True)
        except KeyboardInterrupt:
            pass
    return 0


def _pixels(text: str) -> Tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"a size is WIDTHxHEIGHT in pixels, e.g. 1200x800, not {text!r}")
    return int(width), int(height)


def cmd_plot(args: argparse.Namespace) -> int:
    from molrec_raw import plot

    log_y = None if args.log_y is None else [k for k in args.log_y if k != "none"]
    options: Dict[str, Any] = dict(out=args.out, vega=args.vega, series=args.series, x=args.x, log_y=log_y,
                                   size=args.size)
    try:
        if args.follow:
            print(f"following {args.path} (Ctrl-C to stop)", flush=True)
            try:
                plot.follow(args.path, interval=args.interval, stop_after=args.stop_after,
                            report=lambda line: print(line, flush=True), **options)
            except KeyboardInterrupt:
                pass
        else:
            for written in plot.render(args.path, **options):
                print(written)
    except ImportError as exc:  # matplotlib missing: the message names the extra
        print(f"molrec-raw plot: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _meta_text(tag: str, value: Any) -> str:
    """A per-step meta value on one line: f64 as %.6g, the rest as compact typed JSON."""
    if tag == "f64" and isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "-"
    plain = getattr(value, "value", value)  # a MetaValue carries its tag beside the value
    return json.dumps(typed_json.encode_value(tag, plain), separators=(",", ":"))


def _cat_follow(args: argparse.Namespace) -> int:
    """One line per committed frame (index, step, time, each per-step meta key) from
    ``--frame`` (default 0; negative: from the end), then one per new commit; only the
    meta is decoded, never the blocks."""
    with MrecReader(args.path) as reader:
        keys = reader.schema.meta_keys()
        print("\t".join(["frame", "step", "time", *(k for k, _ in keys)]), flush=True)
        following: Optional[int] = None  # the next frame to print
        try:
            for n in reader.watch(args.interval, args.timeout, stop_after=args.stop_after):
                if following is None:
                    start = args.frame or 0
                    following = start if start >= 0 else max(0, n + start)
                steps, times = reader.step, reader.time
                while following < n:
                    i, following = following, following + 1
                    meta = reader.read_columns(i, []).meta
                    cells = [str(i), str(steps[i]), "-" if times is None else f"{times[i]:.6g}"]
                    print("\t".join(cells + [_meta_text(tag, meta.get(k)) for k, tag in keys]), flush=True)
        except KeyboardInterrupt:
            pass
    return 0


def cmd_cat(args: argparse.Namespace) -> int:
    from molrec_raw.record.doors import read_mrec_frame

    if args.follow:
        return _cat_follow(args)
    root = open_record(args.path)
    if args.frame is None:
        frame = read_mrec_frame(args.path)
    else:
        if not isinstance(root.get("trajectory"), Group):
            raise MolrecError("--frame needs a record with a trajectory")
        with MrecReader(args.path) as reader:
            frame = reader[args.frame]
    for name, block in frame.blocks.items():
        if args.block and name != args.block:
            continue
        print(f"[{name}] {block.count} rows")
        columns = list(block.columns)
        print("\t".join(columns))
        for row in range(min(block.nrows, args.rows)):
            print("\t".join(str(np.asarray(block.columns[c][row]).tolist()) for c in columns))
        if block.nrows > args.rows:
            print(f"… {block.nrows - args.rows} more rows")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from molrec_raw.record.explain import explain

    report = explain(args.path, args.node, chunk=args.chunk, frame=args.frame)
    print(json.dumps(report.to_json(), indent=1, ensure_ascii=False) if args.json else report.text())
    return 0


def cmd_dump(args: argparse.Namespace) -> int:
    from molrec_raw.conformance import canonical_bytes, dump_record

    sys.stdout.buffer.write(canonical_bytes(dump_record(args.path)))
    sys.stdout.flush()
    return 0


def _default_corpus() -> Optional[Path]:
    from molrec_raw.conformance.build import default_frozen_source

    return default_frozen_source()


def cmd_conform(args: argparse.Namespace) -> int:
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


_WHERE = "a record: *.mrec, *.mrec.zip, or a URL (https://.../x.mrec.zip, s3://.../x.mrec with molrec-raw[remote])"


def _follow_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--follow", action="store_true", help=what)
    p.add_argument("--interval", type=float, default=0.5, help="seconds between polls when following")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop following after this many seconds without news (a killed writer never says it ended)")
    p.add_argument("--stop-after", type=float, default=None, help="stop following after this many seconds in all")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="molrec-raw", description="MolRec records on Zarr V3")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="write a sample record (a small MD run) and inspect it")
    p.add_argument("path")
    p.add_argument("--frames", type=int, default=300, help="frames of the sample run (default 300)")
    p.set_defaults(run=cmd_demo)
    p = sub.add_parser("inspect", help="a readable tree of a record; --follow redraws it as a run commits")
    p.add_argument("path", help=_WHERE)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _follow_options(p, "redraw the summary after every commit until the run is over")
    p.set_defaults(run=cmd_inspect)
    p = sub.add_parser("validate", help="every violated rule (exit 0 clean, 1 violations, 2 unreadable)")
    p.add_argument("path", help=_WHERE)
    p.set_defaults(run=cmd_validate)
    p = sub.add_parser("repair", help="restore a crashed record in place (exit 0 when sound afterwards)")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.set_defaults(run=cmd_repair)
    p = sub.add_parser("pack", help="<stem>.mrec -> <stem>.mrec.zip")
    p.add_argument("path")
    p.add_argument("--remove-source", action="store_true")
    p.set_defaults(run=cmd_pack)
    p = sub.add_parser("unpack", help="a packed record back into a directory")
    p.add_argument("zip")
    p.add_argument("dest")
    p.set_defaults(run=cmd_unpack)
    p = sub.add_parser("convert", help="a trajectory MDAnalysis reads -> a record, a record -> any format it writes")
    p.add_argument("source", help="input trajectory (XTC, TRR, DCD, NetCDF, GRO, PDB, XYZ, H5MD, *.mrec, ...)")
    p.add_argument("target", help="output: *.mrec, or any format MDAnalysis writes (by extension)")
    p.add_argument("--topology", default=None, help="topology file for inputs that carry none (PSF, PDB, GRO, ...)")
    p.add_argument("--precision", type=float, default=None, help="record output: round positions to this (default lossless)")
    p.add_argument("--stride", type=int, default=1, help="every N-th frame (default 1)")
    p.add_argument("--frames", default=None, help="frames A:B of the input (A:, :B, negatives allowed)")
    p.add_argument("--format", default=None, help="input format when its extension does not say it (e.g. LAMMPSDUMP)")
    p.set_defaults(run=cmd_convert)
    p = sub.add_parser("metrics", help="latest value of every metric series; --follow tails the WAL")
    p.add_argument("path", help="a record (*.mrec, *.mrec.zip, or a URL of one) or a local host WAL (*.mlp.jsonl)")
    _follow_options(p, "then print events as they are appended, until the run is over")
    p.set_defaults(run=cmd_metrics)
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
    p.set_defaults(run=cmd_plot)
    p = sub.add_parser("cat", help="print a frame's columns")
    p.add_argument("path", help=_WHERE)
    p.add_argument("--frame", type=int, default=None, help="trajectory frame (default: the frame section)")
    p.add_argument("--block", default=None)
    p.add_argument("--rows", type=int, default=20)
    _follow_options(p, "print each frame's step, time and per-step meta, then each new one as it commits "
                       "(from --frame, default 0), until the run is over")
    p.set_defaults(run=cmd_cat)
    p = sub.add_parser("explain", help="what every byte means: a zarr.json, a chunk or shard, a zip, a frame")
    p.add_argument("path", help=_WHERE)
    p.add_argument("node", nargs="?", default=None,
                   help="a node (frame/atoms/x), a store key (frame/atoms/x/c/0, trajectory/__molrec_checkpoint, "
                        "metrics/metrics.jsonl); default: the root (of a *.mrec.zip: its zip container)")
    p.add_argument("--chunk", default=None, metavar="COORDS", help="a chunk of the array NODE: grid coordinates "
                   "(0, 0.1) or its key (c/0)")
    p.add_argument("--frame", type=int, default=None, metavar="I", help="how trajectory frame I is resolved")
    p.add_argument("--json", action="store_true", help="the explanation as a JSON document (spec-notes/cli.md)")
    p.set_defaults(run=cmd_explain)
    p = sub.add_parser("dump", help="a record's decoded content in the canonical JSON form (conformance corpus)")
    p.add_argument("path", help=_WHERE)
    p.set_defaults(run=cmd_dump)
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
    p.set_defaults(run=cmd_conform)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # e.g. `molrec-raw inspect big.mrec | head`: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (MolrecError, OSError) as exc:
        print(f"molrec-raw {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
