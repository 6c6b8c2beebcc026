"""Codecs of the subset, one small class each, registered by name (zarr-v3-subset#5)."""
from molrec_raw.zarr.codecs.base import ChunkSpec, Codec, Limits, codec_class, registered_codecs
from molrec_raw.zarr.codecs import (  # noqa: F401  (importing registers each codec)
    bytes_codec, crc32c_codec, gzip_codec, sharding, shuffle, transpose, vlen_utf8, zstd_codec,
)
from molrec_raw.zarr.codecs.pipeline import CodecPipeline

__all__ = ["ChunkSpec", "Codec", "CodecPipeline", "Limits", "codec_class", "registered_codecs"]
