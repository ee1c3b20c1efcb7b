"""Which fact a write may replace or remove (F3), one rule and one wording for every
backend: each passes its own lookup of a fact by id, inside its write transaction."""

from __future__ import annotations

from .. import advice
from ..errors import ConflictError, NotFoundError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..models import Fact
    from .rows_cold import Superseded


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


def supersede(
    old: Fact,
    category: str | None,
    content: str,
    start: str,
    *,
    valid_from: str | None,
    same: Fact | None,
    root: Callable[[Fact], int],
    get: Callable[[int], Fact | None],
    end: Callable[[Fact, int], None],
    insert: Callable[[], int],
) -> Superseded:
    """F3's supersede of `old` (supersedable already) by `content`, from `start`
    (`valid_from` as given, or now), inside the backend's write: `same` is the active fact
    saying `content` exactly, if any; `root(f)` the first version of f's history;
    `end(f, by)` ends f in fact `by` from `start`; `insert()` stores the new version and
    gives its id."""
    from .rows_cold import Superseded

    if valid_from is not None and old.valid_from and valid_from < old.valid_from:
        raise ConflictError(
            f"fact {old.id} holds from {old.valid_from}: the version replacing it "
            f"cannot begin before that (valid_from {valid_from})"
        )
    if content == old.content and category in (None, old.category):
        if old.status == "superseded":
            # its own old text, while a later version holds: not a duplicate (the later one
            # would stay active); to go back to it is to supersede the version that holds
            active(get, old.id, "supersede")
        return Superseded(old, old._replace(duplicate=True))  # nothing to change
    if same is not None and same.id != old.id:
        if root(same) != root(old):
            raise ConflictError(
                f"fact {same.id} already says this; fact {old.id} was left as it is: "
                f"to retire {old.id}, remove it: {advice.fact_remove(old.id)}"
            )
        if old.status == "superseded":  # a later version says it already
            return Superseded(old, same._replace(duplicate=True))
        end(old, same.id)  # one branch of a fork takes the other's text: it ends in that one
        merged = get(old.id)
        assert merged is not None
        return Superseded(merged, same)
    new_id = insert()
    if old.status == "active":  # else a fork: the first successor keeps its place
        end(old, new_id)
    before, after = get(old.id), get(new_id)
    assert before is not None and after is not None
    return Superseded(before, after)
