"""Rule catalogue: the trajectory section (digest ``trajectory.md``): its sections and its
checklists (section 18: W writer refuses, R reader refuses, N reader must not refuse, I
invariants)."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_M = "MolCrafts/molrec docs/spec/"
_RAGGED = f"{_M}ragged.md"
_CHUNKING = f"{_M}chunking.md"

CHAPTER = Chapter(
    "trajectory", 40, "the trajectory: ragged CSR layout, sequence_schema, commit protocol, reopen",
    source=f"{_RAGGED}, {_CHUNKING}, {_M}trajectory.md", digest="trajectory.md",
    about="A run of frames in one group: a pinned declaration, per-section sparse updates in CSR arrays, "
          "progressions for steps and times, and a commit marker written last.")

_DECL = f"{_RAGGED} (sequence_schema)"
_APPEND = f"{_RAGGED} (appending frames)"
_READ = f"{_RAGGED} (reading), {_CHUNKING} (reopen rule)"

RULES = (
    # -- sections of the digest ----------------------------------------------------------
    Rule("2", BOTH, "the on-disk tree",
         "trajectory/ holds sequence_schema and the commit marker nstep as attributes, step and time as "
         "progressions or arrays, meta/<key> per-step arrays, box/ and one group per block with step_index, "
         "offset, columns and _validity masks; the common run costs one array per column and nothing else.",
         f"{_RAGGED} (layout)"),
    Rule("3", BOTH, "the trajectory group's attributes",
         "nstep is a non-negative JSON integer written last in every commit, together with the step and time "
         "progressions; a store without nstep has len(step) frames (0 without a step array).",
         f"{_RAGGED} (layout), {_CHUNKING} (commit protocol)"),
    Rule("3.1", BOTH, "step and time progressions",
         "While step numbers (times) are arithmetic they are the attribute {start[, stride]}: step[i] = start + "
         "i * stride exactly, time[i] = start + float(i) * stride in binary64 bit for bit; the first value that "
         "breaks it moves the series to an array (history backfilled) for good.", f"{_RAGGED} (step and time)"),
    Rule("4", BOTH, "the sequence_schema pin",
         "The attribute sequence_schema declares every block (columns with dtype and trailing shape, optional "
         "nullable, precision, targets, structural_shape, aligned_with) and every per-step meta key (tag and "
         "optional fill); it is fixed for the life of the trajectory, and frames present a subset of it.", _DECL),
    Rule("5.1", BOTH, "per-step meta tags",
         "trajectory/meta/<key> is one of the 16 tags, stored [nstep] or [nstep][3|6|9] with the array attribute "
         "meta_dtype naming the tag; every frame has a value for every declared key.", f"{_RAGGED} (per-step meta)"),
    Rule("5.2", WRITER, "per-step meta values",
         "A value is held exactly at its tag (only exact coercions); a frame that omits a declared key gets its "
         "declared fill or is refused; an undeclared key is refused.", f"{_RAGGED} (per-step meta)"),
    Rule("6", BOTH, "present, empty and absent blocks",
         "At frame i a block takes its latest update at or before i: present with rows, empty with 0 rows, or "
         "absent before its first update. Omitting a block writes no update (it carries forward), a zero-row "
         "update is present and empty, and an unchanged block (bitwise, masks included) writes no update.",
         f"{_RAGGED} (blocks over time)"),
    Rule("7", BOTH, "the cell box/",
         "Each cell update holds vectors (3x3, lattice vectors as columns), origin and boundary; a cell fixed from "
         "frame 0 is attributes of box/, arrays otherwise; cell_defined is one flag, written only as false, and an "
         "undefined cell has identity vectors and all-false boundary.", f"{_RAGGED} (box)"),
    Rule("8.1", BOTH, "CSR index arrays",
         "A block's step_index (u64[n_updates], strictly ascending frame ordinals) and offset (u64[n_updates+1], "
         "from 0, non-decreasing) cut its columns: update j owns rows offset[j]..offset[j+1].",
         f"{_RAGGED} (index arrays)"),
    Rule("8.2", BOTH, "structural shape",
         "A block declared with structural_shape has prod(shape) rows in every update; the writer refuses another "
         "count and the reader reshapes.", f"{_RAGGED} (structural_shape)"),
    Rule("8.4", BOTH, "nullable trajectory columns",
         "A column pinned nullable keeps bool[total_rows] flags at <block>/_validity/<column>, cut like its "
         "values; an update without a mask lands all-true flags; an absent mask means all valid.",
         f"{_RAGGED} (nullable columns)"),
    Rule("8.5", BOTH, "declared precision on a trajectory",
         "Precision lives only in the pin's column entry; the writer rounds every presented value before change "
         "detection and storage (a change under half a quantum is no change), the reader returns stored values "
         "and re-attaches the pinned precision.", f"{_RAGGED} (declared precision)"),
    Rule("8.6", BOTH, "trajectory row references",
         "targets map a u64 column to '<block>' of the same resolved frame or '/<section>/<block>' of a "
         "frame-shaped section (never '/trajectory/...'); on every resolved frame the target exists wherever the "
         "referencing block has rows and every non-null value is below its row count.",
         f"{_RAGGED} (row references)"),
    Rule("8.7", BOTH, "aligned blocks",
         "A block aligned_with a target has, wherever it is present, the target present with the same row count "
         "(restated when the target's count changes); the target is declared, not itself aligned, shares no "
         "column and the aligned block has no structural shape.", f"{_RAGGED} (aligned blocks)"),
    Rule("8.8", BOTH, "system and trajectory blocks of one name",
         "A trajectory block named like a system block is aligned with it by row order: every update holds exactly "
         "the system block's row count.", f"{_RAGGED} (system vs trajectory)"),
    Rule("10", WRITER, "the commit protocol",
         "Each flush lands chunk bytes, then each touched array's zarr.json (atomically), then - durable flushes "
         "fsync data, metadata and directories - the trajectory group's zarr.json carrying nstep and the "
         "progressions, last; a crash leaves the previous nstep, never frames it lacks.",
         f"{_CHUNKING} (commit protocol)"),
    Rule("15", BOTH, "the packed form *.mrec.zip",
         "A record packs into <stem>.mrec.zip: STORED entries named relative to the root, the directory's exact "
         "bytes; packing needs a record directory (root zarr.json), and unpacking refuses duplicate or hostile "
         "names.", f"{_CHUNKING} (packed form)"),
    # -- writer refuses (declaration) ------------------------------------------------------
    Rule("W1", WRITER, "reserved block names", "A block named step, time, meta or box is refused at declaration.",
         _DECL),
    Rule("W2", WRITER, "reserved column names",
         "A column named offset, step_index or _validity is refused at declaration.", _DECL),
    Rule("W3", WRITER, "one dtype per column",
         "A column declared twice with a different dtype or trailing shape (also across frames deriving the "
         "schema) is refused.", _DECL),
    Rule("W4", WRITER, "no conflicting declarations",
         "Two structural shapes for a block, two precisions or two targets for a column, or two tags for a meta "
         "key are refused.", _DECL),
    Rule("W5", WRITER, "known dtypes and tags",
         "An unknown column dtype (f128, float) or meta tag (f16, f32, i64x6, ...) is refused.", _DECL),
    Rule("W6", WRITER, "precision declarations",
         "A precision on a column that is not f64 or not declared, or one not finite or outside [2^-1000, 2^1000], "
         "is refused.", _DECL),
    Rule("W7", WRITER, "target declarations",
         "A target on a column that is not u64 or not declared, a malformed target or one into '/trajectory/' is "
         "refused.", _DECL),
    Rule("W8", WRITER, "alignment declarations",
         "aligned_with naming an undeclared block, itself, an aligned block (a chain), a block with a structural "
         "shape or a block sharing a column name, or a block re-aligned elsewhere, is refused.", _DECL),
    Rule("W9", WRITER, "nullable and shapes on declared names",
         "nullable or structural_shape for an undeclared block or column, or a structural shape on an aligned "
         "block, is refused.", _DECL),
    Rule("W10", WRITER, "fills are valid for their tag",
         "A fill that is not a valid value of its tag, and a null fill on a key that is not json, are refused.",
         _DECL),
    Rule("W11", WRITER, "canonical keys at canonical width",
         "A canonical key declared at another width (atomi not u64, x not f64) is refused.",
         f"{_DECL}, {_M}conventions.md"),
    # -- writer refuses (create, reopen) ---------------------------------------------------
    Rule("W12", WRITER, "never create over a sequence",
         "Creating a trajectory where one exists (an nstep attribute or a step array) is refused, the store left "
         "byte for byte unchanged.", f"{_CHUNKING} (reopen rule)"),
    Rule("W13", WRITER, "aligned blocks are not named like system blocks",
         "An aligned block that shares its name with a system/ block is refused at create and reopen.",
         f"{_RAGGED} (aligned blocks)"),
    Rule("W14", WRITER, "what a reopen refuses",
         "Reopening for append refuses the trajectory/frames/ layout of molrs <= 0.13, a record stamped with a "
         "molrec_version other than the current one (an unstamped record is current and reopened), a store "
         "without sequence_schema or with a bad pin, a column array whose dtype or trailing shape differs from "
         "the pin, and malformed markers.", f"{_CHUNKING} (reopen rule)"),
    Rule("W15", WRITER, "knobs before the first append",
         "Extent and compression knobs after the first append, and a flush cadence that is not a positive "
         "integer, are refused.", f"{_CHUNKING} (extents)"),
    # -- writer refuses (append): a refused frame leaves the committed state unchanged ------
    Rule("W16", WRITER, "steps increase", "A step not greater than the previous one (or outside i64) is refused.",
         _APPEND),
    Rule("W17", WRITER, "time is all or nothing",
         "A frame that adds a time to a run without times, or omits it in a timed run, is refused.", _APPEND),
    Rule("W18", WRITER, "only declared names",
         "A frame carrying a block, column or per-step meta key the pinned sequence_schema does not declare is "
         "refused.", _APPEND),
    Rule("W19", WRITER, "columns match the pin",
         "A column whose dtype or trailing shape differs from the pin, or a block whose columns disagree on the "
         "row count, is refused.", _APPEND),
    Rule("W20", WRITER, "a present block carries every column",
         "A presented block missing one of its declared columns is refused (sparsity is per block, not per "
         "column).", _APPEND),
    Rule("W21", WRITER, "structural shape row counts",
         "A block with a structural shape presented with another row count, or stating another shape, is "
         "refused.", _APPEND),
    Rule("W22", WRITER, "omitted meta needs a fill",
         "A frame that omits a declared meta key without a fill is refused.", _APPEND),
    Rule("W23", WRITER, "meta values exactly at their tag",
         "A per-step meta value not exactly representable at its tag is refused.", _APPEND),
    Rule("W24", WRITER, "masks only on nullable columns",
         "A mask on a column the pin declares non-nullable, or a mask that is not bool of the block's rows, is "
         "refused.", _APPEND),
    Rule("W25", WRITER, "stated precision equals the pin",
         "A frame stating a precision other than the pinned one (also when the pin has none) is refused.",
         _APPEND),
    Rule("W26", WRITER, "stated targets equal the pin",
         "A frame stating a target other than the pinned one, or for an undeclared column, is refused.", _APPEND),
    Rule("W27", WRITER, "resolved frames keep references",
         "A frame whose resolved state (carried-forward blocks included) breaks a row reference is refused.",
         _APPEND),
    Rule("W28", WRITER, "resolved frames keep alignments",
         "A frame whose resolved state breaks an alignment (an aligned block without its target, or with another "
         "row count) is refused.", _APPEND),
    Rule("W29", WRITER, "storable cells",
         "A cell that cannot be stored (not 3x3 / 3 / 3 values, not real numbers, an undefined cell with a "
         "periodic flag) is refused.", _APPEND),
    Rule("W30", WRITER, "nothing after close", "Any call on a closed writer is refused.", _APPEND),
    # -- reader refuses ----------------------------------------------------------------------
    Rule("R1", READER, "molrec_version",
         "A molrec_version that is present and not an integer in 1..newest (0, '1', null, 1.5, too new) is "
         "refused.", _READ),
    Rule("R2", READER, "legacy layout", "The legacy trajectory/frames/ layout is refused, with a message saying so.",
         _READ),
    Rule("R3", READER, "nstep", "An nstep that is not a non-negative JSON integer is refused.", _READ),
    Rule("R4", READER, "progressions need nstep",
         "A step or time progression attribute without nstep (the commit marker missing) is refused.", _READ),
    Rule("R5", READER, "progression form",
         "A progression that is not {start[, stride]} of numbers, or cannot produce a needed value, is refused.",
         _READ),
    Rule("R6", READER, "arrays hold their logical length",
         "An array shorter than its logical length (fewer step values than nstep, a meta array short of nstep) is "
         "refused.", _READ),
    Rule("R7", READER, "step_index strictly increases",
         "A step_index that repeats or decreases is refused.", f"{_RAGGED} (index arrays)"),
    Rule("R8", READER, "offsets are monotonic",
         "An offset that decreases, does not start at 0, exceeds a column's length or is missing for an update "
         "is refused.", f"{_RAGGED} (index arrays)"),
    Rule("R9", READER, "elision markers",
         "Malformed regular-block markers are refused: one of uniform_rows and dense_updates without the other, "
         "uniform_rows not a positive integer, dense_updates not true, markers on a block without columns.",
         f"{_RAGGED} (regular blocks)"),
    Rule("R10", READER, "per-step meta arrays",
         "A meta array without meta_dtype, with an unknown tag, or with a dtype or trailing shape other than its "
         "tag's is refused.", f"{_RAGGED} (per-step meta)"),
    Rule("R11", READER, "the pin",
         "A sequence_schema that cannot be read, or whose pinned fill is not valid for its tag, is refused.", _DECL),
    Rule("R12", READER, "column data types",
         "A trajectory column stored as float16/float32, as a fixed-length string or as any Zarr type outside the "
         "13 dtypes, or at another dtype or trailing shape than the pin, is refused.", f"{_RAGGED} (columns)"),
    Rule("R13", READER, "canonical keys are not narrow",
         "A canonical identifier stored at a narrower width (a u32 atomi) is refused.",
         f"{_RAGGED} (columns), {_M}conventions.md"),
    Rule("R14", READER, "masks",
         "A validity mask that is not bool, or shorter than the rows its offsets claim, is refused.",
         f"{_RAGGED} (nullable columns)"),
    Rule("R15", READER, "the box",
         "A box attribute vectors that is not 3x3, an origin or boundary that is not 3 values, a malformed box row "
         "or a periodic flag on an undefined cell is refused.", f"{_RAGGED} (box)"),
    Rule("R16", READER, "alignments",
         "A stored alignment that breaks (an aligned block without its target or with another row count), an "
         "aligned block named like a system block, or an invalid pinned alignment is refused.",
         f"{_RAGGED} (aligned blocks)"),
    Rule("R17", READER, "row references on resolved frames",
         "A row reference broken on a resolved frame (missing target, value past its rows) is refused.",
         f"{_RAGGED} (row references)"),
    # -- reader must not refuse ----------------------------------------------------------------
    Rule("N1", READER, "an uncommitted tail is not an error",
         "Arrays longer than their logical length (rows past nstep, left by an interrupted commit) are read up to "
         "nstep, never refused.", _READ),
    Rule("N2", READER, "declared blocks without data",
         "A declared block with no group, or with no updates, is absent at every frame, never refused.", _READ),
    Rule("N3", READER, "a store without a pin",
         "A store without sequence_schema is read by deriving the declaration from its groups (blocks, columns, "
         "masks, structural shape, meta keys with meta_dtype).", _DECL),
    Rule("N4", READER, "a store without molrec_version",
         "A store without molrec_version is current: read by the current rules (README#decision-1).", _READ),
    Rule("N5", READER, "unknown child groups",
         "A child group of trajectory/ that the pin does not declare is not a block: it is preserved, not refused.",
         _DECL),
    Rule("N6", READER, "created, never appended",
         "A trajectory created and never appended to reads as 0 frames.", _READ),
    Rule("N7", READER, "markers beside an index",
         "A block with both elision markers and index arrays (a crash mid-switch) is read by its index arrays.",
         f"{_RAGGED} (regular blocks)"),
    Rule("N8", READER, "any chunking",
         "Any chunking, sharding and codec from the must-decode set is read.", f"{_CHUNKING} (extents)"),
    # -- invariants ----------------------------------------------------------------------------
    Rule("I1", WRITER, "offset invariants",
         "offset[0] == 0, non-decreasing, n_updates + 1 entries, and total_rows == offset[n_updates] <= every "
         "column's length.", f"{_RAGGED} (index arrays)"),
    Rule("I2", WRITER, "step_index invariants",
         "step_index is strictly ascending and its committed entries are below nstep.", f"{_RAGGED} (index arrays)"),
    Rule("I3", WRITER, "columns and masks share row ranges",
         "Every column and mask of a block is cut by the same row ranges; a mask has exactly one flag per row.",
         f"{_RAGGED} (index arrays)"),
    Rule("I4", WRITER, "regular blocks",
         "A regular block has both markers, uniform_rows > 0, no index arrays and columns of at least n_updates * "
         "uniform_rows rows.", f"{_RAGGED} (regular blocks)"),
    Rule("I5", WRITER, "series lengths",
         "step, time and meta/* hold at least nstep rows, and each series is exactly one of progression or array "
         "(neither at nstep 0; no time without times).", f"{_RAGGED} (step and time)"),
    Rule("I6", WRITER, "progressions travel with nstep",
         "Progression attributes exist only beside nstep and change in the same metadata write.",
         f"{_CHUNKING} (commit protocol)"),
    Rule("I7", WRITER, "nstep last",
         "nstep is written after all data and array metadata of its commit.", f"{_CHUNKING} (commit protocol)"),
    Rule("I8", WRITER, "step numbers increase", "Step numbers are strictly increasing.", _APPEND),
    Rule("I9", WRITER, "every frame has every meta value",
         "Every frame has a value for every declared meta key (supplied or its fill).", f"{_RAGGED} (per-step meta)"),
    Rule("I10", WRITER, "present blocks stay present",
         "A block once present is never absent again (clearing it is a zero-row update).",
         f"{_RAGGED} (blocks over time)"),
    Rule("I11", WRITER, "one form of the cell",
         "A cell is either the fixed-cell attributes or the box arrays, never both.", f"{_RAGGED} (box)"),
    Rule("I12", WRITER, "one cell_defined", "cell_defined is one flag for the whole box section.",
         f"{_RAGGED} (box)"),
    Rule("I13", WRITER, "the pin never changes", "sequence_schema never changes after creation.", _DECL),
    Rule("I14", WRITER, "frozen extents",
         "Chunk extents and codecs never change after the first append.", f"{_CHUNKING} (extents)"),
    Rule("I15", WRITER, "no update for unchanged content",
         "An update is written only when the content changed, compared bitwise after precision rounding, masks "
         "included.", f"{_RAGGED} (blocks over time)"),
)
