"""Which fact a write may replace or remove (F3), one rule and one wording for every
backend: each passes its own lookup of a fact by id, inside its write transaction."""

from __future__ import annotations

from .. import advice
from ..errors import ConflictError, NotFoundError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..models import Fact


def _found(get: Callable[[int], Fact | None], fact_id: int) -> Fact:
    fact = get(fact_id)
    if fact is None:
        raise NotFoundError(
            f"no fact with id {fact_id}: search for it with {advice.search(kind='fact')}"
        )
    return fact


def _not_removed(fact: Fact, action: str) -> Fact:
    if fact.status == "removed":
        raise ConflictError(f"fact {fact.id} was removed on {fact.updated}; nothing to {action}")
    return fact


def supersedable(get: Callable[[int], Fact | None], fact_id: int) -> Fact:
    """The fact a supersede replaces: active, or superseded already (the new version is
    then a second successor: a fork, F3); never a removed one."""
    return _not_removed(_found(get, fact_id), "supersede")


def active(get: Callable[[int], Fact | None], fact_id: int, action: str) -> Fact:
    """The active fact `fact_id`, else a ConflictError whose hint names the version that
    holds now (the next one may be superseded too)."""
    fact = _found(get, fact_id)
    if fact.status == "superseded":
        newest = fact
        while newest.status == "superseded" and newest.superseded_by is not None:
            newest = get(newest.superseded_by) or newest._replace(status="gone")
        via = (
            f" (its newest version is fact {newest.id})" if newest.id != fact.superseded_by else ""
        )
        said = f"fact {fact_id} was already superseded by fact {fact.superseded_by}{via}"
        if newest.status != "active":
            raise ConflictError(f"{said}, which is no longer active; nothing to {action}")
        again = (
            advice.fact_supersede(newest.id)
            if action == "supersede"
            else advice.fact_remove(newest.id)
        )
        raise ConflictError(f"{said}; {action} {newest.id} instead: {again}")
    return _not_removed(fact, action)
