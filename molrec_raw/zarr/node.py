"""What arrays and groups share: where they live, how they were opened, their attributes."""
from __future__ import annotations

from typing import Any, Dict, Optional, Union

from molrec_raw.errors import MolrecError, ReadOnlyError
from molrec_raw.zarr.attributes import Attributes
from molrec_raw.zarr.codecs import Limits
from molrec_raw.zarr.codecs.threads import CodecThreads
from molrec_raw.zarr.metadata import GroupMetadata, parse_metadata
from molrec_raw.zarr.store import Store


def drop_stale_consolidation(store: Store, path: str) -> None:
    """Remove ``consolidated_metadata`` from every group from the root down to ``path``.

    zarr-python lists members and shapes from such an inline copy instead of the
    store (zarr-v3-subset#2.1), so once we change the hierarchy the copy would lie.
    Cheap when absent: one small read per ancestor, a byte search, no parse.
    """
    parts = path.split("/") if path else []
    for depth in range(len(parts) + 1):
        group_path = "/".join(parts[:depth])
        key = f"{group_path}/zarr.json" if group_path else "zarr.json"
        raw = store.get(key)
        if raw is None or b"consolidated_metadata" not in raw:
            continue
        metadata = parse_metadata(raw)
        if isinstance(metadata, GroupMetadata):
            store.replace_atomic(key, metadata.to_json())  # written without the copy


class Node:
    """A node at ``path`` in ``store``; ``attrs`` persists through ``_save_attributes``.

    ``threads`` (1 disables; capped by the machine's cores) code the chunks of large reads
    and writes at once: the nodes opened from one root share one
    :class:`~molrec_raw.zarr.codecs.threads.CodecThreads` (``codec_threads``), whose helper
    threads start on first use and stop at :meth:`close` (or when no node refers to it)."""

    metadata: Any

    def __init__(self, store: Store, path: str, *, read_only: bool = False,
                 limits: Limits = Limits(), threads: int = 2, codec_threads: Optional[CodecThreads] = None) -> None:
        self.store = store
        self.path = path
        self.read_only = read_only or store.read_only
        self.limits = limits
        self.threads = threads
        self.codec_threads = codec_threads if codec_threads is not None else CodecThreads(threads)
        self.attrs = Attributes(lambda: self.metadata.attributes, self._save_attributes)
        self._consolidation_dropped = False

    @property
    def name(self) -> str:
        """The node's absolute path, ``/`` for the root (as zarr-python names it)."""
        return "/" + self.path

    @property
    def basename(self) -> str:
        """The last segment of the node's path (``""`` for the root)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def _metadata_key(self) -> str:
        return f"{self.path}/zarr.json" if self.path else "zarr.json"

    def _options(self) -> Dict[str, Any]:
        return {"read_only": self.read_only, "limits": self.limits, "threads": self.threads,
                "codec_threads": self.codec_threads}

    def codec_work(self) -> Union[int, CodecThreads]:
        """What this node's reads and writes code chunks on: its codec threads, or 1 when
        ``threads`` was set to 1 since (codecs/batch.py ``Threads``)."""
        return self.codec_threads if self.threads > 1 else 1

    def close(self) -> None:
        """Stop the codec threads the nodes of this hierarchy share (a later read or write
        starts them anew); the store is the caller's and stays open."""
        self.codec_threads.close()

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _context(self, exc: MolrecError, key: Optional[str] = None) -> MolrecError:
        return exc.add_context(store=self.store.describe(), node=self.path, key=key)

    def _check_writable(self) -> None:
        """Every mutation starts here: refuse on read-only nodes, and before the first
        change drop any consolidated copy of the metadata above this node."""
        if self.read_only:
            raise self._context(ReadOnlyError(f"{type(self).__name__.lower()} is read-only"))
        if not self._consolidation_dropped:
            drop_stale_consolidation(self.store, self.path)
            self._consolidation_dropped = True

    def _save_attributes(self, attributes: Dict[str, Any], durable: bool = False) -> None:
        raise NotImplementedError
