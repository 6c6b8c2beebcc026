"""Names shared by the trajectory modules: the section's node name, the i64 range, the
progression attributes and the ``trajectory#<id>`` error constructor.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.columns import COLUMN_DTYPES

TRAJ = "trajectory"
I64 = (-(2**63), 2**63 - 1)
PROGRESSIONS = ("step_progression", "time_progression")


def spec_error(rule: str, message: str, node: str = "/trajectory") -> SpecViolationError:
    return SpecViolationError(message, node=node, rule=f"trajectory#{rule}")


def is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def numpy_dtype(tag: str) -> Any:
    return str if tag == "string" else np.dtype(COLUMN_DTYPES[tag])
