"""Rule catalogue: documents (status, method), metrics and their WAL, observables, the force
field and record-level rules (digest ``documents-metrics-observables-forcefield.md``): its
sections and its checklist (section 9, items 9.1-9.35)."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_M = "MolCrafts/molrec docs/spec/"
_STATUS, _METHOD, _OBS, _FF = f"{_M}status.md", f"{_M}method.md", f"{_M}observables.md", f"{_M}forcefield.md"
_METRICS, _WAL = f"{_M}metrics.md", f"{_M}metrics-wal.md"
_RECORD = f"{_M}overview.md, {_M}storage.md"

CHAPTER = Chapter(
    "documents", 50, "documents, metrics and their WAL, observables, the force field, record rules",
    source=_RECORD, digest="documents-metrics-observables-forcefield.md",
    about="The document sections (status, method), the metrics section (dense series, catalog, JSONL WAL), "
          "observables, the force field and the rules that hold for a whole record.")

RULES = (
    # -- sections of the digest ----------------------------------------------------------
    Rule("1.1", BOTH, "a record's sections",
         "A record is one Zarr V3 root with meta and optional system, frame, trajectory, forcefield, observables, "
         "method, status and metrics; besides meta it carries at least one of frame, system, trajectory, "
         "forcefield, status, and each alone is a valid record (meta + forcefield is a force-field package).",
         f"{_RECORD} (sections)"),
    Rule("1.2", BOTH, "preserve the unknown",
         "Unknown root sections and unknown keys of every document (null-valued ones too) are kept and written "
         "back verbatim; a key a chapter names and the producer left unset is absent, never null; documents hold "
         "finite JSON only.", f"{_RECORD} (documents)"),
    Rule("2", BOTH, "the status document",
         "status/ attributes: state (required string; pending, running, succeeded, failed, cancelled, skipped or "
         "a custom one), optional stage, epoch and global_step (non-negative integers), progress (names to "
         "numbers), message, started_at / updated_at / finished_at (RFC 3339 with offset) and error {message, "
         "type?, traceback?}; other keys are kept.", _STATUS),
    Rule("3", BOTH, "the method document",
         "method/ attributes: type, description and engine {name, version?} required; a workflow adds order (a "
         "list of stage ids) and stages (each a method document); other keys are kept.", _METHOD),
    Rule("4.1", BOTH, "metric events",
         "An event has a type ('scalar' or a module's type), a non-empty key (train/loss), an optional integer "
         "step, an RFC 3339 wall_time, a value (a finite number, or 'NaN' / 'Infinity' / '-Infinity') and optional "
         "tags; every event of one key has the same type, and a line that is not such an event is refused.",
         _METRICS),
    Rule("4.2", BOTH, "the dense layout",
         "metrics/series/<safe name> (float64), steps/<safe name> (int64, only for a series with steps) and "
         "wall_time/<safe name> (string) are aligned point for point; a series cannot mix events with and "
         "without steps (its steps array cannot hold 'no step').", _METRICS),
    Rule("4.3", BOTH, "safe names",
         "A series key becomes an array name by its UTF-8 bytes: [A-Za-z0-9._-] kept, every other byte %XX in "
         "uppercase hex, and a leading '.', '..' or '__' escaped; decoding accepts exactly that.", _METRICS),
    Rule("5.2", BOTH, "the WAL line format",
         "One JSON object per line, UTF-8, ending in a newline, with the compact keys t, k, s, w, v and tags; "
         "optional fields are omitted rather than null.", _WAL),
    Rule("5.5", BOTH, "reading dense series and the WAL tail",
         "Dense series are authoritative up to the catalog's watermark; the complete WAL lines after its byte "
         "offset are appended under the duplicate-step rule; without dense series the WAL alone is the record; "
         "with dense series and no watermark the WAL is not part of the record (a writer refuses to append to it).",
         _WAL),
    Rule("6", BOTH, "observables",
         "observables/<name> is a data array (any shape, a column dtype) paired with observables/meta/<name>, a "
         "group whose attributes are its metadata (kind, description, time_dependent, optional unit, axes, "
         "sampling, domain, target); unknown kinds and keys are carried.", _OBS),
    Rule("6.1", READER, "observables layout",
         "Every child of observables/ is a data array or the group meta/, and meta/ holds one group per "
         "observable: a reader reports a child group other than meta/, or an array inside meta/, instead of "
         "dropping it.",
         f"{_OBS} (layout)"),
    Rule("7", BOTH, "the force field",
         "forcefield/ is frame-shaped: its attributes are the force-field document (name, units, styles, optional "
         "source and special_bonds), each style entry has one table block <category>.<encoded style> with one row "
         "per type; everything unknown is kept.", _FF),
    Rule("7.1", BOTH, "the force-field document is plain JSON",
         "The force-field group's attributes are plain JSON: no _meta_types.", f"{_FF} (on-disk shape)"),
    # -- checklist ---------------------------------------------------------------------------
    Rule("9.1", BOTH, "a substantive section",
         "A writer refuses to finish a record with meta but none of frame, system, trajectory, forcefield, "
         "status; a reader reports such a record and still opens it (README#decision-2).", f"{_RECORD} (sections)"),
    Rule("9.2", BOTH, "unknown keys round-trip",
         "Unknown root sections and unknown document keys, null-valued ones included, round-trip verbatim.",
         f"{_RECORD} (documents)"),
    Rule("9.3", WRITER, "named keys are never null",
         "A key a chapter names and the producer left unset is omitted, never written as null (a reader refuses "
         "a null where the chapter requires a value).", f"{_RECORD} (documents)"),
    Rule("9.4", BOTH, "finite JSON only",
         "Documents carry only finite JSON numbers: no NaN, no infinity.", f"{_RECORD} (documents)"),
    Rule("9.5", READER, "status needs a state",
         "A status document without a state, or with a state that is not a string, is refused.", _STATUS),
    Rule("9.6", READER, "status counters",
         "epoch or global_step that is negative or not an integer, or progress that is not an object of numbers, "
         "is refused.", _STATUS),
    Rule("9.7", READER, "status timestamps",
         "started_at, updated_at or finished_at that is not RFC 3339 with an explicit offset is refused.", _STATUS),
    Rule("9.8", READER, "status error",
         "An error that is not an object, lacks a string message, or has a type or traceback that is not a string "
         "is refused.", _STATUS),
    Rule("9.9", READER, "method documents",
         "A method missing type, description, engine or engine.name, or with those not strings, a stages entry "
         "that is not a valid method document, or an order that is not a list of strings is refused.", _METHOD),
    Rule("9.10", BOTH, "safe names are well formed",
         "A writer refuses an empty series key (it has no safe name); a reader refuses a safe name with a malformed "
         "%XX (lowercase hex, short, not hex) or an unescaped reserved character.", f"{_METRICS} (safe name)"),
    Rule("9.11", BOTH, "dense arrays are aligned",
         "series, steps and wall_time of a series have one length; series float64, steps int64, wall_time string; "
         "no steps array for a series without steps.", f"{_METRICS} (dense layout)"),
    Rule("9.12", BOTH, "the duplicate-step rule",
         "Within a series, events with an equal step are one point and the later event wins; events without a "
         "step are never merged.", _METRICS),
    Rule("9.13", BOTH, "the catalog",
         "The catalog's wal {lines, bytes} describes exactly the WAL prefix the dense series contain; series is "
         "keyed by the original key with type, count, latest_step and latest_timestamp.", f"{_METRICS} (catalog)"),
    Rule("9.14", WRITER, "one appender, whole lines",
         "One process appends to a WAL at a time, whole newline-terminated lines only; history is never rewritten "
         "or reordered; on reopen a torn tail is cut back to the last newline before appending.", _WAL),
    Rule("9.15", READER, "reading the WAL",
         "A reader ignores an unterminated last fragment, skips blank lines and refuses a complete line that is "
         "not UTF-8 or not exactly one JSON object (README#decision-9).", _WAL),
    Rule("9.16", READER, "merging past the watermark",
         "WAL lines before the watermark are not applied again; lines after it are appended under the "
         "duplicate-step rule.", _WAL),
    Rule("9.17", BOTH, "the host surface",
         "On a host only *.mlp.jsonl is a metrics surface; leftover *.mlp.zarr/ and *.mlp.index.json are ignored; "
         "a host writes no dense store, no index and no meta/ or status/ groups.", f"{_WAL}, {_M}storage.md"),
    Rule("9.18", READER, "observables are paired",
         "An observable data array without observables/meta/<name>, or a metadata group without its data array, "
         "is refused.", _OBS),
    Rule("9.19", WRITER, "observable names",
         "An observable named meta, empty, containing '/', only dots or starting with '__' is refused.", _OBS),
    Rule("9.20", READER, "observable metadata",
         "Observable metadata missing kind (or an empty one), description or time_dependent, or a time_dependent "
         "observable stored as a 0-d array, is refused.", _OBS),
    Rule("9.21", BOTH, "unknown kinds are carried",
         "An unknown observable kind and extra metadata keys are kept unchanged, never converted.", _OBS),
    Rule("9.22", READER, "observable dtypes",
         "Observable data of a dtype outside the 13 column dtypes (float16, float32, ...) is refused.", _OBS),
    Rule("9.23", READER, "force-field name and units",
         "A force field without name or units, units with neither a preset nor a quantity, an unknown preset, or "
         "a quantity disagreeing with its preset (angle: radian beside a preset) is refused.", f"{_FF} (units)"),
    Rule("9.24", READER, "force-field source and special_bonds",
         "A source without format, a sha256 that is not 64 lowercase hex digits, or special_bonds missing lj or "
         "coul, not three finite numbers each, or with extra keys is refused.", f"{_FF} (document keys)"),
    Rule("9.25", READER, "style entries",
         "A missing or non-list styles; a category not matching ^[a-z][a-z0-9_]*$; an empty style; an "
         "endpoint_key other than type, class or smirks; a params value that is not a finite number or a string; "
         "special, mixing or one_four outside their vocabularies are refused.", f"{_FF} (style entries)"),
    Rule("9.26", READER, "one table per style",
         "A repeated (category, style) pair, or a style without a table block at its name, is refused.",
         f"{_FF} (style entries)"),
    Rule("9.27", READER, "tables: names and endpoints",
         "A table with a structural_shape; a name column missing, not string, nullable or not unique; a wrong "
         "endpoint set for its category; nullable or non-string endpoints; a smirks-keyed table with endpoints or "
         "without a non-null string smirks is refused.", f"{_FF} (table rows and columns)"),
    Rule("9.28", READER, "tables: parameter columns",
         "A parameter column of a dtype other than f64 or string (canonical keys excepted), a declared precision "
         "on any parameter, trailing axes on a non-f64 column, a zero-length trailing axis, or a non-finite value "
         "in a non-null array-parameter row is refused.", f"{_FF} (table rows and columns)"),
    Rule("9.29", READER, "cmap grids",
         "A cmap grid that is not f64[T, N, N] with N >= 2, or holds a non-finite value in a non-null row, is "
         "refused.", f"{_FF} (cmap grid)"),
    Rule("9.30", READER, "class keys need class columns",
         "A style keyed by class while some atom table has no class column is refused.", f"{_FF} (endpoint keys)"),
    Rule("9.31", READER, "pair restatements agree",
         "A pair table that restates one unordered {itom, jtom} with different parameter values is refused.",
         f"{_FF} (pair tables)"),
    Rule("9.32", READER, "names are linked, not checked",
         "Readers never refuse unresolved type names, never evaluate or refuse an expression, and never convert "
         "units on read (beyond the version-1 rules).", f"{_FF} (linking a system)"),
    Rule("9.33", BOTH, "version-1 force fields",
         "A version-1 force field (of a record stamped molrec_version 1; an unstamped one is current) with a "
         "pair14 style, a multi-term improper.periodic, an expression on a converted style, an unknown angular style with params or expression, a non-radian angle beside a "
         "preset, a rename collision, or both dihedral.fourier and dihedral.periodic is refused; writers never "
         "write version 1 and never append to a version-1 trajectory.", f"{_FF} (reading a version-1 record)"),
    Rule("9.34", WRITER, "translators refuse what a format cannot hold",
         "A translator refuses, rather than drops or approximates, a construct the target format cannot hold.",
         f"{_FF} (format mappings)"),
    Rule("9.35", BOTH, "table block names",
         "A table's block is <category>.<style> with the style's UTF-8 bytes outside A-Z a-z 0-9 - _ written "
         "%XX in uppercase (so '.' and '/' too): lj/cut/coul/long -> pair.lj%2Fcut%2Fcoul%2Flong; a malformed "
         "escape is refused, and a block no style produces is kept as unknown content.", f"{_FF} (table block name)"),
)
