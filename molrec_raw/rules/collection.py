"""Rule catalogue: collections (MolCrafts/molrec ``docs/spec/collection.md``): many records
under one declaration.  The ids are this project's (``collection#C1`` .. ``C13``, the
numbering of ``molrec_raw/collection/model.py``); the public chapter numbers none.  There is
no digest file for this chapter: ``spec-notes/collection.md`` holds the decisions."""
from molrec_raw.rules import BOTH, WRITER, Chapter, Rule

_C = "MolCrafts/molrec docs/spec/collection.md"

CHAPTER = Chapter(
    "collection", 60, "collections: many records under one declaration",
    source=_C, digest="spec-notes/collection.md (no digest chapter)",
    about="The collection model: its document and units, the one sequence declaration, the index of "
          "per-record columns, the optional shared force field and the records themselves.")

RULES = (
    Rule("C1", BOTH, "the collection declares its units",
         "The collection document carries units: an object mapping each quantity (length, energy, force, ...) "
         "to a non-empty unit string, declared once for every record and column. A writer cannot be opened "
         "without it; a reader refuses a collection whose document lacks it or holds something else there.",
         f"{_C} (Model, meta)"),
    Rule("C2", BOTH, "records stay inside the declaration",
         "A record's frames present a subset of the declared blocks and nothing outside the sequence "
         "declaration: no undeclared block, column or per-step meta key. A block that is present carries exactly "
         "its declared columns with their dtypes and trailing shapes, and a mask only on a nullable column. The "
         "writer refuses such a record; a reader refuses such stored frames.", f"{_C} (Model, sequence_schema)"),
    Rule("C3", WRITER, "the per-step meta is the collection's exactly",
         "Every record's per-step meta declaration equals the collection's (every declared key present, fills "
         "materialized); a record handed its own schema must present the collection's declaration, not a "
         "different one, or it is refused.", f"{_C} (Model, sequence_schema)"),
    Rule("C4", WRITER, "a derived declaration is the agreeing union",
         "When the writer derives the declaration rather than being given one, it is the union of the records' "
         "blocks, and records sharing a block agree on all of it: the column set, dtypes, trailing shapes, "
         "precisions, targets and structural shape; a record that disagrees is refused.",
         f"{_C} (Model, sequence_schema)"),
    Rule("C5", WRITER, "the binding's index columns are reserved",
         "first_frame, n_frames, n_atoms and has_trajectory belong to the binding's index; a collection may not "
         "declare or derive an index column of its own under one of these names.",
         f"{_C} (Model, index); MolCrafts/molrec docs/spec/lmdb.md (index)"),
    Rule("C6", WRITER, "index values fit the index columns",
         "Each record's index values belong to declared (or first-seen) index columns and match their dtype and "
         "trailing shape exactly, without rounding or range loss; a value may be missing only from a nullable "
         "column. A reader hands the values back as written and never recomputes them.",
         f"{_C} (Model, index)"),
    Rule("C7", WRITER, "one force field, the collection's",
         "A collection has at most one force field, shared by every record's type columns; a record of a "
         "collection carries no force field of its own and a writer refuses one.", f"{_C} (Model, forcefield)"),
    Rule("C8", WRITER, "a record has a system or a trajectory",
         "A record of a collection is its meta plus a system, a trajectory, or both; a record with neither is "
         "refused. A trajectory of zero frames still counts as a trajectory.", f"{_C} (Model, records)"),
    Rule("C9", BOTH, "a block shared with the system has the system's rows",
         "When a trajectory block has the name of a system block the two are aligned one to one by row order: "
         "every update of that block has exactly the system block's row count. The writer refuses an update "
         "that does not; the reader refuses such stored frames when it joins the two (frame views, batches).",
         f"{_C} (Topology once, state per frame)"),
    Rule("C10", BOTH, "no column in both halves of a shared block",
         "A column may not appear both in a system block and in the trajectory block of the same name (a reader "
         "presents the two as one block whose columns are the union). The writer refuses it; a reader refuses "
         "stored frames that do it.", f"{_C} (Topology once, state per frame)"),
    Rule("C11", BOTH, "aligned blocks follow their target",
         "A block the declaration aligns with another never shares its name with a system block, and at every "
         "resolved frame of a record it has its target's row count, whether it was carried forward or restated. "
         "Writers refuse a violating record, readers a violating stored one.",
         f"{_C} (Conformance); MolCrafts/molrec docs/spec/ragged.md (aligned blocks)"),
    Rule("C12", BOTH, "record order is append order",
         "Records are numbered in the order the writer appended them, and that order is stable: a reader's "
         "record r is the r-th record added.", f"{_C} (Model, records)"),
    Rule("C13", WRITER, "many records as columns: each column holds its records' rows",
         "A writer taking many records at once as columns (CollectionWriter.add_records) holds every block's "
         "per-record row counts (non-negative integers, one per record), every column of a block the "
         "concatenation of its records' rows in record order (as many rows as the counts sum to), and every "
         "per-record column (per-step meta, record meta, index values) one value per record. Input that breaks "
         "this is refused before any record is added, naming the block or column and the record; the records "
         "are then the ones add_record would add, one by one.",
         f"{_C} (Model, records); the columnar door is this project's (spec-notes/collection.md, add_records)"),
)
