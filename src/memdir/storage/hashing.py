"""Content hashes: what identifies a text in the index, so unchanged text is neither
chunked nor embedded twice."""

from __future__ import annotations


def text_hash(text: str) -> str:
    import hashlib  # ~2 ms of import (OpenSSL): only when something is hashed

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def body_hash(text: str | None) -> str:
    """What the team view keeps of a document's text (documents.py's .view.json) and the
    store of a document's past bodies (postgres/documents.py): SHA-256, hex; "" for none."""
    import hashlib

    return "" if text is None else hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
