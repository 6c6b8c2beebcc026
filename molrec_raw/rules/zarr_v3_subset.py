"""Rule catalogue: the Zarr V3 subset (digest ``zarr-v3-subset.md``)."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_CORE = "zarr-developers/zarr-specs docs/v3/core/index.rst"

CHAPTER = Chapter(
    "zarr-v3-subset", 10, "the Zarr V3 subset: metadata, chunk keys, codecs, sharding, stores",
    source=_CORE, digest="zarr-v3-subset.md",
    about="What a reader and a writer of the Zarr V3 layer must do so that zarr-python and zarrs read what "
          "molrec_raw writes and molrec_raw reads what they write. Knows nothing of MolRec.")

RULES = (
    Rule("1", BOTH, "hierarchy, keys and node names",
         "A store is a flat map of '/'-separated keys; a node's metadata is '<path>/zarr.json' and every group, "
         "ancestors included, has its own (no implicit groups). A node name is non-empty, has no '/', is not only "
         "dots, does not start with '__' (reserved) and is not 'zarr.json'; writers create no other names and "
         "readers do not take '__' prefixes for children.", f"{_CORE} (hierarchy, node names)"),
    Rule("2", READER, "zarr.json is a Zarr V3 document",
         "Every node's zarr.json is one UTF-8 JSON object with zarr_format 3 and a node_type of 'group' or "
         "'array'; a value that is not JSON, another zarr_format or node_type is refused.",
         f"{_CORE} (metadata)"),
    Rule("2.1", BOTH, "group metadata",
         "A group document holds zarr_format, node_type 'group' and optionally attributes (a JSON object); writers "
         "emit exactly those keys and never an inline consolidated_metadata block, which readers ignore: members "
         "come from the store.", f"{_CORE} (group metadata)"),
    Rule("2.2", BOTH, "array metadata",
         "An array document carries shape, data_type, chunk_grid (regular, one positive extent per dimension), "
         "chunk_key_encoding, fill_value and a non-empty codecs list, optionally attributes, dimension_names and an "
         "empty storage_transformers list; a missing or ill-typed required field is refused.",
         f"{_CORE} (array metadata)"),
    Rule("2.3", BOTH, "extensions and must_understand",
         "An extension point is an object {name, configuration?} (a bare name is read too, never written). A "
         "reader refuses a node with a field or extension it does not know unless that object says "
         "must_understand: false; writers emit objects only and never must_understand.",
         f"{_CORE} (extension points)"),
    Rule("3", BOTH, "fill_value encoding",
         "fill_value follows the data type: booleans, in-range integers, floats as numbers or 'NaN' / 'Infinity' / "
         "'-Infinity' (or a hex bit pattern whose digit count picks the width), complex as [re, im], strings as "
         "strings. Writers use the plain forms; a value that is not valid for the type is refused.",
         f"{_CORE} (fill value)"),
    Rule("4", BOTH, "chunk grid and chunk keys",
         "The regular grid cuts each dimension into chunk_shape pieces, edge chunks encoded at full size with the "
         "fill value beyond the array; key 'c/i/j' in the default encoding (separator '/' or '.', 0-d 'c') or "
         "'i.j' in the v2 encoding, which readers accept and writers do not use.",
         "zarr-specs docs/v3/chunk-grids/regular-grid, docs/v3/chunk-key-encodings/{default,v2}"),
    Rule("5", BOTH, "the codec pipeline",
         "codecs is zero or more array-to-array codecs, exactly one array-to-bytes codec, then zero or more "
         "bytes-to-bytes codecs, applied in order to encode and in reverse to decode; a codec outside the subset "
         "(bytes, transpose, vlen-utf8, sharding_indexed, gzip, zstd, crc32c, numcodecs.shuffle) is refused.",
         f"{_CORE} (codecs)"),
    Rule("5.1", BOTH, "the bytes codec",
         "Elements in C order at their fixed width in the configured byte order; a multi-byte type needs an "
         "endian (refused without one). Writers always write little-endian; readers decode either order.",
         "zarr-specs docs/v3/codecs/bytes"),
    Rule("5.2", BOTH, "the transpose codec",
         "An explicit permutation 'order' of the axes; encoding transposes by it and decoding by its inverse (not "
         "by the same order). A malformed order is refused.", "zarr-specs docs/v3/codecs/transpose"),
    Rule("5.3", BOTH, "the gzip codec",
         "One RFC 1952 gzip member at an integer level 0..9 (not a zlib or raw deflate stream); writers emit a "
         "deterministic header (mtime 0); a truncated or corrupt member is refused.",
         "zarr-specs docs/v3/codecs/gzip"),
    Rule("5.4", BOTH, "the zstd codec",
         "One standard zstd frame per value; writers record the content size, readers decode frames with or "
         "without it, with or without a checksum, through a bounded reader, and refuse a frame whose size or "
         "checksum does not match the chunk.", "zarr-developers/zarr-extensions codecs/zstd"),
    Rule("5.5", BOTH, "the crc32c codec",
         "The value is followed by the CRC-32C (Castagnoli) of the bytes before it, 4 bytes little-endian; "
         "readers verify it on every read and refuse a mismatch.", "zarr-specs docs/v3/codecs/crc32c"),
    Rule("5.6", BOTH, "the numcodecs.shuffle codec",
         "Byte transposition by 'elementsize': byte j of every element is gathered into plane j. The input length "
         "must be a multiple of the element size; writers always state elementsize.",
         "zarr-developers/zarr-extensions (branch numcodecs) codecs/numcodecs.shuffle"),
    Rule("5.7", BOTH, "the vlen-utf8 codec and the string type",
         "data_type 'string' is encoded by vlen-utf8: a u32 count equal to the chunk's element count, then per "
         "element a u32 byte length and its UTF-8 bytes; a truncated, overlong or non-UTF-8 value is refused.",
         "zarr-developers/zarr-extensions codecs/vlen-utf8, data-types/string"),
    Rule("6", BOTH, "missing and empty chunks",
         "A chunk that is not stored reads as all fill value, never as an error; a writer may omit (or delete) a "
         "chunk whose every element equals the fill value.", f"{_CORE} (chunk storage)"),
    Rule("7", BOTH, "the sharding_indexed codec",
         "A shard holds inner chunks of 'chunk_shape' (dividing the shard) and an index of (offset, nbytes) u64 "
         "pairs in C order, encoded by index_codecs (fixed size, e.g. bytes + crc32c) at the start or end; "
         "(2^64-1, 2^64-1) marks an empty inner chunk. Readers check the index and refuse an entry that leaves "
         "the shard or a shard shorter than its index.", "zarr-specs docs/v3/codecs/sharding-indexed"),
    Rule("8", BOTH, "data types",
         "The core types bool, int8..int64, uint8..uint64, float16/32/64, complex64/128 and the extension "
         "'string', written as bare names; any other data type is refused.",
         f"{_CORE} (data types), zarr-extensions data-types/string"),
    Rule("9.1", WRITER, "the directory store",
         "Keys map to files under the root directory, '/' to the path separator; values are written whole and "
         "replaced atomically (a temporary file renamed over the key).",
         "zarr-specs docs/v3/stores/filesystem"),
    Rule("9.2", BOTH, "the zip store",
         "An archive's entry names are the store keys relative to the root (root zarr.json at the archive root; "
         "'/' only; no leading '/', '.', '..' or empty segments), entries are STORED, ZIP64 is read, the last "
         "record of a repeated name wins, and an entry's CRC-32 is checked when it is read whole. Writers emit no "
         "duplicates and no directory entries.",
         "zarr-specs zip store draft (PR 311), OME-Zarr RFC-9, zarr-python ZipStore"),
)
