"""Rule catalogue: datasets of shards (issue 35): many collection files read as one
sequence of records, and built shard by shard.  The public chapters define no dataset:
these ids are this project's (``dataset#D1`` ..), ``spec-notes/dataset.md`` holds the
decisions.  A shard is an ordinary ``*.mrec.lmdb`` (the collection and lmdb chapters bind
every one of its bytes)."""
from molrec_raw.rules import BOTH, READER, WRITER, Chapter, Rule

_S = "spec-notes/dataset.md"
_M = "MolCrafts/molrec docs/spec/"
_SHARD = f"{_M}collection.md defines each shard"

CHAPTER = Chapter(
    "dataset", 90, "datasets: collections in shards",
    source=f"this project ({_S}); the public chapters are silent ({_M}collection.md and lmdb.md define one "
           "collection file, each shard)",
    digest=f"{_S} (no digest chapter)",
    about="A dataset is an ordered list of collection files (shards) read as one sequence of records, and "
          "the build that writes such shards deterministically, crash-safely and resumably.")

RULES = (
    Rule("D1", READER, "shards share one declaration",
         "Every shard of a dataset has the first shard's sequence_schema, units, own index columns (name, dtype, "
         "trailing shape, nullability, precision) and force field. A shard that differs is refused when the "
         "dataset opens, naming the shard and the first difference.", f"{_S} (Declaration); " + _SHARD),
    Rule("D2", READER, "a source names shards",
         "A dataset's source is a directory (its *.mrec.lmdb files in sorted name order), a glob (the matches in "
         "sorted order), a list of paths (the given order) or URLs (staged to local files first). A source that "
         "names no shard, or a path that is not a collection file, is refused naming it.",
         f"{_S} (Sources); " + _SHARD),
    Rule("D3", READER, "global record numbers follow shard order",
         "Record g of a dataset is record g - start(k) of the shard k whose range holds it, where start(k) is the "
         "number of records in the shards before k. Negative numbers count from the end; a number outside is "
         "refused as a collection refuses it.", f"{_S} (Numbering); " + _SHARD),
    Rule("D4", READER, "a shard is what it was when the dataset opened",
         "A dataset remembers each shard's record count; a shard opened later (lazily, or in a worker process "
         "the dataset was pickled into) with another count is refused naming it.", f"{_S} (Pickling); " + _SHARD),
    Rule("D5", WRITER, "shard k holds records [k*n, (k+1)*n)",
         "A build with n records per shard writes records in input order; shard k is named with its number "
         "zero-padded (part-00000.mrec.lmdb) so sorted names are shard order, and holds input records "
         "k*n .. (k+1)*n - 1. The same input gives byte-identical shards whoever writes them.",
         f"{_S} (Build); " + _SHARD),
    Rule("D6", WRITER, "a shard under its final name is complete and durable",
         "A shard is written under a temporary name, synced, renamed to its final name and its directory synced; "
         "its checksum file is written the same way after it. A killed build leaves no file under a final "
         "name that is not complete.", f"{_S} (Crash safety); " + _SHARD),
    Rule("D7", WRITER, "a rerun keeps finished shards",
         "Rerunning a build over a directory keeps each shard whose file and checksum file are both in place and "
         "agree (the file's SHA-256 is the one recorded), rewrites the others, and removes temporary files a "
         "killed build left; it ends byte-identical to an uninterrupted build.", f"{_S} (Resuming); " + _SHARD),
    Rule("D8", BOTH, "each shard has a checksum file",
         "Beside each shard <name> the builder writes <name>.sha256: the file's SHA-256 in lowercase hex, two "
         "spaces and the file name, and a newline (the sha256sum format); a stager verifies a download against "
         "it.", f"{_S} (Checksums); " + _SHARD),
)
