"""Rule catalogue: the project's decisions where the public chapters disagree or are silent
(digest ``README.md``, "Decisions"); cited as ``README#decision-<n>``."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_M = "MolCrafts/molrec docs/spec/"

CHAPTER = Chapter(
    "README", 90, "decisions where the public chapters disagree or are silent",
    source=f"{_M} (the chapters named in each entry)", digest="README.md",
    about="Binding for molrec_raw: each settles a point the public chapters leave open or contradict.")

RULES = (
    Rule("decision-1", BOTH, "the version key",
         "Writers create the root zarr.json, then meta/ with molrec_version stamped as 2 (over any value the "
         "caller gave), then the other sections. Readers: a present key must be a JSON integer (not 1.0, '1', "
         "null or a boolean) with 1 <= v <= 2, else the record is refused; an absent key is a current store (the "
         "newest texts carry no version key), read and validated by the current rules, reopened and appended to "
         "like one stamped 2. read_mrec_meta returns the document as stored; a trajectory stamped 1 is read but "
         "not reopened for appending.",
         f"{_M}storage.md, overview.md (the version-2 texts; the newest texts drop the key)"),
    Rule("decision-2", BOTH, "required sections",
         "A record holds meta and at least one of frame, system, trajectory, forcefield, status. A writer refuses "
         "to finish a record with none of them; a reader of such a store reports it (validate) but opens what is "
         "there.", f"{_M}overview.md (sections)"),
    Rule("decision-3", WRITER, "reference chunk extents",
         "The trajectory writer follows the reference's integer arithmetic: floor_rows = max(1, floor(16384 / "
         "min_row_bytes)); the automatic flush K = ceil(base / fpc) * fpc with base = clamp(floor(4 MiB / "
         "frame_bytes), 1, 4096) and fpc the largest frames-per-chunk of a block with rows. Readers accept any "
         "chunking.", f"{_M}chunking.md"),
    Rule("decision-4", BOTH, "regular blocks count over the shortest column",
         "A regular block's committed update count is min(floor(len(c) / uniform_rows), nstep) over its shortest "
         "column c, never its first.", f"{_M}ragged.md (regular blocks)"),
    Rule("decision-5", READER, "index arrays are checked",
         "A reader refuses a step_index that repeats or decreases and an offset that decreases, does not start at "
         "0 or exceeds a column's length.", f"{_M}ragged.md (index arrays)"),
    Rule("decision-6", WRITER, "reopening with no committed update",
         "An indexed block reopened with zero committed updates keeps offset = [0].", f"{_M}chunking.md (reopen)"),
    Rule("decision-7", WRITER, "time progressions compare bitwise",
         "A time series stays a progression only while every value equals start + i * stride bit for bit (so "
         "-0.0 is not 0.0, and the second value is checked too).", f"{_M}ragged.md (step and time)"),
    Rule("decision-8", BOTH, "non-finite metric values",
         "In the metrics WAL a non-finite value is the string 'NaN', 'Infinity' or '-Infinity'; dense series "
         "hold the IEEE value; JSON documents (the catalog, tags) never hold NaN.",
         f"{_M}metrics.md, metrics-wal.md"),
    Rule("decision-9", READER, "WAL corruption",
         "A torn final fragment of the WAL is ignored by readers and truncated by a reopening writer; a complete "
         "line that is not one JSON object is refused, naming the file, the line number and the byte offset. A "
         "host-surface reader may opt into skipping bad lines, never by default.", f"{_M}metrics-wal.md"),
    Rule("decision-10", BOTH, "wall times",
         "Wall times are RFC 3339 with an explicit offset (Z or +00:00), date and time both; writers emit UTC; a "
         "value without an offset, or a naive datetime, is refused.", f"{_M}status.md, metrics-wal.md"),
    Rule("decision-11", BOTH, "force fields are stored, not converted",
         "The force field is layout only: the document (plain JSON attributes, no _meta_types) plus one block per "
         "style table; units and angle conventions are carried as stored, never converted.",
         f"{_M}forcefield.md"),
    Rule("decision-12", WRITER, "zip packing",
         "Packing writes stored entries named relative to the record root, sorted, ZIP64 when needed, no directory "
         "entries; it refuses to overwrite an existing zip and removes the directory only after the zip is "
         "complete and verified, and only when asked.", f"{_M}chunking.md (packed form)"),
    Rule("decision-13", BOTH, "a fixed trajectory cell is attributes",
         "A trajectory cell present from frame 0 that never changes is stored as trajectory/box/ attributes; "
         "frame-shaped sections always store the box as arrays.", f"{_M}ragged.md (box) against frame.md (box)"),
    Rule("decision-14", BOTH, "f64x6 order is carried",
         "f64x6 values are carried in the producer's order; the documented convention is (xx, yy, zz, xy, xz, "
         "yz), as the reference implementation documents it; nothing is reordered.", f"{_M}conventions.md"),
    Rule("decision-15", READER, "version-1 force fields are read as stored",
         "The force field of a record stamped molrec_version 1 is read as stored, without unit or angle "
         "conversion; read_mrec_meta reports the stored version so callers can tell, and validate notes it. An "
         "unstamped record's force field is current, not version 1 (decision 1).", f"{_M}forcefield.md (version 1)"),
    Rule("decision-16", BOTH, "the WAL watermark",
         "The catalog's wal.lines counts every newline-terminated line inside the first wal.bytes bytes, blank "
         "ones included. A WAL shorter than wal.bytes was truncated outside the writer: readers return the dense "
         "series without a tail and validate reports it; a writer refuses to reopen it, saying so.",
         f"{_M}metrics.md (catalog)"),
    Rule("decision-17", READER, "legacy dtype tags",
         "The legacy tags float, int and uint in a pinned trajectory schema read as f64, i32 and u64; they are "
         "never written.", f"{_M}ragged.md (sequence_schema)"),
    Rule("decision-18", WRITER, "integers beyond 64 bits in meta",
         "A writer refuses an untagged meta integer outside [-2^63, 2^64) unless the caller states a tag "
         "(MetaValue); a reader infers an untagged one as f64, as the spec says.", f"{_M}conventions.md (typed JSON)"),
    Rule("decision-19", BOTH, "decimal-string integers",
         "Decimal-string integers of any magnitude are accepted on read under integer tags; the writer uses the "
         "string form only above 2^53 in magnitude.", f"{_M}conventions.md (typed JSON)"),
    Rule("decision-20", READER, "cell_defined must be a boolean",
         "A cell_defined attribute that is present and not a JSON boolean is refused on read.",
         f"{_M}frame.md (box)"),
    Rule("decision-21", BOTH, "collections without layout_version",
         "A collection whose meta has no layout_version (the newest lmdb.md defines layout, collection, "
         "sequence_schema, n_records and n_frames only) is read as the current layout; a present layout_version "
         "must be one this reader knows. Writers may keep writing it.", f"{_M}lmdb.md (meta)"),
)
