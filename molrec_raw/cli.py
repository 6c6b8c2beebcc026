"""``molrec-raw``: look into, check, pack and unpack records from the command line.

Argument parsing and printing only; the work is done by the record layer.  Errors print one
line (no traceback) and exit 2; ``validate`` exits 1 when it finds violations.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record.doors import open_record
from molrec_raw.record.molrec import validate
from molrec_raw.record.pack import pack_mrec_zip, unpack_mrec_zip
from molrec_raw.zarr import Array, Group

__all__ = ["main"]


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
    from molrec_raw.record.trajectory import MrecReader

    with MrecReader(path) as reader:
        n = len(reader)
        if not n and not reader.block_names():
            return None
        steps, times = reader.step, reader.time
        return {"nstep": n, "blocks": reader.block_names(),
                "steps": [int(steps[0]), int(steps[-1])] if n else None,
                "times": [float(times[0]), float(times[-1])] if n and times is not None else None}


def cmd_inspect(args: argparse.Namespace) -> int:
    root = open_record(args.path)
    report = {"path": args.path, "tree": _tree(root)}
    if isinstance(root.get("trajectory"), Group):
        report["trajectory"] = _trajectory_summary(args.path)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    lines: List[str] = []
    _print_tree(args.path, report["tree"], "", lines)
    if report.get("trajectory"):
        t = report["trajectory"]
        lines.append(f"trajectory: {t['nstep']} committed frames, steps {t['steps']}, times {t['times']}, "
                     f"blocks {', '.join(t['blocks'])}")
    print("\n".join(lines))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    violations = validate(args.path)
    for v in violations:
        print(f"{v.rule}\t{v.node}\t{v.message}")
    if not violations:
        print(f"{args.path}: valid")
    return 1 if violations else 0


def cmd_pack(args: argparse.Namespace) -> int:
    print(pack_mrec_zip(args.path, remove_source=args.remove_source))
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    print(unpack_mrec_zip(args.zip, args.dest))
    return 0


def cmd_cat(args: argparse.Namespace) -> int:
    from molrec_raw.record.doors import read_mrec_frame
    from molrec_raw.record.trajectory import MrecReader

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="molrec-raw", description="MolRec records on Zarr V3")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="a readable tree of a record")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_inspect)
    p = sub.add_parser("validate", help="every violated rule (exit 0 clean, 1 violations, 2 unreadable)")
    p.add_argument("path")
    p.set_defaults(run=cmd_validate)
    p = sub.add_parser("pack", help="<stem>.mrec -> <stem>.mrec.zip")
    p.add_argument("path")
    p.add_argument("--remove-source", action="store_true")
    p.set_defaults(run=cmd_pack)
    p = sub.add_parser("unpack", help="a packed record back into a directory")
    p.add_argument("zip")
    p.add_argument("dest")
    p.set_defaults(run=cmd_unpack)
    p = sub.add_parser("cat", help="print a frame's columns")
    p.add_argument("path")
    p.add_argument("--frame", type=int, default=None, help="trajectory frame (default: the frame section)")
    p.add_argument("--block", default=None)
    p.add_argument("--rows", type=int, default=20)
    p.set_defaults(run=cmd_cat)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (MolrecError, OSError) as exc:
        print(f"molrec-raw {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
