"""``attrs``: a mutable mapping over a node's ``attributes``, persisted on every change."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, MutableMapping


class Attributes(MutableMapping[str, Any]):
    """Each change rewrites the node's zarr.json by atomic replace; ``update`` writes once."""

    def __init__(self, load: Callable[[], Dict[str, Any]], save: Callable[[Dict[str, Any], bool], None]) -> None:
        self._load = load
        self._save = save

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        current = dict(self._load())
        del current[key]
        self._save(current, False)

    def update(self, *args: Any, **kwargs: Any) -> None:
        current = dict(self._load())
        current.update(*args, **kwargs)
        self._save(current, False)

    def put(self, attributes: Dict[str, Any], *, durable: bool = False) -> None:
        """Replace all attributes at once; ``durable``: the new zarr.json is durable before
        it replaces the old one (``Store.replace_durable``)."""
        self._save(dict(attributes), durable)

    def asdict(self) -> Dict[str, Any]:
        return dict(self._load())

    def __repr__(self) -> str:
        return f"Attributes({self._load()!r})"
