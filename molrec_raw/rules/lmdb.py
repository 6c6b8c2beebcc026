"""Rule catalogue: the LMDB binding of a collection (MolCrafts/molrec ``docs/spec/lmdb.md``,
the 8,913-character text with ``ff``, aligned blocks and both version keys; see
``spec-notes/collection.md``, "Which text").  The ids are this project's (``lmdb#L1`` ..
``L19``; L18 and L19 are this project's own: what a reader checks of the LMDB file itself before
liblmdb maps it, spec-notes/safety.md "Opening any collection file"); the public chapter numbers none.  No digest file: the decisions are in
``spec-notes/collection.md``."""
from molrec_raw.rules import BOTH, READER, Chapter, Rule

_L = "MolCrafts/molrec docs/spec/lmdb.md"

CHAPTER = Chapter(
    "lmdb", 70, "the LMDB binding of a collection: keys, the meta value, the index, frame bytes",
    source=_L, digest="spec-notes/collection.md (no digest chapter)",
    about="One *.mrec.lmdb file holds a collection: JSON values and MRF1 frame bytes under fixed keys, "
          "trajectories as sparse updates, meta written last.")

RULES = (
    Rule("L1", BOTH, "one file, one database, one writer",
         "A collection is one LMDB environment in a single file (subdir=False) whose name ends .mrec.lmdb, with "
         "one unnamed database; one writer at a time (it never overwrites an existing file and is not carried "
         "across fork); readers take LMDB's reader lock, so read-only media need a copy first.",
         f"{_L} (The file)"),
    Rule("L2", BOTH, "the key scheme",
         "Keys are bytes: meta, index, ff, and r, s or f followed by the record number or global frame ordinal "
         "as an unsigned 64-bit big-endian integer, so byte order is numeric order and a record's frames are one "
         "contiguous range.", f"{_L} (The file)"),
    Rule("L3", BOTH, "meta last; no meta, no collection",
         "The meta value is written last, in the transaction that commits the collection; a file without a meta "
         "key is not a collection and a reader refuses it.", f"{_L} (meta)"),
    Rule("L4", READER, "layout and layout_version",
         "meta holds layout = 'mrec-lmdb'; a layout_version, when present, is an integer from 1 to the newest "
         "byte layout the reader supports, and anything else (null, 0, a float, a newer version) is refused; an "
         "absent one is the current layout (README#decision-21).", f"{_L} (meta)"),
    Rule("L5", BOTH, "the contract version of a collection",
         "Every writer stamps collection.molrec_version; a reader checks it when present (an integer from 1 to "
         "the newest supported, never null). It covers the document, the declaration and every record, so a "
         "record's own meta carries no version and a writer refuses one.", f"{_L} (meta)"),
    Rule("L6", READER, "the counts in meta",
         "meta's n_records and n_frames are non-negative integers, and they agree with the index: R rows, and "
         "the frames the index counts.", f"{_L} (meta)"),
    Rule("L7", READER, "the index block",
         "index is frame bytes with one block records of R rows; first_frame, n_frames, n_atoms (u64) and "
         "has_trajectory (bool) carry no mask; first_frame is the exclusive prefix sum of n_frames and the last "
         "first_frame + n_frames is meta's n_frames; a record without a trajectory has no frames. A reader "
         "refuses an index that breaks any of these.", f"{_L} (index)"),
    Rule("L8", BOTH, "frames are sparse updates inside one record",
         "Frame j holds exactly the blocks that changed at that ordinal (the first frame of a record every "
         "present block), every declared per-step meta key with fills materialized, and its step; carry-forward "
         "never crosses a record boundary; every f key a record's index range names exists.", f"{_L} (Frames)"),
    Rule("L9", READER, "the frame-bytes envelope",
         "A value is the magic MRF1, a little-endian u32 header length that stays inside the value, a UTF-8 "
         "JSON object as header, zero bytes up to the next multiple of 8, then the payload; an unknown magic or "
         "a header that is not such an object is refused.", f"{_L} (Frame bytes)"),
    Rule("L10", READER, "buffers aligned and inside the value",
         "Each numeric column is one C-order little-endian buffer of prod(shape) x itemsize bytes at an offset "
         "into the payload that is a multiple of 8; an unaligned offset or a buffer running past the value is "
         "refused.", f"{_L} (Frame bytes)"),
    Rule("L11", READER, "the closed dtype set",
         "A column's dtype is one of the closed column set; bool is one byte per element holding 0 or 1, complex "
         "columns are interleaved real/imaginary pairs. Another dtype, or a bool byte other than 0/1, is refused.",
         f"{_L} (Frame bytes); MolCrafts/molrec docs/spec/frame.md (column set)"),
    Rule("L12", READER, "string columns live in the header",
         "A string column has no buffer: its values are the header entry's values, a row-major list of exactly "
         "prod(shape) strings.", f"{_L} (Frame bytes)"),
    Rule("L13", READER, "validity buffers",
         "A nullable column carrying a mask names a validity offset: a buffer of shape[0] one-byte booleans "
         "(0/1) at an 8-aligned offset; without it every row is valid. A string column's mask is a buffer too.",
         f"{_L} (Frame bytes); MolCrafts/molrec docs/spec/frame.md (nullable columns)"),
    Rule("L14", READER, "precision only on system and index frames",
         "A column of a system or index frame that declares a precision carries it in its header entry, with "
         "rounded values in its buffer; a trajectory update's columns carry none (the sequence declaration "
         "holds it). A precision where none may be is refused.", f"{_L} (Frame bytes)"),
    Rule("L15", READER, "how each frame's meta is typed",
         "A trajectory update's meta keys are typed by the sequence declaration and carry no meta_types; a "
         "system frame carries meta_types beside meta, as a Zarr frame group would; the ff frame's meta is the "
         "force-field document without meta_types.", f"{_L} (Frame bytes)"),
    Rule("L16", BOTH, "what rides on which frame",
         "step (i64), time (f64) and box (the cell) appear only on trajectory updates, box only where the cell "
         "changes; a block's own attributes ride on system frames only (a trajectory block's attributes are its "
         "section's).", f"{_L} (Frame bytes)"),
    Rule("L17", READER, "the header is the documented JSON",
         "The header holds only the keys the layout defines (unknown keys change meaning under one "
         "layout_version and are refused); count is a non-negative integer, shape a list of integers whose "
         "first is the block's count, and objects sit where the layout puts objects.", f"{_L} (Frame bytes)"),
    Rule("L18", READER, "an LMDB data file, whole",
         "Before liblmdb maps a collection file, the reader checks that it is an LMDB data file of this platform's "
         "layout and is whole: not empty; both meta pages carry the meta flag, magic 0xBEEFC0DE, data version 1 "
         "and one page size; the meta page a reader takes (the larger transaction id, page 0 on a tie, as liblmdb "
         "picks it) names a last page the file holds. A file shorter than that looks cut short (an incomplete "
         "copy) and is refused, as is anything else failing these.",
         f"{_L} (The file: one LMDB environment), checked as this project decided (spec-notes/safety.md, Opening "
         "any collection file) from liblmdb's mdb.c (mdb_env_read_header, "
         "mdb_env_pick_meta)"),
    Rule("L19", READER, "every page a reader follows is one LMDB writes",
         "Every branch and leaf page reachable from the main database's root of that snapshot is checked before "
         "the map: a page number inside the snapshot, the page's own number and flags (branch pages above the "
         "leaf level the meta page's depth names, leaves there), node pointers and nodes inside the page, at least "
         "two children per branch page, keys strictly in order across the tree, plain or big values only (no "
         "sub-databases or duplicates), each overflow run inside the snapshot with its first page's header saying "
         "so, no page reached twice, a depth of at most 32, and the database's page and entry counts matching the "
         "tree. A file failing any of these is refused, naming the page.",
         f"{_L} (The file: one LMDB environment), checked as this project decided (spec-notes/safety.md, Opening "
         "any collection file) from liblmdb's mdb.c (MDB_page, MDB_node, "
         "mdb_page_search_root, mdb_node_read)"),
)
