"""``transpose``: permute chunk axes; decode applies the inverse order (zarr-v3-subset#5.2)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from molrec_raw.errors import InvalidMetadataError
from molrec_raw.zarr.codecs.base import ArrayArrayCodec, ChunkSpec, check_config, register
from molrec_raw.zarr.parts import Part


@register
class TransposeCodec(ArrayArrayCodec):
    name = "transpose"

    def __init__(self, spec: ChunkSpec, order: Tuple[int, ...]) -> None:
        self.spec = spec
        self.order = order
        self.inverse = tuple(int(i) for i in np.argsort(order))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "TransposeCodec":
        check_config(cls.name, config, {"order": lambda v: isinstance(v, (list, str))}, ("order",))
        raw = config["order"]
        ndim = len(spec.shape)
        if raw == "C":  # legacy forms, accepted on read only
            raw = list(range(ndim))
        elif raw == "F":
            raw = list(range(ndim))[::-1]
        if not isinstance(raw, list) or sorted(raw) != list(range(ndim)) or any(
            isinstance(i, bool) for i in raw
        ):
            raise InvalidMetadataError(
                f"transpose order {config['order']!r} is not a permutation of 0..{ndim - 1}",
                rule="zarr-v3-subset#5.2",
            )
        return cls(spec, tuple(raw))

    def to_json(self) -> Dict[str, Any]:
        return {"name": "transpose", "configuration": {"order": list(self.order)}}

    def output_spec(self) -> ChunkSpec:
        return replace(self.spec, shape=tuple(self.spec.shape[i] for i in self.order))

    def describe(self, data: Any) -> List[Part]:
        return [Part("order", list(self.order), f"stored axes are the chunk's axes in this order; decoding "
                     f"applies the inverse {list(self.inverse)}", rule="zarr-v3-subset#5.2")]

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        return np.transpose(chunk, self.order)

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        return np.transpose(chunk, self.inverse)
