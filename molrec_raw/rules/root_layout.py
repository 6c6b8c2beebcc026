"""Rule catalogue: the seed chapter "Root layout" (digest ``root-layout.md``), its invariants."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

CHAPTER = Chapter(
    "root-layout", 20, "the root layout (the seed chapter): one Zarr V3 root per record",
    source="MolCrafts/molrec docs/spec/storage.md (Root layout, Invariants)", digest="root-layout.md",
    about="The authoritative chapter given to the project: how a record lays out on one Zarr V3 root.")

RULES = (
    Rule("1", BOTH, "a record is one Zarr V3 root",
         "The openable package is one Zarr V3 hierarchy: a live record is a directory named *.mrec whose top is "
         "the root zarr.json, its at-rest form a *.mrec.zip of that directory. Anything else (a file that is not "
         "such a zip, a directory without a root) is not a record."),
    Rule("2", BOTH, "document sections are group attributes",
         "meta, status and method are each one JSON object: the attribute map of an array-free group."),
    Rule("3", BOTH, "metrics: dense arrays and a JSONL WAL",
         "Closed metrics are dense Zarr series arrays under metrics/ with catalog attributes; live metrics append "
         "to the plain file metrics/metrics.jsonl, densified on flush and close."),
    Rule("4", BOTH, "array sections are Zarr groups",
         "frame, system, the force field's style tables and observables are Zarr groups and arrays; the "
         "trajectory uses the ragged CSR layout."),
    Rule("5", BOTH, "preserve the unknown",
         "Readers keep unknown root sections and unknown keys, and a writer of the record writes them back "
         "unchanged: nothing a reader does not interpret is lost."),
    Rule("6", BOTH, "molrec_version",
         "Writers create meta/ and stamp meta['molrec_version']. Readers check it only when present: a JSON "
         "integer of at least 1 and at most the newest they support, never null; an absent key is a current "
         "store, read without a check (README#decision-1)."),
    Rule("7", WRITER, "data precede metadata",
         "Chunk bytes land before the array's zarr.json is replaced (atomically), and the trajectory's commit "
         "marker nstep is written last of all; readers are bound by nstep."),
)
