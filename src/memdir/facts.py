"""The fact archive's rules (F2-F5): categories, size caps, dates. Rows live in the store."""

from __future__ import annotations

from .errors import ValidationError
from .models import CATEGORIES, FACT_STATUSES


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
