"""Content hashes: what identifies a text in the index, so unchanged text is neither
chunked nor embedded twice."""

from __future__ import annotations


def text_hash(text: str) -> str:
    import hashlib  # ~2 ms of import (OpenSSL): only when something is hashed

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
