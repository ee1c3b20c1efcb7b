"""Heartbeat (B1, B2): which periodic checks are due, kept in memory/heartbeat-state.json
as `{"lastChecks": {"email": 1703275200, "calendar": null}}` (unix seconds or null).

A check is due when it was never done or its threshold (hours, `[heartbeat]` in
config.toml) has passed. A state file that cannot be read is an error naming it, and it is
left as it is: a mark never overwrites what it could not parse.
"""

from __future__ import annotations

import os
import re

from .errors import StorageError, ValidationError
from .names import full_match
from .numbers import MAX_UNIX
from .paths import Layout
from .records import Record
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .storage.documents import Documents

CHECK_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


class Check(Record):
    name: str
    last: float | None
    hours: float
    due: bool
    next_due: float | None  # when it falls due (None: due now, never done)

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def state_path(layout: Layout) -> str:
    return os.path.join(layout.memory_dir, "heartbeat-state.json")


def checks(layout: Layout, hours: dict[str, float], now: float) -> list[Check]:
    """Every known check (configured or in the state file), due ones first."""
    last = _read(layout)
    names = sorted((set(hours) - {"default"}) | set(last))
    found = [_check(name, last.get(name), hours, now) for name in names]
    return sorted(found, key=lambda c: (not c.due, c.next_due or 0, c.name))


def mark(
    layout: Layout,
    name: str,
    hours: dict[str, float],
    now: float,
    docs: Documents | None = None,
) -> Check:
    """Record that check `name` ran now: a read-modify-write of the state file (in team
    mode the stored row, W1)."""
    if not full_match(CHECK_RE, name):
        raise ValidationError(f"bad check name {name!r}: a lowercase word such as email")
    import json

    path = state_path(layout)

    def change(raw: str | None) -> str:
        data = _parse(raw, path) if raw is not None else {"lastChecks": {}}
        data.setdefault("lastChecks", {})[name] = int(now)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    if docs is None:
        from .storage.documents import Documents

        docs = Documents(layout.memory_dir)
    docs.change(path, "heartbeat", change)
    return _check(name, int(now), hours, now)


def _check(name: str, last: float | None, hours: dict[str, float], now: float) -> Check:
    limit = hours.get(name, hours.get("default", 4.0))
    if last is None:
        return Check(name, None, limit, True, None)
    next_due = last + limit * 3600
    return Check(name, last, limit, now >= next_due, next_due)


def _read(layout: Layout) -> dict[str, float | None]:
    path = state_path(layout)
    raw = files.read_text(path, root=layout.memory_dir)
    if raw is None:
        return {}
    last: dict[str, float | None] = _parse(raw, path)["lastChecks"]
    return last


def _parse(raw: str, path: str) -> dict[str, Any]:
    import json  # not at module level: json is off the plain CLI path

    fix = "fix or delete it (it was left as it is)"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else path
        raise StorageError(f"{where} is not valid JSON: {fix}") from None
    checks_ = data.get("lastChecks") if isinstance(data, dict) else None
    if not isinstance(checks_, dict) or not all(
        v is None or isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= MAX_UNIX
        for v in checks_.values()
    ):
        raise StorageError(
            f'{path} does not hold {{"lastChecks": {{check: unix time (0 to {MAX_UNIX}, '
            f"year 9999) or null}}}}: {fix}"
        )
    state: dict[str, Any] = data
    return state
