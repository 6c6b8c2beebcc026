"""``molrec-raw convert IN OUT``: any trajectory MDAnalysis reads into a record, and a record
into any format MDAnalysis writes, one frame at a time (memory does not grow with the
trajectory's length: MDAnalysis readers stream, the record writer commits every few frames,
the record reader holds one batch).

Both sides go through MDAnalysis and the MREC Reader/Writer of
:mod:`molrec_raw.integrations.mdanalysis`, so units (Å, ps in MDAnalysis, the record's
stated units on disk), the cell and the topology follow the one convention.  Every failure
is a :class:`~molrec_raw.errors.MolrecError` with a one-line message (the CLI prints it and
exits 2): an unknown format, a topology that is missing, a record whose atom count changes
(MDAnalysis cannot represent it), a multi-frame selection to a single-frame format.
"""
from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from molrec_raw.errors import InvalidValueError, MolrecError, RecordExistsError, UnsupportedFeatureError
from molrec_raw.integrations.mdanalysis import FORMAT, GUESSED_KEY, MRECWriter, guess_elements, is_record_path, mda
from molrec_raw.record.model import MetaValue
from molrec_raw.record.doors import replace_record

__all__ = ["ConvertReport", "convert", "parse_frames", "check_target", "NEEDS_TOPOLOGY"]

#: The length unit of a record ``convert`` writes (MDAnalysis's: Å), so of ``--precision``.
PRECISION_UNIT = "angstrom"

#: Output formats whose writers write atom names and residues: refused from a source that
#: carries no topology (it would invent them) unless ``--topology`` gives one.
NEEDS_TOPOLOGY = frozenset({"PDB", "ENT", "GRO", "PQR", "PDBQT", "MOL2", "CRD"})


@dataclass
class ConvertReport:
    """What a conversion did: frames written, atoms per frame, wall seconds."""

    source: str
    target: str
    frames: int
    atoms: int
    seconds: float

    @property
    def frames_per_second(self) -> float:
        """Frames written per wall second (infinite for a conversion that took no measurable time)."""
        return self.frames / self.seconds if self.seconds > 0 else float("inf")


def parse_frames(text: Optional[str]) -> slice:
    """``--frames A:B`` (either side may be empty; negatives count from the end) as a slice."""
    if text is None:
        return slice(None)
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            return slice(int(start), int(start) + 1 if int(start) != -1 else None)
        return slice(int(start) if start.strip() else None, int(stop) if stop.strip() else None)
    except ValueError:
        raise InvalidValueError(f"--frames {text!r}: expected A:B with integers (A:, :B and A allowed)") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_FORMAT_LIST = re.compile(r"dict_keys\(\[(.*?)\]\)")
_FORMAT_NAMED = re.compile(r"format '([^']+)'|'([^']+)' isn't a valid topology format")


def _unknown_format(path: str, message: str, in_format: Optional[str]) -> Optional[str]:
    """MDAnalysis's refusal of a format it does not know, said by name: the format, where it
    came from (``--format`` or the extension) and the formats MDAnalysis reads, one name
    each (its own message prints its registry as ``dict_keys([...])``); None for any other
    message."""
    listed = _FORMAT_LIST.search(message)
    if listed is None:
        return None
    names = ", ".join(sorted(set(re.findall(r"'([^']+)'", listed.group(1)))))
    named = _FORMAT_NAMED.search(message)
    fmt = in_format or (next(g for g in named.groups() if g) if named else os.path.splitext(path)[1].lstrip("."))
    kind = "topology" if "topology format" in message else "trajectory"
    where = "given by --format" if in_format else "guessed from its extension"
    return (f"{path}: MDAnalysis reads no {kind} format {fmt.upper()!r} ({where}); the {kind} formats it reads: "
            f"{names}; name one with --format (e.g. --format LAMMPSDUMP for a LAMMPS dump)"
            + (", or give a topology file with --topology FILE" if kind == "topology" else ""))


def _universe(source: str, topology: Optional[str], in_format: Optional[str], assume_units: Any = None) -> Any:
    for path in (source, topology):
        if path is not None and not os.path.exists(path):
            raise InvalidValueError(f"{path}: no such file or directory")
    args = (source,) if topology is None else (topology, source)
    kwargs: Dict[str, Any] = {} if in_format is None else {"format": in_format}
    if assume_units is not None and is_record_path(source):
        kwargs["assume_units"] = assume_units  # units the source record leaves unstated (§13.5)
    try:
        universe = mda.Universe(*args, **kwargs)
        universe.trajectory  # a Universe built from a topology alone has none (e.g. --format of no reader)
        return universe
    except MolrecError:
        raise
    except (ValueError, TypeError, KeyError, NotImplementedError, IndexError, OSError, AttributeError) as exc:
        message = _one_line(exc)
        unknown = _unknown_format(source, message, in_format)
        if unknown is not None:
            raise InvalidValueError(unknown) from None
        if isinstance(exc, AttributeError):
            raise InvalidValueError(f"cannot read {source}: MDAnalysis found no trajectory in it"
                                    + (f" as format {in_format!r}" if in_format is not None else "")
                                    + f" ({message})") from None
        if "topology" in message.lower() and topology is None:
            raise InvalidValueError(f"cannot read {source}: MDAnalysis needs a topology for it (pass --topology FILE, "
                                    f"or --format if the extension misleads): {message}") from None
        raise InvalidValueError(f"cannot read {source}: {message}") from None


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file or directory (one of them may not exist)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_target(source: str, target: str, topology: Optional[str], overwrite: bool) -> None:
    """The overwrite policy of ``convert`` (spec-notes/safety.md): the target is never the
    source or the topology — refused even with ``overwrite``, naming both — and an existing
    target is replaced only with ``overwrite`` (``--force``)."""
    for given, what in ((source, "source"), (topology, "topology")):
        if given is not None and _same_file(given, target):
            raise RecordExistsError(f"{target}: refusing to convert {given} into itself: the target is the {what} "
                                    "(even with --force, a conversion never writes over its input; write to "
                                    "another path)", store=target, rule="safety#overwrite")
    if os.path.lexists(target) and not overwrite:
        raise RecordExistsError(f"{target} exists; refusing to replace it (--force / overwrite=True replaces it)",
                                store=target, rule="safety#overwrite")


def _writer_format(target: str, frames: int) -> str:
    if is_record_path(target):
        return FORMAT
    from MDAnalysis.coordinates.core import get_writer_for
    try:
        writer = get_writer_for(target, multiframe=True if frames > 1 else None)
    except (TypeError, ValueError) as exc:
        if frames > 1:
            try:
                get_writer_for(target, multiframe=False)
            except (TypeError, ValueError):
                pass
            else:
                raise UnsupportedFeatureError(f"{target}: this format holds one frame and {frames} are selected "
                                              "(pick one with --frames A:A+1)") from None
        raise UnsupportedFeatureError(f"cannot write {target}: {_one_line(exc)}") from None
    fmt = writer.format
    return str(fmt[0] if isinstance(fmt, (list, tuple)) else fmt).upper()

def convert(source: Any, target: Any, *, topology: Optional[str] = None, precision: Optional[float] = None,
            stride: int = 1, frames: Optional[slice] = None, in_format: Optional[str] = None,
            progress: Optional[Callable[[int, int], None]] = None, overwrite: bool = False,
            assume_units: Any = None) -> ConvertReport:
    """Convert the trajectory ``source`` (with ``topology``, if its format carries none) into
    ``target``; the format of each is its extension (a record: ``*.mrec``, ``*.mrec.zip``
    to read).  ``frames`` (a slice) and ``stride`` select frames; ``precision`` (record
    output only) rounds positions.  ``progress(done, total)`` is called per frame.
    ``assume_units`` (e.g. ``{"length": "nm"}``) states units a source record leaves unstated:
    one it does not state is refused, never guessed (frame-and-types §13.5).

    An existing ``target`` is replaced only with ``overwrite``, and never when it is the
    source or the topology (:func:`check_target`).  The output is written beside the target
    and moved into place when complete, so a conversion that fails leaves the old target
    (or nothing), never a half-written one."""
    source, target = str(source), str(target)
    check_target(source, target, topology, overwrite)
    if not isinstance(stride, int) or stride < 1:
        raise InvalidValueError(f"--stride must be a positive integer, got {stride!r}")
    if precision is not None and not is_record_path(target):
        raise InvalidValueError(f"{target}: --precision applies to record output (*.mrec); {target} is not one",
                                store=target)
    if precision is not None and not (math.isfinite(precision) and precision > 0):
        raise InvalidValueError(f"{target}: --precision {precision} is not a positive length: it is the step of the "
                                f"grid positions are rounded to, in the record's length unit ({PRECISION_UNIT})",
                                store=target)
    universe = _universe(source, topology, in_format, assume_units)
    start, stop, _ = (frames or slice(None)).indices(len(universe.trajectory))
    total = len(range(start, stop, stride))
    if total == 0:
        raise InvalidValueError(f"{source}: the selection holds no frame ({len(universe.trajectory)} frames)")
    fmt = _writer_format(target, total)
    atoms = universe.atoms
    if fmt in NEEDS_TOPOLOGY and not hasattr(atoms, "names"):
        raise InvalidValueError(f"{target}: a {fmt} file names every atom, and {source} carries no topology "
                                "(pass --topology FILE)")
    guessed = guess_elements(universe) if fmt == FORMAT else None  # a record names every atom's element
    system_meta = None if guessed is None else {GUESSED_KEY: MetaValue("json", guessed)}
    started = time.perf_counter()
    done = 0

    def write(out: str) -> None:
        nonlocal done
        try:
            writer = (MRECWriter(out, atoms.n_atoms, precision=precision, system_meta=system_meta) if fmt == FORMAT
                      else mda.Writer(out, n_atoms=atoms.n_atoms, **({"multiframe": True} if total > 1 else {})))
        except (ValueError, TypeError, OSError) as exc:
            raise InvalidValueError(f"cannot write {target}: {_one_line(exc)}") from None
        try:
            with writer:
                for _ in universe.trajectory[start:stop:stride]:
                    writer.write(atoms)
                    done += 1
                    if progress is not None:
                        progress(done, total)
        except MolrecError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise InvalidValueError(f"converting {source} to {target} at frame {done}: {_one_line(exc)}") from None

    if fmt == FORMAT:  # built beside the target and swapped in, under the target's lock (as the doors do)
        replace_record(target, lambda root: write(str(root.store.describe())), overwrite=overwrite)
    else:
        _write_beside(target, write)
    return ConvertReport(source, target, done, atoms.n_atoms, time.perf_counter() - started)


def _write_beside(target: str, write: Callable[[str], None]) -> None:
    """Write a file output under a temporary name beside ``target`` (same extension: the
    writer is chosen by it), then rename it into place; removed on failure."""
    head, name = os.path.split(os.path.abspath(target))
    stem, dot, ext = name.partition(".")
    staging = os.path.join(head, f".{stem}.molrec-convert-{os.getpid()}{dot}{ext}")
    try:
        write(staging)
        os.replace(staging, target)
    except BaseException:
        try:
            os.unlink(staging)
        except OSError:
            pass
        raise
