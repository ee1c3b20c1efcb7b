"""`memdir migrate` and the markdown tiers (W1): carried from a memory root's files into the
rows of an empty scope, the root becoming their rendered view, or rendered from the rows
into the root, whose files become the truth. Each checks every document text for text."""

from __future__ import annotations

import contextlib
import os

from . import files
from .documents import VIEW_STATE, TeamDocuments

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .documents import DocumentStore


def carry_to_rows(memory_dir: str, store: DocumentStore) -> int:
    """`memdir migrate --to URL`: the watched files of this memory root become the rows of
    an empty scope, and the root its rendered view. Returns the documents stored."""
    with contextlib.suppress(FileNotFoundError):  # a view of another time: its bases are void
        files.unlink(os.path.join(memory_dir, VIEW_STATE), root=memory_dir)
    team = TeamDocuments(memory_dir, store)
    team.refresh()
    return len(team.verify())


def carry_to_files(memory_dir: str, store: DocumentStore) -> int:
    """`memdir migrate --to local`: the scope's documents rendered into this memory root,
    where the files become the truth; the view's state goes (nothing renders any more).
    Returns the documents rendered."""
    team = TeamDocuments(memory_dir, store)
    team.refresh()
    carried = team.verify()
    with contextlib.suppress(FileNotFoundError):
        files.unlink(os.path.join(memory_dir, VIEW_STATE), root=memory_dir)
    return len(carried)
