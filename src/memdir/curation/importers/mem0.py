"""A mem0 export (N4) -> facts (F2, F5).

mem0's `get_all` / export answers a JSON list of memories, or `{"results": [...]}` /
`{"memories": [...]}`; each memory has `memory` (its text), `id`, `created_at`,
`updated_at`, `metadata` (may hold `category`), `categories` (a list), `user_id` /
`agent_id`. Each becomes an active fact keeping its times (created_at is when it began to
hold), written by agent_id (else "mem0"), surface "import". Its category comes from mem0's
categories and metadata: anything naming a preference -> preference, a decision ->
decision, a convention, rule or guideline -> convention, else learning. A repeat of an
earlier memory of the file (the same text up to case, Unicode form and spacing, X5) is
skipped; a repeat of an active fact of the archive is skipped by the shared apply step.
"""

from __future__ import annotations

import json
import os

from ...errors import ValidationError
from ...similarity import normalize
from .plan import FactRow, Plan, iso_time, read_source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXPECTED = (
    'a mem0 export: a JSON list of memories, or {"results": [...]} or {"memories": [...]}, '
    'each with a "memory" text'
)
KEYWORDS = (
    ("prefer", "preference"),
    ("decision", "decision"),
    ("decided", "decision"),
    ("convention", "convention"),
    ("rule", "convention"),
    ("guideline", "convention"),
)


def read(path: str) -> Plan:
    if os.path.isdir(path):
        raise ValidationError(f"{path} is a folder: expected {EXPECTED}")
    try:
        data = json.loads(read_source(path, EXPECTED))
    except ValueError as exc:
        raise ValidationError(f"{path} is not JSON ({exc}): expected {EXPECTED}") from None
    if isinstance(data, dict):
        found = next((data[k] for k in ("results", "memories") if k in data), None)
        data = found
    if not isinstance(data, list):
        raise ValidationError(f"{path} holds no list of memories: expected {EXPECTED}")
    plan = Plan()
    seen: dict[str, str] = {}  # normalised text -> where it was first
    for index, record in enumerate(data, 1):
        where = _where(record, index)
        text = _text(record)
        if text is None:
            plan.skip("fact", where, 'malformed record: no "memory" text')
            continue
        assert isinstance(record, dict)
        key = normalize(text)
        if key in seen:
            plan.skip("fact", where, f"duplicate of {seen[key]} earlier in the file")
            continue
        seen[key] = where
        created = iso_time(record.get("created_at"))
        agent = record.get("agent_id")
        row: dict[str, Any] = {
            "id": index,
            "category": category_of(record),
            "content": text,
            "status": "active",
            "created": created,
            "updated": iso_time(record.get("updated_at")) or created,
            "supersedes": None,
            "superseded_by": None,
            "surface": "import",
            "agent": agent if isinstance(agent, str) and agent else "mem0",
            "valid_from": created,
            "valid_to": None,
        }
        plan.facts.append(FactRow(row, where))
    return plan


def category_of(record: dict[str, Any]) -> str:
    """mem0's categories and metadata -> one of memdir's four (F2); learning by default."""
    labels: list[str] = []
    for value in (record.get("categories"), record.get("category")):
        labels += _strings(value)
    metadata = record.get("metadata")
    if isinstance(metadata, dict):
        for key in ("category", "categories", "type", "kind"):
            labels += _strings(metadata.get(key))
    text = " ".join(labels).lower()
    for word, category in KEYWORDS:
        if word in text:
            return category
    return "learning"


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _text(record: object) -> str | None:
    if not isinstance(record, dict):
        return None
    for key in ("memory", "text", "content"):
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _where(record: object, index: int) -> str:
    ident = record.get("id") if isinstance(record, dict) else None
    return f"memory {ident}" if isinstance(ident, str | int) and ident != "" else f"item {index}"
