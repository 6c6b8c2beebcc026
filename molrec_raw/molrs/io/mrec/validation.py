"""``molrs.io.mrec.validation``: the record contract's runtime check of a frame."""
from __future__ import annotations

from molrec_raw.molrs.core import Frame

__all__ = ["validate_frame"]


def validate_frame(frame: Frame) -> None:
    """Refuse (``ValueError``) a frame a record writer would refuse (frame-and-types §14)."""
    if not isinstance(frame, Frame):
        raise TypeError(f"validate_frame takes a Frame, not {type(frame).__name__}")
    frame.validate()
