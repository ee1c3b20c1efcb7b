"""The public API's closed vocabularies as Literal types, and the Embedder protocol, for
type checkers and at run time (`isinstance(x, Embedder)`: a protocol checked by its
members). The library's own modules import this under TYPE_CHECKING only: `typing` costs
~5 ms of import that the CLI's cold start does not pay. tests/test_public_types.py keeps
each Literal equal to the tuple the code validates with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

# search (Q1-Q3): how a search runs ([search] mode; "auto" is hybrid with the embeddings
# extra, else lexical) and what a hit is (search.KINDS; an entry's hits are "global")
SearchMode = Literal["auto", "lexical", "semantic", "hybrid"]
Kind = Literal["fact", "procedure", "global", "task", "daily"]
# facts (F1-F3): models.CATEGORIES, models.FACT_STATUSES
Category = Literal["preference", "convention", "decision", "learning"]
FactStatus = Literal["active", "superseded", "removed"]
# tasks (T): models.TASK_STATES, a task's status
TaskState = Literal["running", "done", "failed", "cancelled"]
# sessions (U1): the surfaces memdir names (models.SURFACES); any lowercase word is a
# valid surface, so signatures that take one accept `Surface | str`
Surface = Literal["cli", "repl", "telegram", "daemon", "scheduled", "mcp"]


@runtime_checkable
class Embedder(Protocol):
    """Q2: what turns texts into L2-normalised float32 vectors (storage/embeddings.py has
    the default model, MiniLM). `name` is recorded with every vector, so a new model never
    mixes with an old one."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> Vectors: ...


__all__ = ["Category", "Embedder", "FactStatus", "Kind", "SearchMode", "Surface", "TaskState"]
