"""X2, the refusal: a write whose fields hold a secret raises SecretError before anything is
written. The finding is secret_scan's; this module turns it into the error."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .errors import SecretError
from .secret_scan import Found, find


def check(text: str | None, what: str, field: str | None = None) -> None:
    """Raise SecretError naming the first secret in `text` (the `field` of a `what`)."""
    check_fields({field or "": text}, what)


def check_fields(
    fields: Mapping[str, object] | Iterable[tuple[str, object]],
    what: str,
    seen: dict[str, Found | None] | None = None,
) -> None:
    """X2, once per write: every stored field of a `what` (a fact, an entry...), by name
    ("" for its text). Raise SecretError for the first that holds a secret. `seen`: the
    findings of values already scanned (many writes in a row), kept up to date."""
    items = fields.items() if isinstance(fields, Mapping) else fields
    for field, value in items:
        if not isinstance(value, str) or not value:
            continue
        if seen is None:
            found = find(value)
        elif value in seen:
            found = seen[value]
        else:
            found = seen[value] = find(value)
        if found is None:
            continue
        where = f"the {what}" if not field else f"the {what}'s {field}"
        raise SecretError(
            f"refused: {where} holds what looks like {found.kind} (line {found.line}: "
            f"{found.excerpt}); memdir never stores secrets: store a reference instead (the "
            "name of the environment variable or secret-manager entry that holds it); "
            "nothing was written",
            kind=found.kind,
            field=field,
            line=found.line,
        )
