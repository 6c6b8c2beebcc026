"""The Zarr V3 subset molrec_raw needs, written from the spec (knows nothing of MolRec).

Public face, close to zarr-python's: ``open_group``, ``open_array``, ``Group``,
``Array``, and the stores ``DirectoryStore``, ``MemoryStore``, ``ZipStore``.  Each name is
imported on first use (PEP 562, ``molrec_raw._lazy``): adding one is one line in the
``TYPE_CHECKING`` block.
"""
from typing import TYPE_CHECKING

from molrec_raw import _lazy

if TYPE_CHECKING:
    from molrec_raw.zarr.array import Array as Array
    from molrec_raw.zarr.codecs import ChunkSpec as ChunkSpec
    from molrec_raw.zarr.codecs import CodecPipeline as CodecPipeline
    from molrec_raw.zarr.codecs import Limits as Limits
    from molrec_raw.zarr.codecs import codec_class as codec_class
    from molrec_raw.zarr.codecs import registered_codecs as registered_codecs
    from molrec_raw.zarr.group import Group as Group
    from molrec_raw.zarr.group import default_codecs as default_codecs
    from molrec_raw.zarr.group import is_valid_node_name as is_valid_node_name
    from molrec_raw.zarr.group import open_array as open_array
    from molrec_raw.zarr.group import open_group as open_group
    from molrec_raw.zarr.metadata import ArrayMetadata as ArrayMetadata
    from molrec_raw.zarr.metadata import ChunkKeyEncoding as ChunkKeyEncoding
    from molrec_raw.zarr.metadata import GroupMetadata as GroupMetadata
    from molrec_raw.zarr.metadata import parse_metadata as parse_metadata
    from molrec_raw.zarr.store import DirectoryStore as DirectoryStore
    from molrec_raw.zarr.store import MemoryStore as MemoryStore
    from molrec_raw.zarr.store import PathLike as PathLike
    from molrec_raw.zarr.store import Store as Store
    from molrec_raw.zarr.store import validate_key as validate_key
    from molrec_raw.zarr.zipstore import ZipStore as ZipStore
else:  # type checkers see the imports above; unknown names stay errors for them
    __getattr__, __dir__, __all__ = _lazy.attach(__name__)
