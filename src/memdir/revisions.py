"""V4: the revision of a memory file, so that an edit made from what a person saw is
refused when the file changed since (a conflicting concurrent write is shown, never
overwritten). A revision is a hash of the file's whole text; a file that does not exist
has the revision NONE. The check runs under the lock the write takes, so nothing can slip
in between the comparison and the write."""

from __future__ import annotations

from .errors import ConflictError

NONE = "none"  # the revision of a file that does not exist


def of(text: str | None) -> str:
    """The revision of a file holding `text` (None: no file)."""
    if text is None:
        return NONE
    import hashlib  # ~2 ms of import (OpenSSL): only when an edit is checked

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def check(expected: str | None, current: str | None, what: str) -> None:
    """Refuse the write when the file is no longer the revision the editor started from
    (`expected` None: no check, the plain write of every other front end)."""
    if expected is None or of(current) == expected:
        return
    gone = current is None
    raise ConflictError(
        f"{what} was {'removed' if gone else 'changed'} by another writer since you opened "
        "it: nothing was written; reload it, merge your change into what it holds now, and "
        "save again"
    )
