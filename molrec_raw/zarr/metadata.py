"""``zarr.json`` documents for groups and arrays: parse, validate, dump (zarr-v3-subset §2–§4).

Metadata is data: frozen dataclasses, one ``from_json`` and one ``to_json``.
Readers accept what other writers emit (short-hand names, missing optional
members, extra fields marked ``must_understand: false`` — which are kept and
written back); writers emit the canonical profile of §12 in a fixed key order.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod
from typing import AbstractSet, Any, Dict, Optional, Tuple

from molrec_raw.errors import InvalidMetadataError, UnsupportedFeatureError, brief
from molrec_raw.zarr import jsonio
from molrec_raw.zarr.dtypes import DataType, data_type

__all__ = ["ChunkKeyEncoding", "ArrayMetadata", "GroupMetadata", "parse_metadata"]

_ARRAY_KEYS = {
    "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
    "fill_value", "codecs", "attributes", "dimension_names", "storage_transformers",
}
_GROUP_KEYS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _extension(raw: Any, what: str) -> Tuple[str, Dict[str, Any]]:
    """(name, configuration) of an extension point given as an object or a bare name."""
    if isinstance(raw, str):
        return raw, {}
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        if raw.get("must_understand") is False:
            raise InvalidMetadataError(f"{what} may not be marked must_understand: false")
        config = raw.get("configuration", {}) or {}
        if not isinstance(config, dict):
            raise InvalidMetadataError(f"{what} configuration must be an object")
        return raw["name"], config
    raise InvalidMetadataError(f"{what} must be an object with a 'name', got {brief(raw)}")


def _extra_fields(doc: Dict[str, Any], known: AbstractSet[str]) -> Dict[str, Any]:
    """Unknown top-level keys: kept when marked must_understand:false, else refused."""
    extra = {}
    for key, value in doc.items():
        if key in known:
            continue
        if isinstance(value, dict) and value.get("must_understand") is False:
            extra[key] = value
        else:
            raise UnsupportedFeatureError(
                f"zarr.json has an unknown required field {key!r}", rule="zarr-v3-subset#2.3"
            )
    return extra


def _attributes(doc: Dict[str, Any]) -> Dict[str, Any]:
    attrs = doc.get("attributes", {})
    if attrs is None:
        return {}
    if not isinstance(attrs, dict):
        raise InvalidMetadataError("'attributes' must be a JSON object")
    return attrs


@dataclass(frozen=True)
class ChunkKeyEncoding:
    """``default`` (``c/1/2``) or ``v2`` (``1.2``) chunk keys (zarr-v3-subset#4)."""

    name: str = "default"
    separator: str = "/"

    @classmethod
    def from_json(cls, raw: Any) -> "ChunkKeyEncoding":
        """Parse the ``chunk_key_encoding`` object (or bare name); another encoding is refused."""
        name, config = _extension(raw, "chunk_key_encoding")
        if name not in ("default", "v2"):
            raise UnsupportedFeatureError(f"chunk key encoding {name!r} is not supported")
        if set(config) - {"separator"}:
            raise InvalidMetadataError(f"chunk_key_encoding has unknown keys {sorted(set(config) - {'separator'})}")
        separator = config.get("separator", "/" if name == "default" else ".")
        if separator not in ("/", "."):
            raise InvalidMetadataError(f"chunk key separator must be '/' or '.', got {brief(separator)}")
        return cls(name, separator)

    def to_json(self) -> Dict[str, Any]:
        """The object form writers emit, configuration included (zarr-v3-subset#2.3)."""
        return {"name": self.name, "configuration": {"separator": self.separator}}

    def encode(self, coords: Tuple[int, ...]) -> str:
        """The key of the chunk at grid ``coords``: ``c/1/2`` (default), ``1.2`` (v2); a 0-d
        array's chunk is ``c`` (default) or ``0`` (v2)."""
        if self.name == "default":
            return self.separator.join(["c", *map(str, coords)])
        return self.separator.join(map(str, coords)) if coords else "0"

    def decode(self, key: str, ndim: int) -> Optional[Tuple[int, ...]]:
        """The grid coordinates of chunk key ``key`` of an ``ndim``-d array; None when
        ``key`` is not one :meth:`encode` writes."""
        parts = key.split(self.separator)
        if self.name == "default":
            if parts[0] != "c":
                return None
            parts = parts[1:]
        elif ndim == 0:
            return () if key == "0" else None
        if len(parts) != ndim or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        coords = tuple(int(p) for p in parts)
        return coords if self.encode(coords) == key else None


@dataclass(frozen=True)
class GroupMetadata:
    """A group's ``zarr.json`` (zarr-v3-subset#2.1): its attributes, and extra top-level keys
    marked ``must_understand: false`` kept as read."""

    attributes: Dict[str, Any] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)

    node_type = "group"

    @classmethod
    def from_dict(cls, doc: Dict[str, Any]) -> "GroupMetadata":
        """Parse a group document already decoded from JSON (zarr_format and node_type checked
        by :func:`parse_metadata`)."""
        # consolidated_metadata is ignored and not written back: a stale copy would hide members.
        return cls(_attributes(doc), _extra_fields(doc, _GROUP_KEYS))

    def to_json(self) -> bytes:
        """The document's bytes as written: zarr_format, node_type, attributes, extra keys."""
        return jsonio.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": self.attributes, **self.extra}
        )


@dataclass(frozen=True)
class ArrayMetadata:
    """An array's ``zarr.json`` (zarr-v3-subset#2.2): shape, data type, chunk shape, fill value,
    codecs, chunk key encoding, attributes, dimension names and kept extra keys."""

    shape: Tuple[int, ...]
    dtype: DataType
    chunk_shape: Tuple[int, ...]
    fill_value: Any
    codecs: Tuple[Any, ...]
    chunk_key_encoding: ChunkKeyEncoding = ChunkKeyEncoding()
    attributes: Dict[str, Any] = field(default_factory=dict)
    dimension_names: Optional[Tuple[Optional[str], ...]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    node_type = "array"

    def __post_init__(self) -> None:
        if len(self.chunk_shape) != len(self.shape):
            raise InvalidMetadataError(
                f"chunk shape {list(self.chunk_shape)} and shape {list(self.shape)} differ in rank"
            )
        if self.dimension_names is not None and len(self.dimension_names) != len(self.shape):
            raise InvalidMetadataError("dimension_names must have one entry per dimension")

    @property
    def grid_shape(self) -> Tuple[int, ...]:
        """Chunks per dimension, ``ceil(shape / chunk_shape)`` (zarr-v3-subset#4)."""
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunk_shape))

    @property
    def nchunks(self) -> int:
        """The number of chunks of the grid."""
        return prod(self.grid_shape)

    def with_shape(self, shape: Tuple[int, ...]) -> "ArrayMetadata":
        """A copy with another shape (everything else kept)."""
        return replace(self, shape=tuple(shape))

    def with_attributes(self, attributes: Dict[str, Any]) -> "ArrayMetadata":
        """A copy with other attributes (everything else kept)."""
        return replace(self, attributes=attributes)

    @classmethod
    def from_dict(cls, doc: Dict[str, Any]) -> "ArrayMetadata":
        """Parse an array document already decoded from JSON; a missing or malformed required
        field is refused (zarr-v3-subset#2.2)."""
        for key in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
            if key not in doc:
                raise InvalidMetadataError(f"array zarr.json lacks required {key!r}", rule="zarr-v3-subset#2.2")
        shape = doc["shape"]
        if not isinstance(shape, list) or not all(_is_int(s) and 0 <= s < 2**63 for s in shape):
            raise InvalidMetadataError(f"shape must be a list of non-negative integers, got {brief(shape)}")
        dtype = data_type(doc["data_type"])
        grid_name, grid_config = _extension(doc["chunk_grid"], "chunk_grid")
        if grid_name != "regular":
            raise UnsupportedFeatureError(f"chunk grid {grid_name!r} is not supported")
        chunks = grid_config.get("chunk_shape")
        if set(grid_config) != {"chunk_shape"} or not isinstance(chunks, list) or not all(
            _is_int(c) and 1 <= c < 2**63 for c in chunks
        ):
            raise InvalidMetadataError(f"regular chunk grid needs positive integer chunk_shape, got {brief(grid_config)}")
        transformers = doc.get("storage_transformers") or []
        if transformers:
            raise UnsupportedFeatureError("storage transformers are not supported", rule="zarr-v3-subset#2.2")
        codecs = doc["codecs"]
        if not isinstance(codecs, list) or not codecs:
            raise InvalidMetadataError("'codecs' must be a non-empty list")
        names = doc.get("dimension_names")
        if names is not None:
            if not isinstance(names, list) or not all(n is None or isinstance(n, str) for n in names):
                raise InvalidMetadataError("dimension_names must be a list of strings or nulls")
            names = tuple(names)
        return cls(
            shape=tuple(shape),
            dtype=dtype,
            chunk_shape=tuple(chunks),
            fill_value=dtype.parse_fill(doc["fill_value"]),
            codecs=tuple(codecs),
            chunk_key_encoding=ChunkKeyEncoding.from_json(doc["chunk_key_encoding"]),
            attributes=_attributes(doc),
            dimension_names=names,
            extra=_extra_fields(doc, _ARRAY_KEYS),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The document as a JSON object, in the form writers emit (extension points as objects)."""
        doc: Dict[str, Any] = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(self.shape),
            "data_type": self.dtype.name,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.chunk_shape)}},
            "chunk_key_encoding": self.chunk_key_encoding.to_json(),
            "fill_value": self.dtype.encode_fill(self.fill_value),
            "codecs": list(self.codecs),
            "attributes": self.attributes,
        }
        if self.dimension_names is not None:
            doc["dimension_names"] = list(self.dimension_names)
        doc.update(self.extra)
        return doc

    def to_json(self) -> bytes:
        """The document's bytes as written."""
        return jsonio.dumps(self.to_dict())


def parse_metadata(data: bytes) -> Any:
    """Parse a zarr.json into GroupMetadata or ArrayMetadata."""
    doc = jsonio.loads(data)
    if not isinstance(doc, dict):
        raise InvalidMetadataError("zarr.json must hold a JSON object")
    if doc.get("zarr_format") != 3 or isinstance(doc.get("zarr_format"), bool):
        raise UnsupportedFeatureError(
            f"zarr_format {brief(doc.get('zarr_format'))} is not supported (only 3)", rule="zarr-v3-subset#2"
        )
    node_type = doc.get("node_type")
    if node_type == "group":
        return GroupMetadata.from_dict(doc)
    if node_type == "array":
        return ArrayMetadata.from_dict(doc)
    raise InvalidMetadataError(f"node_type must be 'group' or 'array', got {brief(node_type)}")
