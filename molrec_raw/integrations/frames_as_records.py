"""``molrec-raw convert run.mrec train.mrec.lmdb --frames-as-records``: every frame of a
trajectory record becomes one record of a new collection — the record's ``system`` as each
record's system, the frame (its blocks resolved by carry-forward, its per-step meta, its
cell) as a one-frame trajectory with the frame's step and time, the trajectory's own
``sequence_schema`` as the collection's declaration, the index column ``frame`` the frame's
ordinal.  No outside tool: the record reader and the collection writer only.

Units: a record stores no intrinsic unit; the collection must state them (collection#C1) —
the record's ``units`` meta key on its system (what the integrations write), else the caller's
``units``; neither is refused rather than guessed.  Streaming: one frame in memory at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional

from molrec_raw.errors import InvalidValueError
from molrec_raw.integrations.conventions import units_of
from molrec_raw.record.model import MetaValue
from molrec_raw.record.units import parse_units
from molrec_raw.record.doors import read_mrec_system, section_names
from molrec_raw.record.trajectory import MrecReader

__all__ = ["ConvertedCollection", "FrameRecords", "frames_as_records"]


@dataclass
class ConvertedCollection:
    """What a conversion into or out of a collection wrote: records, frames (images), atoms
    over all frames."""

    source: str
    target: str
    records: int
    frames: int
    atoms: int


def _units(source: str, given: Optional[Mapping[str, str]]) -> Dict[str, str]:
    if given is not None:
        return dict(given)
    system = read_mrec_system(source) if "system" in section_names(source) else None
    stated = units_of(system)
    if stated is None:
        raise InvalidValueError(f"{source} states no units (no 'units' key on its system): give them, e.g. "
                                "--units length=angstrom,energy=eV,force=eV/angstrom (collection#C1)",
                                rule="collection#C1")
    raw = system.meta["units"] if system is not None else None  # units_of found them here
    value = raw.value if isinstance(raw, MetaValue) else raw
    return {**stated.to_json(), **parse_units(value)}  # every quantity stated (temperature too), presets spelled out


class FrameRecords:
    """The records of the trajectory record ``source``'s frames (module docstring), each as
    ``CollectionWriter.add_record``'s arguments with the index ``{"frame": k}`` (plus
    ``extra_index``): ``units`` the collection's, ``schema`` the trajectory's declaration,
    ``frames`` the count; ``atoms`` counts as it goes."""

    def __init__(self, source: str, *, units: Optional[Mapping[str, str]] = None,
                 extra_index: Optional[Dict[str, Any]] = None) -> None:
        self.source, self.extra_index = source, dict(extra_index or {})
        self.units = _units(source, units)
        system = read_mrec_system(source) if "system" in section_names(source) else None
        if system is not None:
            system.meta.pop("units", None)  # the collection's units cover every record (collection#C1)
        self.system = system
        with MrecReader(source) as reader:
            self.frames, self.schema = len(reader), reader.schema
        if self.frames == 0:
            raise InvalidValueError(f"{source}: its trajectory has no committed frame to convert")
        self.atoms = 0

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        with MrecReader(self.source) as reader:
            steps, times = reader.step, reader.time
            for k, frame in enumerate(reader):
                block = frame.blocks.get("atoms")
                self.atoms += 0 if block is None else block.nrows
                yield {"system": self.system, "frames": [frame], "steps": [int(steps[k])],
                       "times": None if times is None else [float(times[k])],
                       "index": {**self.extra_index, "frame": k}}


def frames_as_records(source: str, target: str, *, units: Optional[Mapping[str, str]] = None,
                      progress: Optional[Callable[[int, int], None]] = None) -> ConvertedCollection:
    """Write each frame of the trajectory record ``source`` as one record of the new
    collection ``target`` (module docstring); ``progress(done, total)`` per frame."""
    from molrec_raw.collection import CollectionWriter

    records = FrameRecords(source, units=units)
    total = records.frames
    meta: Dict[str, Any] = {"source": str(source), "converted_by": "molrec-raw convert --frames-as-records"}
    with CollectionWriter(target, units=records.units, schema=records.schema, meta=meta,
                          index_schema={"frame": "i64"}) as writer:
        for k, record in enumerate(records):
            writer.add_record(**record)
            if progress is not None:
                progress(k + 1, total)
    return ConvertedCollection(str(source), str(target), total, total, records.atoms)
