"""Content hashes: what identifies a text in the index, so unchanged text is neither
chunked nor embedded twice."""

from __future__ import annotations

import hashlib


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
