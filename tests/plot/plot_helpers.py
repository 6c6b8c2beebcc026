"""Helpers of the plot tests: records with known series, and images read back as pixels."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecWriter, SequenceSchema

GAP = range(400, 600)  # steps where series "a" of the gap record is NaN


def trajectory_record(path: Path, frames: int, meta: Dict[str, str], values: Any,
                      units: Optional[Any] = None, section: str = "system", times: bool = True) -> Path:
    """A record with a ``section`` carrying ``units`` (when given) and a trajectory whose
    per-step meta ``key`` (tag ``meta[key]``) at frame i is ``values(key, i)``."""
    extra = {} if units is None else {"units": units}
    atoms = mr.Frame(extra, {"atoms": mr.Block({"x": np.zeros(2)})})
    if section == "frame":
        mr.write_mrec_frame(path, atoms)
    else:
        mr.write_mrec_system(path, atoms)
    schema = SequenceSchema().declare_block("atoms", rows=2).declare_column("atoms", "x", "f64")
    for key, tag in meta.items():
        schema.declare_meta(key, tag)
    with MrecWriter(path, schema, flush_every=256) as w:
        for i in range(frames):
            frame = mr.Frame({key: values(key, i) for key in meta}, {"atoms": mr.Block({"x": np.full(2, float(i))})})
            w.append(frame, step=10 * i, time=0.5 * i if times else None)
    return path



def rgb(png: Union[bytes, str]) -> np.ndarray:
    """A PNG (bytes or file) as an H×W×3 float array in [0, 1]."""
    import matplotlib.image

    image = matplotlib.image.imread(io.BytesIO(png) if isinstance(png, bytes) else png, format="png")
    if image.dtype == np.uint8:
        image = image / 255.0
    return np.asarray(image[..., :3], dtype=np.float64)


def line_pixels(image: np.ndarray) -> np.ndarray:
    """Pixels of a blue line (matplotlib's C0 and Vega-Lite's default, antialiased too):
    clearly bluer than red — grid, axes and text are grey or black, the background white."""
    return (image[..., 2] - image[..., 0] > 0.2) & (image[..., 2] > 0.45)


def runs(mask: np.ndarray, bridge: int = 2) -> List[Tuple[int, int]]:
    """[first, last] index ranges where a 1-D mask is True, joining runs at most ``bridge``
    apart (antialiasing leaves one-pixel holes in a steep line)."""
    found: List[Tuple[int, int]] = []
    for i in np.flatnonzero(mask).tolist():
        if found and i - found[-1][1] <= bridge + 1:
            found[-1] = (found[-1][0], i)
        else:
            found.append((i, i))
    return found


def panel_frames(image: np.ndarray) -> List[Tuple[int, int]]:
    """Row ranges (top, bottom) between the dark horizontal spines of matplotlib panels: a
    spine row is dark over more than half the image width."""
    dark = (image.max(axis=2) < 0.35).mean(axis=1) > 0.5
    spines = [(a + b) // 2 for a, b in runs(dark, bridge=0)]
    assert len(spines) % 2 == 0, f"unpaired spines at rows {spines}"
    return [(spines[i], spines[i + 1]) for i in range(0, len(spines), 2)]
