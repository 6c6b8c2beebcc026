"""The Zarr V3 subset molrec_raw needs, written from the spec (knows nothing of MolRec).

Public face, close to zarr-python's: ``open_group``, ``open_array``, ``Group``,
``Array``, and the stores ``DirectoryStore``, ``MemoryStore``, ``ZipStore``.
"""
from molrec_raw.zarr.array import Array
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline, Limits, codec_class, registered_codecs
from molrec_raw.zarr.group import Group, default_codecs, is_valid_node_name, open_array, open_group
from molrec_raw.zarr.metadata import ArrayMetadata, ChunkKeyEncoding, GroupMetadata, parse_metadata
from molrec_raw.zarr.store import DirectoryStore, MemoryStore, PathLike, Store, validate_key
from molrec_raw.zarr.zipstore import ZipStore

__all__ = [
    "Array", "ArrayMetadata", "ChunkKeyEncoding", "ChunkSpec", "CodecPipeline", "DirectoryStore",
    "Group", "GroupMetadata", "Limits", "MemoryStore", "PathLike", "Store", "ZipStore", "codec_class",
    "default_codecs", "is_valid_node_name", "open_array", "open_group", "parse_metadata", "registered_codecs",
    "validate_key",
]
