"""Groups, node creation and the ``open_group`` / ``open_array`` entry points (zarr-v3-subset §1).

Every node has its own zarr.json; creating a node creates any missing ancestor
group.  Members are found by listing the group's prefix and reading each
child's zarr.json.  Node names follow §1: non-empty, no ``/``, not only dots,
not starting with ``__``, not ``zarr.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from molrec_raw.errors import (
    InvalidKeyError, InvalidValueError, MolrecError, NodeExistsError,
    NodeNotFoundError, ReadOnlyError,
)
from molrec_raw.zarr.array import Array
from molrec_raw.zarr.node import Node, drop_stale_consolidation
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline, Limits
from molrec_raw.zarr.codecs.sharding import DEFAULT_INDEX_CODECS
from molrec_raw.zarr.dtypes import data_type_for_numpy
from molrec_raw.zarr.metadata import ArrayMetadata, ChunkKeyEncoding, GroupMetadata, parse_metadata
from molrec_raw.zarr.remote import is_url, open_url
from molrec_raw.zarr.store import DirectoryStore, Store, StoreLike

__all__ = ["Group", "open_group", "open_array", "open_node", "default_codecs", "as_store", "is_valid_node_name"]

AnyNode = Union["Group", Array]
_N = TypeVar("_N", bound=Node)
_MODES = ("r", "r+", "a", "w")


def default_codecs(dtype: Any) -> List[Dict[str, Any]]:
    """The inner pipeline used when ``codecs`` is omitted: zstd level 3, crc32c closing it."""
    first = (
        {"name": "vlen-utf8", "configuration": {}}
        if data_type_for_numpy(dtype).is_string
        else {"name": "bytes", "configuration": {"endian": "little"}}
    )
    return [first, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}]


def is_valid_node_name(name: Any) -> bool:
    """zarr-v3-subset#1: non-empty, no ``/``, not only dots, no ``__`` prefix, not ``zarr.json``."""
    return (
        isinstance(name, str) and bool(name) and "/" not in name and set(name) != {"."}
        and not name.startswith("__") and name != "zarr.json"
    )


def validate_node_name(name: str) -> str:
    """A new node's name per zarr-v3-subset#1."""
    if not is_valid_node_name(name):
        raise InvalidKeyError(f"invalid node name {name!r}", rule="zarr-v3-subset#1")
    return name


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def as_store(store_or_path: StoreLike, mode: str = "r") -> Store:
    """A Store for a path: ``*.zip`` files open as a read-only ZipStore, else a directory; a
    URL opens read-only through :func:`molrec_raw.zarr.remote.open_url`."""
    if mode not in _MODES:
        raise InvalidValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if isinstance(store_or_path, Store):
        return store_or_path
    if is_url(store_or_path):
        return open_url(str(store_or_path), mode)
    path = Path(store_or_path)
    if path.is_file() or (path.suffix == ".zip" and not path.is_dir()):
        if mode != "r":
            raise ReadOnlyError("zip archives are read-only", store=str(path))
        from molrec_raw.zarr.zipstore import ZipStore  # only a zip needs it (and zipfile)
        return ZipStore(path)
    return DirectoryStore(path, read_only=(mode == "r"))


class Group(Node):
    """A Zarr V3 group: attributes and children."""

    def __init__(self, store: Store, path: str, metadata: GroupMetadata, **options: Any) -> None:
        super().__init__(store, path, **options)
        self.metadata = metadata

    def __repr__(self) -> str:
        return f"<Group {self.name} in {self.store.describe()}>"

    def _save_attributes(self, attributes: Dict[str, Any], durable: bool = False) -> None:
        self._check_writable()
        metadata = GroupMetadata(attributes, self.metadata.extra)
        if durable:
            self.store.replace_durable(self._metadata_key, metadata.to_json())
        else:
            self.store.replace_atomic(self._metadata_key, metadata.to_json())
        self.metadata = metadata

    # -- children -----------------------------------------------------------
    def __getitem__(self, name: str) -> AnyNode:
        path = _join(self.path, name.strip("/"))
        return open_node(self.store, path, **self._options())

    def get(self, name: str, default: Any = None) -> Any:
        """The child node (group or array) at ``name`` (a relative path), or ``default`` when
        nothing is there."""
        try:
            return self[name]
        except NodeNotFoundError:
            return default

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def _child_dirs(self) -> List[str]:
        """Sub-prefixes that may be children (``__`` prefixes are reserved, §1)."""
        _, dirs = self.store.list_dir(f"{self.path}/" if self.path else "")
        return [d for d in dirs if not d.startswith("__")]

    def _member_names(self) -> List[str]:
        return [d for d in self._child_dirs() if self.store.size(_join(_join(self.path, d), "zarr.json")) is not None]

    def __iter__(self) -> Iterator[str]:
        return iter(self._member_names())

    def __len__(self) -> int:
        return len(self._member_names())

    def members(self) -> Tuple[Tuple[str, AnyNode], ...]:
        """(name, node) of every child, sorted by name (one metadata read per child)."""
        found = []
        for name in self._child_dirs():
            try:
                found.append((name, self[name]))
            except NodeNotFoundError:  # a directory without zarr.json is not a node
                pass
        return tuple(found)

    def groups(self) -> Iterator[Tuple[str, "Group"]]:
        """(name, group) of every child group, sorted by name."""
        return ((n, m) for n, m in self.members() if isinstance(m, Group))

    def arrays(self) -> Iterator[Tuple[str, Array]]:
        """(name, array) of every child array, sorted by name."""
        return ((n, m) for n, m in self.members() if isinstance(m, Array))

    # -- creation -----------------------------------------------------------
    def _prepare_child(self, name: str, overwrite: bool) -> str:
        self._check_writable()
        parts = name.strip("/").split("/")
        for part in parts:
            validate_node_name(part)
        path = self.path
        for part in parts[:-1]:  # every ancestor must be a group (no implicit groups)
            path = _join(path, part)
            _require_group(self.store, path)
        path = _join(path, parts[-1])
        if self.store.size(_join(path, "zarr.json")) is not None:
            if not overwrite:
                raise NodeExistsError("a node already exists here", store=self.store.describe(), node=path)
            _delete_tree(self.store, path)
        return path

    def create_group(self, name: str, attributes: Optional[Dict[str, Any]] = None, *,
                     overwrite: bool = False, durable: bool = False) -> "Group":
        """Create a group; ``durable``: its zarr.json is written with ``Store.replace_durable``
        (never an empty file under its name after a power cut)."""
        path = self._prepare_child(name, overwrite)
        metadata = GroupMetadata(dict(attributes or {}))
        if durable:
            self.store.replace_durable(_join(path, "zarr.json"), metadata.to_json())
        else:
            self.store.set(_join(path, "zarr.json"), metadata.to_json())
        return _created(Group(self.store, path, metadata, **self._options()))

    def require_group(self, name: str, *, durable: bool = False) -> "Group":
        """The child group ``name``, created when absent; an array there is refused
        (NodeExistsError)."""
        node = self.get(name)
        if node is None:
            return self.create_group(name, durable=durable)
        if not isinstance(node, Group):
            raise NodeExistsError("an array exists where a group was required",
                                  store=self.store.describe(), node=node.path)
        return node

    def create_array(
        self, name: str, *, shape: Sequence[int], dtype: Any, chunks: Optional[Sequence[int]] = None,
        shards: Optional[Sequence[int]] = None, codecs: Optional[List[Any]] = None,
        fill_value: Any = None, attributes: Optional[Dict[str, Any]] = None,
        dimension_names: Optional[Sequence[Optional[str]]] = None,
        chunk_key_encoding: Optional[Dict[str, Any]] = None, shard_index_location: str = "end",
        overwrite: bool = False,
    ) -> Array:
        """Create an array.  ``codecs`` is the (inner) pipeline as zarr.json codec objects;
        with ``shards`` the array is sharded: the grid uses ``shards`` and each shard holds
        ``chunks``-shaped inner chunks."""
        metadata, pipeline = build_array_metadata(
            shape=shape, dtype=dtype, chunks=chunks, shards=shards, codecs=codecs,
            fill_value=fill_value, attributes=attributes, dimension_names=dimension_names,
            chunk_key_encoding=chunk_key_encoding, shard_index_location=shard_index_location,
            limits=self.limits,
        )
        path = self._prepare_child(name, overwrite)
        self.store.set(_join(path, "zarr.json"), metadata.to_json())
        return _created(Array(self.store, path, metadata, pipeline=pipeline, **self._options()))


def build_array_metadata(
    *, shape: Sequence[int], dtype: Any, chunks: Optional[Sequence[int]], shards: Optional[Sequence[int]],
    codecs: Optional[List[Any]], fill_value: Any, attributes: Optional[Dict[str, Any]],
    dimension_names: Optional[Sequence[Optional[str]]], chunk_key_encoding: Optional[Dict[str, Any]],
    shard_index_location: str, limits: Limits,
) -> Tuple[ArrayMetadata, CodecPipeline]:
    """Validate a caller's array description; return its canonical metadata and pipeline."""
    dtype_ = data_type_for_numpy(dtype)
    shape_t = tuple(int(s) for s in shape)
    chunks_t = tuple(int(c) for c in (chunks if chunks is not None else [max(1, s) for s in shape_t]))
    if len(chunks_t) != len(shape_t) or any(c < 1 for c in chunks_t) or any(s < 0 for s in shape_t):
        raise InvalidValueError(f"chunks {list(chunks_t)} do not fit shape {list(shape_t)}")
    inner = list(codecs) if codecs is not None else default_codecs(dtype)
    if shards is not None:
        grid = tuple(int(s) for s in shards)
        top: List[Any] = [{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": list(chunks_t), "codecs": inner,
                "index_codecs": DEFAULT_INDEX_CODECS, "index_location": shard_index_location,
            },
        }]
    else:
        grid, top = chunks_t, inner
    fill = dtype_.coerce_fill(fill_value)
    pipeline = CodecPipeline(top, ChunkSpec(grid, dtype_, fill, limits))
    encoding = ChunkKeyEncoding.from_json(chunk_key_encoding or {"name": "default"})
    names = None if dimension_names is None else tuple(dimension_names)
    return ArrayMetadata(
        shape=shape_t, dtype=dtype_, chunk_shape=grid, fill_value=fill, codecs=tuple(pipeline.to_json()),
        chunk_key_encoding=encoding, attributes=dict(attributes or {}), dimension_names=names,
    ), pipeline


def _created(node: _N) -> _N:
    """A node we just created: its ancestors were cleared of consolidated copies already."""
    node._consolidation_dropped = True
    return node


def _read_metadata(store: Store, path: str) -> Any:
    key = _join(path, "zarr.json")
    raw = store.get(key)
    if raw is None:
        raise NodeNotFoundError("no group or array here", store=store.describe(), node=path)
    try:
        return parse_metadata(raw)
    except MolrecError as exc:
        raise exc.add_context(store=store.describe(), node=path, key=key) from None


def open_node(store: Store, path: str, **options: Any) -> AnyNode:
    """Open whatever node lives at ``path``."""
    metadata = _read_metadata(store, path)
    if isinstance(metadata, GroupMetadata):
        return Group(store, path, metadata, **options)
    try:
        return Array(store, path, metadata, **options)
    except MolrecError as exc:  # the codec pipeline is validated when the array opens
        raise exc.add_context(store=store.describe(), node=path, key=_join(path, "zarr.json")) from None


def _require_group(store: Store, path: str) -> None:
    key = _join(path, "zarr.json")
    raw = store.get(key)
    if raw is None:
        store.set(key, GroupMetadata().to_json())
    elif not isinstance(_read_metadata(store, path), GroupMetadata):
        raise NodeExistsError("an array exists where a group is needed", store=store.describe(), node=path)


def _delete_tree(store: Store, path: str) -> None:
    """Remove a node and everything under it; its zarr.json goes first, so a crash
    never leaves a node that claims chunks which are half gone."""
    prefix = f"{path}/" if path else ""
    keys = list(store.list(prefix))
    meta = _join(path, "zarr.json")
    if meta in keys:
        store.delete(meta)
    for key in keys:
        if key != meta:
            store.delete(key)


def _ensure_ancestors(store: Store, path: str) -> None:
    """Before a node is created at ``path``: every ancestor is a group, none holds a
    consolidated copy that the new node would make stale."""
    parts = path.split("/") if path else []
    drop_stale_consolidation(store, "/".join(parts[:-1]))
    current = ""
    for part in parts[:-1]:
        current = _join(current, part)
        _require_group(store, current)


def open_group(store_or_path: StoreLike, mode: str = "r", *, path: str = "",
               attributes: Optional[Dict[str, Any]] = None, limits: Limits = Limits(),
               threads: int = 2) -> Group:
    """Open (or create) a group.  Modes: ``r`` read-only; ``r+`` read/write, must exist;
    ``a`` read/write, created if missing; ``w`` created, replacing anything at ``path``."""
    store = as_store(store_or_path, mode)
    path = path.strip("/")
    options = {"read_only": mode == "r", "limits": limits, "threads": threads}
    if mode == "w":
        if store.read_only:
            raise ReadOnlyError("store is read-only", store=store.describe())
        _delete_tree(store, path)
    elif store.size(_join(path, "zarr.json")) is not None or mode in ("r", "r+"):
        node = open_node(store, path, **options)
        if not isinstance(node, Group):
            raise NodeExistsError("an array, not a group, is at this path", store=store.describe(), node=path)
        return node
    _ensure_ancestors(store, path)
    metadata = GroupMetadata(dict(attributes or {}))
    store.set(_join(path, "zarr.json"), metadata.to_json())
    return _created(Group(store, path, metadata, **options))


def open_array(store_or_path: StoreLike, path: str = "", mode: str = "r", *,
               limits: Limits = Limits(), threads: int = 2, **create: Any) -> Array:
    """Open an existing array (``r``, ``r+``), or create one (``w``; ``a`` when missing)
    from the ``create_array`` keywords (shape, dtype, chunks, ...)."""
    store = as_store(store_or_path, mode)
    path = path.strip("/")
    options = {"read_only": mode == "r", "limits": limits, "threads": threads}
    exists = store.size(_join(path, "zarr.json")) is not None
    if mode in ("r", "r+") or (mode == "a" and exists):
        node = open_node(store, path, **options)
        if not isinstance(node, Array):
            raise NodeExistsError("a group, not an array, is at this path", store=store.describe(), node=path)
        return node
    if not create:
        raise InvalidValueError("creating an array needs shape, dtype, ... keywords")
    metadata, pipeline = build_array_metadata(
        shape=create.pop("shape"), dtype=create.pop("dtype"), chunks=create.pop("chunks", None),
        shards=create.pop("shards", None), codecs=create.pop("codecs", None),
        fill_value=create.pop("fill_value", None), attributes=create.pop("attributes", None),
        dimension_names=create.pop("dimension_names", None),
        chunk_key_encoding=create.pop("chunk_key_encoding", None),
        shard_index_location=create.pop("shard_index_location", "end"), limits=limits,
    )
    if create:
        raise InvalidValueError(f"unknown keywords {sorted(create)}")
    if store.read_only:
        raise ReadOnlyError("store is read-only", store=store.describe())
    _delete_tree(store, path)
    _ensure_ancestors(store, path)
    store.set(_join(path, "zarr.json"), metadata.to_json())
    return _created(Array(store, path, metadata, pipeline=pipeline, **options))
