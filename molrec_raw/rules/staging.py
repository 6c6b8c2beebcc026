"""Rule catalogue: staging shards from object storage into a node-local cache (issue 35,
spec-notes/dataset.md "Staging"); this project's decisions — the public chapters say nothing
about object stores or caches; cited as ``staging#<name>``."""
from molrec_raw.rules import BOTH, READER, Chapter, Rule

_NOTES = "spec-notes/dataset.md"
_SILENT = ("this project's decision (the public chapters are silent; MolCrafts/molrec docs/spec/lmdb.md stores "
           f"a collection as one LMDB file): {_NOTES}")

CHAPTER = Chapter(
    "staging", 85, "staging shards from object storage into a local cache",
    source=_SILENT, digest=_NOTES,
    about="Binding for molrec_raw.dataset.staging: where a shard named by URL is put before it is opened, how a "
          "download is checked, how processes of one node share the cache, and what the byte budget evicts.")

RULES = (
    Rule("local", READER, "a shard is read from a local file",
         "A collection shard named by URL is downloaded whole into a local cache directory (cache= or the "
         "environment variable MOLREC_RAW_CACHE; with neither, the URL is refused naming both) and opened from "
         "there: LMDB maps its file into memory (mmap), which needs a local file, not a stream of byte ranges.",
         f"{_SILENT} \"Staging\""),
    Rule("whole", READER, "nothing partial under a final name",
         "A shard is downloaded to a temporary name in the cache, its size checked against the size the store "
         "lists, its SHA-256 checked against the '<shard>.sha256' file beside it in the store when there is one, "
         "fsynced, and only then renamed into place (and the directory fsynced). A torn download, a wrong size, a "
         "wrong digest or a server error is a MolrecError naming the URL, and the temporary file is removed.",
         f"{_SILENT} \"Staging\""),
    Rule("once", BOTH, "one download per shard per node",
         "Processes sharing a cache directory download a shard once: the downloader holds an exclusive flock on "
         "the shard's download lock file; the others wait for it and then find the shard in place. A shard in "
         "place is trusted without asking the store again (objects are immutable; a changed object needs a new "
         "URL or an eviction).", f"{_SILENT} \"Cache sharing\""),
    Rule("evict", BOTH, "the budget evicts the least recently used shards not in use",
         "Every process that has staged a shard holds a shared flock on its use lock file until it releases the "
         "shards. With a byte budget, staging first evicts the least recently staged shards whose use lock it can "
         "take exclusively without waiting (no process uses them) until what is asked for fits; shards asked for "
         "that alone exceed the budget, or a cache whose shards are all in use, are refused naming the cache.",
         f"{_SILENT} \"Eviction\""),
)
