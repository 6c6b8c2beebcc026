"""Pictures of a run: ``molrec-raw plot`` and the notebook functions behind it.

    fig = molrec_raw.plot.figure("run.mrec")                 # a matplotlib Figure
    spec = molrec_raw.plot.vega_spec("run.mrec", series=["pe", "train/loss"])   # a dict
    molrec_raw.plot.render("run.mrec", out="run.png", vega="run.mlp.vl.json")

Small multiples: one panel per series (trajectory per-step meta, then metrics), titled with
the key and its stated unit, over one shared x axis (step or time); gaps never joined; a log
y scale for losses (``molrec_raw.record.runplot.panels``).  Every series is decimated to the
pixel columns it is drawn in (min/max per bucket, ``runplot.decimate``).  Images need
matplotlib — imported only by the functions that draw (the extra ``[plot]``); the Vega-Lite
specification needs nothing beyond the core.  Every output file is replaced atomically (a
temporary file in the same directory, then a rename), so a viewer never sees half a file.
"""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.record.runplot.load import load_run_series
from molrec_raw.record.runplot.panels import RunSeries
from molrec_raw.record.runplot.vegalite import PANEL_HEIGHT, PANEL_WIDTH, vega_lite_spec, write_plot_artifact
from molrec_raw.zarr.store import DirectoryStore, PathLike

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure", "vega_spec", "render", "follow", "default_image_path", "IMAGE_FORMATS", "LINE_COLOR",
           "EXTRA_HINT"]

IMAGE_FORMATS = ("png", "svg", "pdf")
LINE_COLOR = "#1f77b4"
EXTRA_HINT = "pip install 'molrec-raw[plot]'"
DPI = 100
WIDTH = 1000  # default image width, pixels
PANEL_PIXELS = 150  # default image height per panel, pixels
_METADATA: Dict[str, Dict[str, Any]] = {"png": {}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}  # no time stamps
_SOURCE_SUFFIXES = (".mrec.zip", ".mrec", ".mlp.jsonl", ".jsonl")


def _figure_class() -> "Type[Figure]":
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"drawing an image needs matplotlib: {EXTRA_HINT}") from None
    return Figure


def _size(run: RunSeries, size: Optional[Tuple[int, int]]) -> Tuple[int, int]:
    if size is None:
        return WIDTH, 60 + PANEL_PIXELS * len(run.panels)
    width, height = size
    if width < 100 or height < 60 * len(run.panels):
        raise InvalidValueError(f"an image of {width}x{height} pixels is too small for {len(run.panels)} "
                                f"panel(s) (at least 100 wide and 60 high per panel)")
    return width, height


def _draw(run: RunSeries, size: Optional[Tuple[int, int]]) -> "Figure":
    width, height = _size(run, size)
    fig = _figure_class()(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(run.panels), 1, sharex=True, squeeze=False)[:, 0]
    lo, hi = run.x_range()
    for ax, (panel, kept) in zip(axes, run.decimated(width)):
        y = panel.y[kept]
        ax.plot(panel.x[kept], np.where(np.isfinite(y), y, np.nan), color=LINE_COLOR, linewidth=1.0)
        ax.set_title(panel.title, fontsize=9, loc="left")
        if panel.log_y:
            ax.set_yscale("log")
        ax.tick_params(labelsize=8)
        ax.grid(True, linewidth=0.4, alpha=0.5)
    axes[-1].set_xlim(lo, hi if hi > lo else lo + 1)
    axes[-1].set_xlabel(run.x_title, fontsize=9)
    return fig


def figure(path: PathLike, series: Optional[Sequence[str]] = None, x: str = "step", *,
           log_y: Optional[Iterable[str]] = None, size: Optional[Tuple[int, int]] = None) -> "Figure":
    """The matplotlib figure of ``path``'s series (all, or those named), against ``x``
    (``"step"`` or ``"time"``); ``log_y``: the keys drawn on a log scale (default: losses);
    ``size``: (width, height) in pixels at 100 dpi."""
    _figure_class()  # fail on a missing matplotlib before reading anything
    return _draw(load_run_series(path, keys=series, x=x, log_y=log_y), size)


def vega_spec(path: PathLike, series: Optional[Sequence[str]] = None, x: str = "step", *,
              log_y: Optional[Iterable[str]] = None, width: int = PANEL_WIDTH,
              height: int = PANEL_HEIGHT) -> Dict[str, Any]:
    """The Vega-Lite v5 specification of ``path``'s series, decimated data inline (a dict;
    ``runplot.vegalite.spec_bytes`` gives its file bytes).  Standard library only."""
    return vega_lite_spec(load_run_series(path, keys=series, x=x, log_y=log_y), width=width, height=height)


def _replace(path: Path, data: bytes) -> Path:
    DirectoryStore(path.parent).replace_atomic(path.name, data)
    return path


def _image_format(out: Path) -> str:
    kind = out.suffix.lower().lstrip(".")
    if kind not in IMAGE_FORMATS:
        raise InvalidValueError(f"{out}: an image is {', '.join('.' + f for f in IMAGE_FORMATS)}; "
                                f"for Vega-Lite use --vega")
    return kind


def default_image_path(path: PathLike) -> Path:
    """``<dir>/<stem>.png`` beside a source (``run.mrec``, ``run.mrec.zip``, ``metrics.mlp.jsonl``)."""
    p = Path(path)
    name = p.name
    for suffix in _SOURCE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
            break
    return p.parent / f"{name}.png"


def _write(run: RunSeries, out: Optional[Path], vega: Optional[Path], size: Optional[Tuple[int, int]]) -> List[Path]:
    written = []
    if vega is not None:
        written.extend(write_plot_artifact(vega, run))  # a *.mlp.vl.json: its panels as single views too
    if out is not None:
        kind = _image_format(out)
        import matplotlib

        fig = _draw(run, size)
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "molrec-raw"}):  # SVG ids from a fixed salt, not random
            fig.savefig(buffer, format=kind, dpi=DPI, metadata=_METADATA[kind])
        written.append(_replace(out, buffer.getvalue()))
    return written


def _outputs(path: PathLike, out: Optional[PathLike], vega: Optional[PathLike]) -> Tuple[Optional[Path], Optional[Path]]:
    image = Path(out) if out is not None else (default_image_path(path) if vega is None else None)
    if image is not None:
        _image_format(image)
        _figure_class()  # a missing matplotlib is said before anything is read or written
    return image, None if vega is None else Path(vega)


def render(path: PathLike, *, out: Optional[PathLike] = None, vega: Optional[PathLike] = None,
           series: Optional[Sequence[str]] = None, x: str = "step", log_y: Optional[Iterable[str]] = None,
           size: Optional[Tuple[int, int]] = None) -> List[Path]:
    """Write the picture of ``path``: an image at ``out`` (.png/.svg/.pdf) and/or the
    Vega-Lite specification at ``vega``; neither given: ``<stem>.png`` beside the source.
    Returns the files written."""
    image, spec = _outputs(path, out, vega)
    return _write(load_run_series(path, keys=series, x=x, log_y=log_y), image, spec, size)


class _Watch:
    """Tells whether a source has changed since the last look, by polling the files whose
    replacement is a commit (trajectory ``nstep``, metrics catalog, the WAL) or the file
    itself.  This is where a live reader's ``refresh()`` takes over once readers have one."""

    _MARKERS = ("zarr.json", "trajectory/zarr.json", "metrics/zarr.json", "metrics/metrics.jsonl")

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._seen: Optional[Tuple[Any, ...]] = None

    def _signature(self) -> Tuple[Any, ...]:
        files = [self.path] if not self.path.is_dir() else [self.path / m for m in self._MARKERS]
        found: List[Optional[Tuple[int, int, int]]] = []
        for f in files:
            try:
                st = f.stat()
            except OSError:
                found.append(None)
                continue
            found.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(found)

    def forget(self) -> None:
        self._seen = None

    def changed(self) -> bool:
        now = self._signature()
        if now == self._seen:
            return False
        self._seen = now
        return True


def follow(path: PathLike, *, out: Optional[PathLike] = None, vega: Optional[PathLike] = None,
           series: Optional[Sequence[str]] = None, x: str = "step", log_y: Optional[Iterable[str]] = None,
           size: Optional[Tuple[int, int]] = None, interval: float = 1.0, stop_after: Optional[float] = None,
           report: Callable[[str], None] = print) -> None:
    """Redraw whenever ``path`` commits or logs (polling every ``interval`` seconds, until
    ``stop_after`` seconds have passed or Ctrl-C).  Outputs as for ``render``, each replaced
    atomically.  A source that has nothing to draw yet, or that cannot be read in the middle
    of a writer's commit, is reported and tried again at the next change."""
    image, spec = _outputs(path, out, vega)
    watch = _Watch(path)
    deadline = None if stop_after is None else time.monotonic() + stop_after
    last_problem: Optional[str] = None
    first = True
    while True:
        if watch.changed():
            try:
                for written in _write(load_run_series(path, keys=series, x=x, log_y=log_y), image, spec, size):
                    report(f"wrote {written}")
                last_problem = None
            except MolrecError as exc:
                if first and not isinstance(exc, InvalidValueError):
                    raise  # an unreadable source is an error, not something to wait for
                if str(exc) != last_problem:
                    print(f"molrec-raw plot: waiting: {exc}", file=sys.stderr, flush=True)
                last_problem = str(exc)
                watch.forget()  # try again at the next poll, changed or not
            first = False
        if deadline is not None and time.monotonic() >= deadline:
            return
        time.sleep(interval)
