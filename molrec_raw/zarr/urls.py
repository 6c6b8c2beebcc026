"""What every store named by URL shares, below the stores themselves (remote.py picks one,
httpstore.py is one): how a URL is shown in an error."""
from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["redact"]


def redact(url: str) -> str:
    """The URL as errors show it: a query string (signed URLs carry credentials there) is cut."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}" + ("?…" if parts.query else "")
