"""Rule catalogue: this project's safety rules for writers and tools (spec-notes/safety.md,
issue 23) — where the public chapters say nothing about concurrent writers, I/O failures,
overwriting, links or what tools report; cited as ``safety#<name>``."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_NOTES = "spec-notes/safety.md"
_M = "MolCrafts/molrec docs/spec/"
_SILENT = f"{_M}storage.md (silent on writers; this project's decision: {_NOTES}"

CHAPTER = Chapter(
    "safety", 80, "safe by default: one writer, poisoned writers, no silent overwrite, links, truthful tools",
    source=f"this project ({_NOTES}); the public chapters are silent ({_M}storage.md names no writer protocol)",
    digest="README.md",
    about="Binding for molrec_raw's writers and tools: what they do when two writers meet, when the disk fails, "
          "when a path already holds a record, when a link points out of a record, and what they report.")

RULES = (
    Rule("lock", WRITER, "one writer per record",
         "Every writer (MrecWriter created or reopened, MetricsWriter, the collection writer, repair, the "
         "whole-record doors, unpack into a path, pack --remove-source) holds an exclusive advisory lock on its "
         "target for its whole life, taken before it reads or changes anything; section writers of one record "
         "(trajectory, metrics) hold the record's lock shared and their section's exclusively. A second writer is "
         "refused with an error naming the record and, when known, the holder (pid, host, since). Readers never "
         "lock; a lock dies with its process; where the file system refuses locks the writer says so, and "
         "lock=False is the caller's explicit promise to coordinate writers.",
         f"{_SILENT} \"One writer at a time\")"),
    Rule("poison", WRITER, "a writer is poisoned by its first I/O failure",
         "The failure is raised naming the operation and the path; every later call (append, flush, close, log, "
         "add_record) raises an error naming the first one; nothing more is written or fsynced and fsync is never "
         "retried; close() releases the lock and descriptors without writing. A call that raised had no effect "
         "the caller must account for. Recovery is a new writer (MrecWriter.open, repair), which trusts the disk, "
         "never the poisoned writer's memory.", f"{_SILENT} \"Poisoned writers\")"),
    Rule("overwrite", WRITER, "no silent overwrite",
         "Every door that writes a record at a path (write_mrec*, convert, salvage, unpack, demo, the collection "
         "writer) writes a missing path or an empty directory; it replaces an existing record only when asked "
         "(overwrite=True, --force), never a path that is neither; a conversion's or a salvage's source is never "
         "its target.",
         f"{_SILENT} \"No silent overwrite\")"),
    Rule("symlink", READER, "no link out of a record",
         "A directory store never follows a symbolic link inside a record's root (readers, pack and every writer "
         "refuse it, naming the link), so nothing outside the record is read, packed or written through it.",
         f"{_SILENT} \"Symbolic links\")"),
    Rule("truthful", BOTH, "tools report what they cannot do",
         "repair reports damage it cannot restore (checksum failures: which chunks, exit 1); validate reports "
         "every damaged node, not the first, counting damage as repair does (one survey); salvage reports every "
         "frame and section it leaves out; inspect exits 1 when it marks damage; pack refuses a record that fails validation unless forced; a path "
         "that is not a record gets one answer from every door and subcommand; every CLI failure is one line on "
         "stderr with exit 2, never a traceback.", f"{_SILENT} \"Truthful tools\")"),
    Rule("messages", BOTH, "every message starts with the path and says what to do",
         "An error message starts with the path it is about (a record, a collection, an archive, a WAL, a "
         "conversion's source or target) and says what to do: an archive that ends too soon may be truncated or "
         "an incomplete copy; a missing path is 'no such file or directory' whatever its name says it would be; "
         "an option's value states its unit; an unknown format is answered with the formats known, by name. "
         "The command line prints paths as the user gave them.", f"{_SILENT} \"Truthful tools\", issue 36)"),
)
