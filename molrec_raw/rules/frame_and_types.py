"""Rule catalogue: frame-shaped sections, column types, meta, box and conventions (digest
``frame-and-types.md``): its sections and its checklist (section 14, items 14.1-14.50)."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_M = "MolCrafts/molrec docs/spec/"
_FRAME = f"{_M}frame.md"
_STORAGE = f"{_M}storage.md"
_CONV = f"{_M}conventions.md"

CHAPTER = Chapter(
    "frame-and-types", 30, "frame-shaped sections, column dtypes, typed meta, the box, conventions",
    source=f"{_FRAME}, {_STORAGE}", digest="frame-and-types.md",
    about="The layout shared by frame/, system/ and the force field's tables: blocks of typed columns, masks, "
          "declared precision, row references, the cell and the typed meta document.")

RULES = (
    # -- sections of the digest ----------------------------------------------------------
    Rule("2", BOTH, "the 13 column dtypes",
         "A column is f64, i8, i16, i32, i64, u8, u16, u32, u64, bool, string, c64 or c128, each stored as "
         "exactly one Zarr data type (float64, int8 ... uint64, bool, string with vlen-utf8, complex64/128); the "
         "mapping is exact both ways and no tool changes a dtype on a round trip.",
         f"{_STORAGE} (Data types on Zarr V3), {_FRAME}"),
    Rule("3", BOTH, "the frame-shaped group",
         "A frame-shaped section is a group whose attributes are its meta document (plus _meta_types), whose child "
         "groups are blocks (except the reserved box) and whose blocks' child arrays are columns; a block of 0 "
         "rows keeps its columns at 0 rows.", f"{_STORAGE} (Frame-shaped group)"),
    Rule("4", BOTH, "the typed meta document",
         "Each meta value is stored in the typed JSON form of one of 16 tags (bool, i32, i64, u32, u64, f64, "
         "string, json, bool3, i32x3, i64x3, u32x3, u64x3, f64x3, f64x6, f64x9) and _meta_types maps every key to "
         "its tag; values come back at their tag.", f"{_STORAGE}, {_CONV} (typed JSON values)"),
    Rule("5", BOTH, "blocks",
         "A block group carries the required count (its row count, also without columns), optionally "
         "structural_shape (product = count) and targets; any other attribute is the producer's and is kept. "
         "count, structural_shape and targets are set through the block's fields, not as free attributes.",
         f"{_FRAME} (blocks)"),
    Rule("6", BOTH, "columns",
         "A column is an array [count, trailing...] with at least the leading row axis, in C order; chunking and "
         "the must-decode codecs are free, lossy codecs are not admitted.", f"{_FRAME} (columns)"),
    Rule("7", BOTH, "nullable columns",
         "A column may have a validity mask <block>/_validity/<column>, bool[count], true = the row holds a value; "
         "the value under a null row is carried, never interpreted. No mask (or an all-true one) means every row "
         "is valid.", f"{_FRAME} (nullable columns)"),
    Rule("8", BOTH, "declared precision",
         "An f64 column may declare an absolute precision p (array attribute 'precision'); the writer stores each "
         "value rounded to the power-of-two quantum under p (ties to even, the sign of zero kept), the reader "
         "returns the stored values exactly and keeps the declaration.", f"{_FRAME} (declared precision)"),
    Rule("9", BOTH, "row references",
         "A u64 column may reference rows of another block: the endpoints atomi..atomm point into atoms by "
         "convention, any other reference is declared in the block's targets as '<block>' (same section) or "
         "'/<section>/<block>' (frame or system); every non-null value is below the target's row count.",
         f"{_FRAME} (row references)"),
    Rule("10", BOTH, "the box",
         "box/ holds vectors (f64 3x3, the lattice vectors are the columns), origin (f64[3], default 0) and "
         "boundary (bool[3], default all periodic) as arrays, and cell_defined only when false; an undefined cell "
         "stores identity vectors and an explicit all-false boundary, and readers return identity vectors for it.",
         f"{_FRAME} (box)"),
    Rule("11", BOTH, "the meta document",
         "meta/ is a plain JSON document (no _meta_types): optional creator and author (each with a name), "
         "created_at (RFC 3339 with offset), source, record_id, content_hash, modules; unknown keys are kept.",
         f"{_M}overview.md (meta)"),
    Rule("11.1", BOTH, "meta document keys",
         "creator and author are objects with a string name; created_at is an RFC 3339 instant with an explicit "
         "offset; source, record_id and content_hash are strings; modules is an object of objects. A named key "
         "of the wrong type is refused.", f"{_M}overview.md (meta), meta.schema.json"),
    Rule("13.2", BOTH, "the atoms block",
         "The per-particle block is named atoms, one row per particle, with canonical columns such as x, y, z "
         "(f64), type, element, mass, charge; a tool that needs positions finds them there.",
         f"{_CONV} (canonical column keys)"),
    Rule("13.5", BOTH, "units",
         "Only mass (dalton) and charge (e) have default units; coordinates, velocities, forces and energies have "
         "none, so a reader needing one must find it declared (the frame or system meta key 'units', shaped like "
         "the force field's units object). Nothing is converted silently.", f"{_CONV} (units)"),
    # -- checklist: reader refuses --------------------------------------------------------
    Rule("14.1", READER, "no narrow floats",
         "A column stored as float16 or float32 is refused, never widened.", f"{_STORAGE} (Data types on Zarr V3)"),
    Rule("14.2", READER, "no other Zarr data types",
         "A column of any Zarr data type outside the 13 column dtypes (fixed_length_utf32, raw bytes, r*, ...) is "
         "refused.", f"{_STORAGE} (Data types on Zarr V3)"),
    Rule("14.3", READER, "canonical keys at their width",
         "A canonical key stored at another dtype or shape than its canonical one (e.g. an atomi endpoint not "
         "u64[N]) is refused.", f"{_CONV} (canonical column keys)"),
    Rule("14.4", READER, "a block has a count",
         "A block group without a count attribute is refused.", f"{_FRAME} (blocks)"),
    Rule("14.5", READER, "count is a non-negative integer",
         "A count that is not a non-negative JSON integer (a boolean, 3.0, -1) is refused.", f"{_FRAME} (blocks)"),
    Rule("14.6", READER, "columns agree with count",
         "A block with a column whose leading length differs from count, or a column with no leading axis, is "
         "refused.", f"{_FRAME} (blocks)"),
    Rule("14.7", READER, "structural_shape multiplies to count",
         "A structural_shape that is not non-negative integers whose product is count is refused.",
         f"{_FRAME} (blocks)"),
    Rule("14.8", READER, "masks are bool",
         "A _validity mask not stored as a bool array is refused.", f"{_FRAME} (nullable columns)"),
    Rule("14.9", READER, "masks have one flag per row",
         "A _validity mask whose length differs from count, or that is not 1-D, is refused.",
         f"{_FRAME} (nullable columns)"),
    Rule("14.10", READER, "masks name columns",
         "A _validity mask named for a column the block does not have is refused.", f"{_FRAME} (nullable columns)"),
    Rule("14.11", READER, "same-section targets exist",
         "A targets entry whose target block is missing while the referencing block has rows is refused.",
         f"{_FRAME} (row references)"),
    Rule("14.12", READER, "references are in range",
         "A non-null referenced value at or past the target's row count (same section, or absolute into a present "
         "frame or system) is refused.", f"{_FRAME} (row references)"),
    Rule("14.13", READER, "target syntax",
         "targets must be an object {column: target} with each target '<block>' or '/<section>/<block>' and never "
         "'/trajectory/...'; anything else is refused.", f"{_FRAME} (row references)"),
    Rule("14.14", READER, "targets name u64 columns",
         "A targets key that names no column, or a column that is not u64[N], is refused.",
         f"{_FRAME} (row references)"),
    Rule("14.15", READER, "_meta_types is well formed",
         "_meta_types must be a JSON object, and the entry of a key that is present a string naming one of the 16 "
         "tags; stale entries for absent keys are ignored.", f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.16", READER, "tagged values in their typed form",
         "A tagged meta value not in its tag's typed JSON form is refused: a wrong JSON type, null for a number, a "
         "real for an integer tag, an integer out of range, a boolean for a number, a wrong vector length, a bad "
         "non-finite spelling, a non-decimal integer string.", f"{_CONV} (typed JSON values)"),
    Rule("14.17", READER, "cell_defined is a boolean",
         "A box whose cell_defined attribute is present but not a JSON boolean is refused.", f"{_FRAME} (box)"),
    Rule("14.18", READER, "an undefined cell is not periodic",
         "An undefined cell (cell_defined false) with any true boundary flag is refused.", f"{_FRAME} (box)"),
    Rule("14.19", READER, "box shapes",
         "vectors not f64 3x3, origin not f64 of 3, boundary not bool of 3 are refused.", f"{_FRAME} (box)"),
    Rule("14.20", READER, "declared precision is well formed",
         "A precision attribute that is not a finite number in [2^-1000, 2^1000], or sits on a non-f64 column, is "
         "refused on read.", f"{_FRAME} (declared precision)"),
    Rule("14.21", READER, "meta document rules",
         "A meta document whose creator or author lacks a string name, or whose created_at is not RFC 3339 with "
         "an offset, is refused.", f"{_M}overview.md (meta)"),
    Rule("14.22", READER, "substantive sections are reported",
         "A record with meta but none of frame, system, trajectory, forcefield, status is reported by validation; "
         "a reader still opens what is there (README#decision-2).", f"{_M}overview.md (sections)"),
    Rule("14.23", READER, "molrec_version is checked when present",
         "A molrec_version that is present and not a JSON integer in 1..2 (null, 0, '1', 1.0, true, 3) is refused "
         "(README#decision-1).", f"{_STORAGE} (Invariants, 6)"),
    # -- checklist: reader must not refuse -------------------------------------------------
    Rule("14.24", READER, "a missing meta/ is an empty document",
         "A record without a meta/ group reads as an empty meta document.",
         f"{_STORAGE} (Document sections)"),
    Rule("14.25", READER, "the unknown is preserved",
         "Unknown root sections, document keys (null-valued ones included), blocks, columns and block attributes "
         "are kept verbatim, never refused.", f"{_STORAGE} (Invariants, 5)"),
    Rule("14.26", READER, "untagged meta is inferred",
         "An untagged meta key gets the inferred tag: boolean -> bool, integer in [-2^63, 2^63) -> i64, in "
         "[2^63, 2^64) -> u64, any other number -> f64, string -> string, anything else -> json; stale tags are "
         "ignored.", f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.27", READER, "off-grid precision values are returned",
         "Values of a precision column that are not multiples of its quantum are returned exactly as stored (a "
         "validator may report them).", f"{_FRAME} (declared precision)"),
    Rule("14.28", READER, "an all-true mask is no mask",
         "An all-true mask means the same as no mask, and an absent mask or _validity group means every row is "
         "valid.", f"{_FRAME} (nullable columns)"),
    Rule("14.29", READER, "box defaults",
         "Absent box parts take their normative defaults: origin 0, boundary all true (all false for an "
         "undefined cell), identity vectors for an undefined cell.", f"{_FRAME} (box)"),
    Rule("14.30", READER, "no molrec_version, no check",
         "A record without molrec_version is a current store: nothing is checked for the key, and it is read "
         "and validated by the current rules (README#decision-1).",
         f"{_STORAGE} (Invariants, 6)"),
    # -- checklist: writer refuses -----------------------------------------------------------
    Rule("14.31", WRITER, "no block named box",
         "A block named box in a frame-shaped section is refused (box is the cell).",
         f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.32", WRITER, "no column named _validity",
         "A column named _validity is refused (the masks' subgroup).", f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.33", WRITER, "no meta key named _meta_types",
         "A meta document with a key _meta_types is refused.", f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.34", WRITER, "precision only on f64 columns",
         "A declared precision on a column that is not f64, or that the block does not have, is refused.",
         f"{_FRAME} (declared precision)"),
    Rule("14.35", WRITER, "precision in range",
         "A precision that is 0, negative, not finite, below 2^-1000 or above 2^1000 is refused.",
         f"{_FRAME} (declared precision)"),
    Rule("14.36", WRITER, "meta values exactly at their tag",
         "A meta value not exactly representable at its tag is refused (a real for an integer tag, out of range, "
         "a boolean for a number, a wrong width, a non-finite value inside json); only exact coercions (an "
         "integer for f64) are made.", f"{_CONV} (typed JSON values)"),
    Rule("14.37", WRITER, "columns are one of the 13 dtypes",
         "A column of a dtype outside the 13 (f16, f32, width-abstract names, json, bytes, objects that are not "
         "strings) is refused.", f"{_STORAGE} (Data types on Zarr V3)"),
    Rule("14.38", WRITER, "canonical keys at their canonical dtype",
         "A canonical key at a non-canonical dtype or with trailing axes is refused (an exact unsigned widening "
         "to u64 is made first).", f"{_CONV} (canonical column keys)"),
    Rule("14.39", WRITER, "targets are checked before writing",
         "Malformed or '/trajectory/' targets, targets on missing or non-u64[N] columns and dangling same-section "
         "references are refused.", f"{_FRAME} (row references)"),
    Rule("14.40", WRITER, "blocks agree with themselves",
         "A column whose length differs from count, a structural_shape whose product differs from count and a "
         "mask that is not bool of the block's length are refused.", f"{_FRAME} (blocks)"),
    Rule("14.41", WRITER, "finite JSON only",
         "NaN or infinity inside any untyped document, block attribute or json value is refused (serialised with "
         "NaN forbidden).", f"{_CONV} (typed JSON values)"),
    # -- checklist: writer obligations ----------------------------------------------------------
    Rule("14.42", WRITER, "write order",
         "Create the root zarr.json, then meta/, then the sections; meta/ always exists.",
         f"{_STORAGE} (Document sections)"),
    Rule("14.43", WRITER, "count on every block",
         "Write count on every block, a block without columns too, and structural_shape on a volumetric one.",
         f"{_FRAME} (blocks)"),
    Rule("14.44", WRITER, "_meta_types for every key",
         "Write a _meta_types entry for every meta key and omit the attribute for an empty document; values in "
         "their typed JSON form.", f"{_STORAGE} (Frame-shaped group)"),
    Rule("14.45", WRITER, "precision columns stored rounded",
         "Store a precision column exactly as its rounding (frame-and-types#8) and write the precision attribute "
         "on the array; only the stored copy is rounded.", f"{_FRAME} (declared precision)"),
    Rule("14.46", WRITER, "no _validity for unmasked blocks",
         "Write no _validity subgroup for a block with no masked column; all-true masks may be omitted.",
         f"{_FRAME} (nullable columns)"),
    Rule("14.47", WRITER, "how the box is written",
         "Always write vectors (f64 3x3); cell_defined only when false; for an undefined cell identity vectors "
         "and an explicit all-false boundary; boundary and origin as arrays (omitted at their defaults).",
         f"{_FRAME} (box)"),
    Rule("14.48", WRITER, "little-endian, lossless codecs",
         "Write little-endian bytes and only codecs of the must-decode set; never a lossy codec.",
         f"{_STORAGE} (Data types on Zarr V3), {_FRAME} (columns)"),
    Rule("14.49", WRITER, "unset named keys are absent",
         "A key a chapter names and the producer did not set is left out of the document, never written as null.",
         f"{_STORAGE} (Document sections)"),
    Rule("14.50", WRITER, "stamp molrec_version 2",
         "Stamp molrec_version: 2 into meta/, over any value the producer gave (README#decision-1).",
         f"{_STORAGE} (Invariants, 6)"),
)
