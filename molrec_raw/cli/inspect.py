"""``molrec-raw inspect``: a readable tree of a record (arrays, chunks, codecs, sizes) and its
trajectory summary; ``--follow`` redraws it after every commit.  Damage met without decoding a
chunk is marked where it lies (a node whose zarr.json does not parse, a trajectory block or
column a reader cannot read, a per-step meta key's array, nodes no group reaches, committed
data that is gone) and the exit status is then 1; the rest of the record is listed
(``validate`` decodes every chunk)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, MolrecError
from molrec_raw.record.damage import members_or_damage, structure_damage
from molrec_raw.record.doors import open_record, record_source
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.zarr import Array, Group, open_group


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


def _decoded_name(path: Tuple[str, ...], name: str) -> Optional[str]:
    """The name a percent-encoded node stands for, when it is one and differs: a force-field
    table ``pair.lj%2Fcut`` (documents#9.35), a metrics series ``train%2Floss`` (documents#4.3)."""
    from molrec_raw.record.forcefield import parse_block_name
    from molrec_raw.record.metrics.safe_name import decode_safe_name

    try:
        if path == ("forcefield",):
            category, style = parse_block_name(name)
            decoded = f"{category}.{style}"
        elif len(path) == 2 and path[0] == "metrics" and path[1] in ("series", "steps", "wall_time"):
            decoded = decode_safe_name(name)
        else:
            return None
    except MolrecError:  # not an encoding this library writes: shown as stored
        return None
    return decoded if decoded != name else None


def _tree(group: Group, path: Tuple[str, ...] = ()) -> Dict[str, Any]:
    node: Dict[str, Any] = {"attributes": dict(group.attrs), "members": {}}
    for name, member in members_or_damage(group):
        if isinstance(member, MolrecError):  # listed, marked, and the siblings still shown
            node["members"][name] = {"damaged": str(member)}
            continue
        child = _tree(member, path + (name,)) if isinstance(member, Group) else _array_info(member)
        decoded = _decoded_name(path, name)
        if decoded is not None:
            child["decoded_name"] = decoded
        node["members"][name] = child
    return node


def _print_tree(name: str, node: Dict[str, Any], indent: str, out: List[str]) -> None:
    shown = f"{node['decoded_name']} (stored {name})" if "decoded_name" in node else name
    if "damaged" in node:
        out.append(f"{indent}{shown}: DAMAGED: {node['damaged']}")
    elif "members" in node:
        keys = ", ".join(list(node["attributes"])[:6]) + (", …" if len(node["attributes"]) > 6 else "")
        out.append(f"{indent}{shown}/" + (f"  [{keys}]" if keys else ""))
        for child, sub in node["members"].items():
            _print_tree(child, sub, indent + "  ", out)
    else:
        geometry = f"chunks {node['chunks']}" + (f" in shards {node['shards']}" if node["shards"] else "")
        ratio = f", ratio {node['ratio']}" if node["ratio"] else ""
        out.append(f"{indent}{shown}: {node['dtype']}{node['shape']}  {geometry}  {'+'.join(node['codecs'])}  "
                   f"{node['stored_bytes']} B stored{ratio}")


def _trajectory_summary(path: str) -> Optional[Dict[str, Any]]:
    """The reader's summary; a trajectory that cannot be opened at all, the reason (marked)."""
    try:
        with MrecReader(path) as reader:
            summary = reader.describe()
    except MolrecError as exc:
        return {"damaged": str(exc)}
    return summary if summary["nstep"] or summary["blocks"] else None


def _trajectory_lines(t: Dict[str, Any]) -> List[str]:
    if "damaged" in t:
        return [f"trajectory: DAMAGED, cannot be read: {t['damaged']}"]
    lines = [f"trajectory: {t['nstep']} committed frames, steps {t['steps']}, times {t['times']}, "
             f"{t['box_updates']} cell update(s), per-step meta {', '.join(t['meta_keys']) or '-'}"]
    for name, b in t["blocks"].items():
        tail = f", {b['uncommitted_rows']} uncommitted row(s) past nstep" if b["uncommitted_rows"] else ""
        rows = f", last update {b['last_rows']} rows" if b["last_rows"] is not None else ""
        if b["layout"] == "damaged":
            lines.append(f"  block {name}: DAMAGED, its reads refuse: {b['damaged']['']}")
            continue
        lines.append(f"  block {name}: {b['layout']}, {b['updates']} update(s){rows}{tail}")
        for column, why in b.get("damaged", {}).items():
            lines.append(f"    column {column}: DAMAGED, its reads refuse (the other columns read): {why}")
    for key, why in t.get("meta_damaged", {}).items():
        lines.append(f"  per-step meta {key}: DAMAGED, the reads that need it refuse (cat --block reads without "
                     f"it): {why}")
    if t["uncommitted_tail"]:
        lines.append("  uncommitted tail: arrays hold data past nstep (an interrupted commit); readers ignore it")
    return lines


def inspect_lines(path: str, as_json: bool) -> List[str]:
    """The listing ``inspect`` prints (see :func:`inspect_report`)."""
    return inspect_report(path, as_json)[0]


def _marked(node: Dict[str, Any]) -> bool:
    """Does the tree below ``node`` hold a node marked damaged?"""
    return "damaged" in node or any(_marked(child) for child in node.get("members", {}).values())


def _trajectory_marked(t: Optional[Dict[str, Any]]) -> bool:
    """Does the trajectory summary mark damage (the trajectory, a block, a column, a meta key)?"""
    if not t:
        return False
    return "damaged" in t or bool(t.get("meta_damaged")) or any("damaged" in b for b in t["blocks"].values())


def inspect_report(path: str, as_json: bool) -> Tuple[List[str], bool]:
    """The listing ``inspect`` prints, and whether it marks damage (then it exits 1)."""
    try:
        root = open_record(path)
    except (InvalidMetadataError, CorruptDataError):  # meta/ damaged: the tree is still listed, marked
        root = open_group(record_source(path), mode="r")
    report: Dict[str, Any] = {"path": path, "tree": _tree(root)}
    member = report["tree"]["members"].get("trajectory")
    if member is not None and "members" in member:
        report["trajectory"] = _trajectory_summary(path)
    report["damage"] = [{"node": d.node, "key": d.key, "message": d.message, "rule": d.rule}
                        for d in structure_damage(root)]
    marked = _marked(report["tree"]) or _trajectory_marked(report.get("trajectory")) or bool(report["damage"])
    if as_json:
        return [json.dumps(report, indent=2, default=str)], marked
    lines: List[str] = []
    _print_tree(path, report["tree"], "", lines)
    if report.get("trajectory"):
        lines.extend(_trajectory_lines(report["trajectory"]))
    for d in report["damage"]:
        lines.append(f"DAMAGED {d['node']}: {d['message']} ({d['rule']})")
    return lines, marked


def _inspect_collection(args: argparse.Namespace) -> int:
    """``inspect`` of a ``*.mrec.lmdb``: the collection at a glance (no ``--follow``: a
    collection is complete once it exists, its ``meta`` written last)."""
    from molrec_raw.collection.inspection import describe, describe_lines

    if args.follow:
        raise MolrecError("--follow follows a record as its run commits; a collection is complete once it exists "
                          "(its writer writes meta last)")
    doc = describe(args.path)
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False) if args.json else "\n".join(describe_lines(doc)))
    return 0


def run_inspect(args: argparse.Namespace) -> int:
    from molrec_raw.collection.inspection import is_collection_path

    if is_collection_path(args.path):
        return _inspect_collection(args)
    if not args.follow:
        lines, marked = inspect_report(args.path, args.json)
        print("\n".join(lines))
        return 1 if marked else 0  # damage marked: exit 1, as validate does
    clear = sys.stdout.isatty() and not args.json
    with MrecReader(args.path) as reader:  # its refresh is what tells a commit
        drawn: List[Any] = []

        def draw(n: int) -> None:
            lines = inspect_lines(args.path, args.json)
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
