"""Helpers shared by the metrics tests."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict


def wal_of(record: Path) -> Path:
    return record / "metrics" / "metrics.jsonl"


def catalog_of(record: Path) -> Dict[str, Any]:
    return json.loads((record / "metrics" / "zarr.json").read_text())["attributes"]


class SeamLog:
    """A recording file seam (``fileops``): the store key each replace renames to, and each
    file made durable (by path or by descriptor), in order."""

    def __new__(cls, root: Path) -> Any:
        import os

        from molrec_raw.zarr.fileops import FileOps

        class _Log(FileOps):
            def __init__(self) -> None:
                self.root = str(root)
                self.renamed: list = []
                self.synced: list = []
                self._fds: Dict[int, str] = {}

            def _key(self, path: str) -> str:
                return os.path.relpath(path, self.root).replace(os.sep, "/")

            def open(self, path: str, flags: int, mode: int = 0o666) -> int:
                fd = super().open(path, flags, mode)
                self._fds[fd] = self._key(path)
                return fd

            def replace(self, src: str, dst: str) -> None:
                super().replace(src, dst)
                self.renamed.append(self._key(dst))

            def fsync(self, fd: int) -> None:
                super().fsync(fd)
                self.synced.append(self._fds[fd].split(".molrec-tmp.")[0])

            def fsync_file(self, path: str) -> None:
                super().fsync_file(path)
                self.synced.append(self._key(path))

        return _Log()
