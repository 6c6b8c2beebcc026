"""``molrec-raw cat``: a frame's columns; ``--follow`` one line per frame as the run commits."""
from __future__ import annotations

import argparse
import json
from typing import Any, Optional

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, NodeNotFoundError
from molrec_raw.record import typed_json
from molrec_raw.record.doors import open_record
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.zarr import Group


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


def _no_frame_section(path: str, root: Group) -> MolrecError:
    """What to say when PATH has no frame section: point at ``--frame`` when it has a trajectory."""
    sections = ", ".join(name for name, member in root.members() if isinstance(member, Group)) or "none"
    if isinstance(root.get("trajectory"), Group):
        with MrecReader(path) as reader:
            frames = len(reader)
        return NodeNotFoundError(f"record has no 'frame' section; its trajectory has {frames} committed frame(s): "
                                 "give --frame I for frame I (--frame 0 the first, --frame -1 the last)", node="frame")
    return NodeNotFoundError(f"record has no 'frame' section and no trajectory for --frame (its sections: {sections})",
                             node="frame")


def _span_text(rows: slice) -> str:
    """``--rows`` as the user wrote it (``A:B``, either side may be empty)."""
    return f"{'' if rows.start is None else rows.start}:{'' if rows.stop is None else rows.stop}"


def _print_block(name: str, block: Any, rows: slice) -> None:
    """A block's header, column names and the rows ``rows`` selects (Python slice rules)."""
    print(f"[{name}] {block.count} rows")
    columns = list(block.columns)
    print("\t".join(columns))
    shown = range(block.nrows)[rows]
    for row in shown:
        print("\t".join(str(np.asarray(block.columns[c][row]).tolist()) for c in columns))
    hidden = block.nrows - len(shown)
    if block.nrows and not shown:  # a range past the block's rows (or empty once negatives are counted)
        print(f"(--rows {_span_text(rows)} selects none of its {block.nrows} rows)")
    elif hidden and shown.start == 0 and shown.step == 1:
        print(f"… {hidden} more rows")
    elif hidden:
        print(f"… rows {shown.start}:{shown.stop} of {block.nrows} shown")


def run_cat(args: argparse.Namespace) -> int:
    from molrec_raw.record.doors import read_mrec_frame

    if args.follow:
        return _cat_follow(args)
    root = open_record(args.path)
    if args.frame is None:
        if not isinstance(root.get("frame"), Group):
            raise _no_frame_section(args.path, root)
        frame = read_mrec_frame(args.path)
    else:
        if not isinstance(root.get("trajectory"), Group):
            raise MolrecError(f"{args.path} has no trajectory: --frame reads a trajectory's frames (without "
                              "--frame, cat prints the record's frame section)")
        with MrecReader(args.path) as reader:
            n = len(reader)
            if not -n <= args.frame < n:
                raise InvalidValueError(f"{args.path} has {n} committed frame(s), no frame {args.frame}"
                                        + (f": give --frame 0 to {n - 1}, or -1 to -{n} from the end" if n else ""))
            if args.block is None:
                frame = reader[args.frame]
            elif args.block not in reader.block_names():
                raise NodeNotFoundError(f"the frame has no block {args.block!r}; its blocks: "
                                        f"{', '.join(reader.block_names()) or 'none'}")
            else:  # that block alone, without the per-step meta: damage elsewhere costs it nothing
                columns = reader.schema.column_names(args.block)
                frame = reader.read_columns(args.frame, [(args.block, c) for c in columns], meta=False)
    if args.block is not None and args.block not in frame.blocks:
        raise NodeNotFoundError(f"the frame has no block {args.block!r}; its blocks: "
                                f"{', '.join(frame.blocks) or 'none'}")
    for name, block in frame.blocks.items():
        if args.block is None or name == args.block:
            _print_block(name, block, args.rows)
    return 0
