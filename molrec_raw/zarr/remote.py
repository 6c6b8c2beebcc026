"""Stores named by URL: ``http(s)://`` through the standard library, every other scheme
(``s3://``, ``gs://``, ``az://``, ``memory://``, ``file://`` ...) through fsspec (the optional
extra ``molrec-raw[remote]``, imported only when such a URL is opened).

A URL whose last path segment ends in ``.zip`` is an archive read by ranges
(``ZipStore`` over ``HttpFile``/``FsspecFile``); any other URL is a directory of keys
(``HttpStore`` — no listing over plain HTTP — or ``FsspecStore``).  Remote stores are
read-only.
"""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from molrec_raw.errors import InvalidValueError, ReadOnlyError
from molrec_raw.zarr.store import Store
from molrec_raw.zarr.urls import redact

__all__ = ["is_url", "url_name", "open_url", "redact"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")  # two letters at least: never a Windows drive


def is_url(location: Any) -> bool:
    """True for a string of the form ``scheme://...``."""
    return isinstance(location, str) and _SCHEME.match(location) is not None


def url_name(url: str) -> str:
    """The last segment of the URL's path (query and fragment left out), unquoted."""
    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


def open_url(url: str, mode: str = "r", **options: Any) -> Store:
    """A read-only store for ``url``.  ``options`` go to ``HttpOptions`` for http(s)
    (``token``, ``headers``, ``timeout``, ``retries``, ...) and to fsspec as storage options
    for every other scheme."""
    if mode != "r":
        raise ReadOnlyError(f"a store named by URL is read-only (mode {mode!r} asked): write locally, then "
                            "upload", store=url)
    is_zip = url_name(url).lower().endswith(".zip")
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("http", "https"):
        from molrec_raw.zarr.httpstore import HttpFile, HttpStore
        from molrec_raw.zarr.zipstore import ZipStore

        return ZipStore(HttpFile(url, **options)) if is_zip else HttpStore(url, **options)
    if not scheme:
        raise InvalidValueError(f"not a URL: {url!r}")
    from molrec_raw.zarr.fsspecstore import FsspecFile, FsspecStore
    from molrec_raw.zarr.zipstore import ZipStore

    return ZipStore(FsspecFile(url, **options)) if is_zip else FsspecStore(url, **options)
