"""The fact archive's rules (F2-F5): categories, size caps, dates. Rows live in the store."""

from __future__ import annotations

from .errors import ValidationError
from .models import CATEGORIES, FACT_STATUSES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .models import Fact


def check_category(category: str | None) -> str:
    if category not in CATEGORIES:
        shown = "no category" if category is None else f"unknown category {category!r}"
        raise ValidationError(f"{shown}: a fact's category is one of {', '.join(CATEGORIES)}")
    return category


def check_status(status: object) -> str:
    """A fact brought in from elsewhere says what became of it; none means active."""
    status = status or "active"
    if status not in FACT_STATUSES:
        raise ValidationError(f"bad fact status {status!r}: {', '.join(FACT_STATUSES)}")
    assert isinstance(status, str)
    return status


def check_content(content: str, max_bytes: int, what: str = "fact") -> str:
    """X3: empty or oversized content is refused, never cut."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError(f"the {what} is empty: give its text")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(
            f"the {what} is not valid text (it holds bytes that are not UTF-8): fix its encoding"
        ) from None
    if size > max_bytes:
        raise ValidationError(
            f"the {what} is {size:,} bytes, over the cap of {max_bytes:,} "
            "(memory.max_entry_bytes): split it, or keep the details in a procedure or file"
        )
    return content.strip()  # X2: the facade scans it with the write's other fields


def check_id(value: object) -> int:
    """Every fact id from outside passes here: a whole number from 1 that SQLite can hold."""
    from .numbers import check_int

    return check_int(value, "fact id", strings=True)


def normalize_since(since: str | None) -> str | None:
    """An ISO date or time -> the UTC timestamp format the archive stores. A date alone
    means its start (UTC)."""
    if since is None or since == "":
        return None
    from datetime import UTC, datetime  # only when a date filter is given

    try:
        moment = datetime.fromisoformat(since.strip())
    except (ValueError, AttributeError):
        raise ValidationError(
            f"bad date {since!r}: use an ISO date such as 2026-06-10 or 2026-06-10T14:00:00Z"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_as_of(as_of: str | None) -> str | None:
    """A moment to search the past at: a date alone means its end (what held that day)."""
    if as_of is None or as_of == "":
        return None
    moment = normalize_since(as_of)
    assert moment is not None
    if len(as_of.strip()) == 10:  # YYYY-MM-DD
        return moment[:10] + "T23:59:59Z"
    return moment


# -- a history that went two ways (F3, W1) ------------------------------------------------
# Two writers that supersede one fact from the same view of it both keep their version: the
# fact then has two successors (each row's `supersedes` names it; its own `superseded_by`
# keeps the first). A version superseded by a sibling's exact text points at that sibling
# (its `superseded_by`), which settles the fork without a new row. So a fact's successors
# are the facts that supersede it and the one it is superseded by.


def successors(chain: Sequence[Fact]) -> dict[int, list[int]]:
    """Each version of a history -> the versions that replaced it, in id order."""
    ids = {f.id for f in chain}
    after: dict[int, set[int]] = {f.id: set() for f in chain}
    for f in chain:
        if f.supersedes in after:
            after[f.supersedes].add(f.id)
        if f.superseded_by in ids:
            after[f.id].add(f.superseded_by)
    return {fid: sorted(later) for fid, later in after.items()}


def heads(chain: Sequence[Fact], start: int) -> list[int]:
    """The active versions reached from `start` (itself included), in id order."""
    later, status = successors(chain), {f.id: f.status for f in chain}
    seen, todo = {start}, [start]
    while todo:
        for nxt in later.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return sorted(fid for fid in seen if status.get(fid) == "active")


def open_forks(chain: Sequence[Fact]) -> list[tuple[int, list[int]]]:
    """(fact, the active versions its history went on to) for each version whose successors
    lead to two or more facts that both hold: the forks a person has to settle. A fork
    nested in another with the same versions at its ends is named once, at the later fact."""
    later = successors(chain)
    found: dict[tuple[int, ...], int] = {}
    for fid in sorted(later):
        if len(later[fid]) < 2:
            continue
        ends = heads(chain, fid)
        branches = sum(1 for nxt in later[fid] if heads(chain, nxt))
        if len(ends) >= 2 and branches >= 2:
            found[tuple(ends)] = fid
    return sorted((fid, list(ends)) for ends, fid in found.items())
