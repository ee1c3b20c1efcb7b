"""An AFK-style state folder (N4) -> hot memory, facts with their history, procedures.

The folder (or its `memory/` subfolder: both layouts are accepted) holds `HOT.md`,
`memory.db` and `procedures/*.md`. In memory.db a `facts` table has an id, a category,
the text (`content`, `fact` or `text`), `superseded_by`, maybe `supersedes`, created /
updated times under one name or another, maybe a `status` or `active` column. The
database is opened read-only and its columns discovered; the supersede chains are
rebuilt from `superseded_by` (a fact with a successor is superseded, and the successor
supersedes it: F3). A category outside memdir's four is mapped (a plural or a name that
says preference, decision, convention...) else learning, and the report says so.
"""

from __future__ import annotations

import os
import sqlite3

from ...errors import ValidationError
from ...models import CATEGORIES
from .mem0 import category_of
from .plan import FactRow, HotItem, Plan, iso_time, listing, read_or_skip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXPECTED = "an AFK state folder (HOT.md, memory.db with a facts table, procedures/*.md)"
TEXT_COLUMNS = ("content", "fact", "text", "body", "value")
CATEGORY_COLUMNS = ("category", "kind", "type")
CREATED_COLUMNS = ("created", "created_at", "timestamp", "ts")
UPDATED_COLUMNS = ("updated", "updated_at", "modified", "modified_at")
GONE = ("removed", "deleted", "archived", "forgotten")


def read(path: str) -> Plan:
    if not os.path.isdir(path):
        raise ValidationError(f"{path} is not a folder: expected {EXPECTED}")
    folders = [path, os.path.join(path, "memory")]
    hot = _first(folders, "HOT.md", os.path.isfile)
    db = _first(folders, "memory.db", os.path.isfile)
    procedures = _first(folders, "procedures", os.path.isdir)
    if hot is None and db is None and procedures is None:
        raise ValidationError(f"{path} is not an AFK state folder: expected {EXPECTED}")
    plan = Plan()
    if hot is not None:
        text = read_or_skip(plan, "hot", hot, _shown(hot, path), "AFK's HOT.md")
        if text is None:
            pass
        elif text.strip():
            plan.items.append(HotItem(text, _shown(hot, path)))
        else:
            plan.skip("hot", _shown(hot, path), "empty file", "HOT.md")
    if procedures is not None:
        for name in listing(procedures):
            file = os.path.join(procedures, name)
            shown = _shown(file, path)
            if name.startswith("."):
                continue
            if not name.endswith(".md") or not os.path.isfile(file):
                plan.skip("procedure", shown, "not a markdown file")
                continue
            text = read_or_skip(plan, "procedure", file, shown, "an AFK procedure")
            if text is None:
                continue
            if text.strip():
                plan.procedure(name[:-3], text, shown)
            else:
                plan.skip("procedure", shown, "empty file")
    if db is not None:
        _facts(plan, db, _shown(db, path))
    return plan


def _first(folders: list[str], name: str, test: Any) -> str | None:
    for folder in folders:
        candidate = os.path.join(folder, name)
        if test(candidate):
            return candidate
    return None


def _shown(file: str, root: str) -> str:
    return os.path.relpath(file, root)


def _facts(plan: Plan, db_path: str, shown: str) -> None:
    """Read the facts table (read-only: the source is never changed) into FactRows."""
    from pathlib import Path  # only here: a file: URI that quotes any odd character

    uri = Path(os.path.abspath(db_path)).as_uri() + "?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ValidationError(f"cannot open {db_path}: {exc}") from None
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        if "facts" not in tables:
            raise ValidationError(
                f"{db_path} has no facts table (tables: {', '.join(tables) or 'none'}): "
                f"expected {EXPECTED}"
            )
        for table in tables:
            if table != "facts" and not table.startswith(("sqlite_", "facts_")):
                plan.skip("table", f"{shown} {table}", "only the facts table is imported")
        columns = [r[1] for r in db.execute("PRAGMA table_info(facts)")]
        rows = _select(db, columns, db_path)
    except sqlite3.Error as exc:
        raise ValidationError(
            f"{db_path} is not a readable SQLite database ({exc}): expected {EXPECTED}"
        ) from None
    finally:
        db.close()
    _plan_facts(plan, rows, shown)


def _select(db: sqlite3.Connection, columns: list[str], db_path: str) -> list[dict[str, Any]]:
    lower = {c.lower(): c for c in columns}
    text = next((lower[c] for c in TEXT_COLUMNS if c in lower), None)
    if text is None:
        raise ValidationError(
            f"{db_path}: the facts table has no text column ({', '.join(TEXT_COLUMNS)}): "
            f"expected {EXPECTED}"
        )
    wanted = {
        "id": lower.get("id", "rowid"),
        "content": text,
        "category": next((lower[c] for c in CATEGORY_COLUMNS if c in lower), None),
        "created": next((lower[c] for c in CREATED_COLUMNS if c in lower), None),
        "updated": next((lower[c] for c in UPDATED_COLUMNS if c in lower), None),
        "superseded_by": lower.get("superseded_by"),
        "supersedes": lower.get("supersedes"),
        "status": lower.get("status"),
        "active": lower.get("active") or lower.get("is_active"),
        "valid_to": lower.get("valid_to"),
        "session_id": lower.get("session_id"),
        "agent": lower.get("agent") or lower.get("source"),
    }
    picked = {k: v for k, v in wanted.items() if v is not None}
    select = ", ".join(f'"{v}"' if v != "rowid" else v for v in picked.values())
    query = f"SELECT {select} FROM facts ORDER BY {'rowid' if picked['id'] == 'rowid' else '1'}"
    return [dict(zip(picked, row, strict=True)) for row in db.execute(query)]


def _plan_facts(plan: Plan, rows: list[dict[str, Any]], shown: str) -> None:
    ids = {r["id"] for r in rows if isinstance(r["id"], int)}
    successors: dict[int, int] = {}  # fact -> the fact that supersedes it (F3)
    for r in rows:
        later, earlier = r.get("superseded_by"), r.get("supersedes")
        if isinstance(later, int) and later in ids and later != r["id"]:
            successors[r["id"]] = later
        if isinstance(earlier, int) and earlier in ids and earlier != r["id"]:
            successors.setdefault(earlier, r["id"])
    predecessor = {later: earlier for earlier, later in sorted(successors.items())}
    for r in rows:
        fact_id, where = r["id"], f"{shown} fact {r['id']}"
        text = r.get("content")
        if not isinstance(fact_id, int):
            plan.skip("fact", where, "malformed record: its id is not a whole number")
            continue
        if not isinstance(text, str) or not text.strip():
            plan.skip("fact", where, "malformed record: no text")
            continue
        category, note = _category(r.get("category"))
        status = _status(r, fact_id in successors or r.get("superseded_by") is not None)
        created = iso_time(r.get("created"))
        updated = iso_time(r.get("updated")) or created
        agent = r.get("agent")
        row = {
            "id": fact_id,
            "category": category,
            "content": text,
            "status": status,
            "created": created,
            "updated": updated,
            "supersedes": predecessor.get(fact_id),
            "superseded_by": successors.get(fact_id),
            "session_id": r.get("session_id") if isinstance(r.get("session_id"), str) else None,
            "surface": "import",
            "agent": agent if isinstance(agent, str) and agent else "afk",
            "valid_from": created,
            "valid_to": iso_time(r.get("valid_to")) or (None if status == "active" else updated),
        }
        plan.facts.append(FactRow(row, where, note))


def _category(value: object) -> tuple[str, str | None]:
    """(memdir's category, a note for the report when it is not the source's own)."""
    if isinstance(value, str) and value.strip().lower() in CATEGORIES:
        return value.strip().lower(), None
    if not isinstance(value, str) or not value.strip():
        return "learning", "no category: imported as learning"
    mapped = category_of({"category": value})
    return mapped, f"category {value!r} is not memdir's: imported as {mapped}"


def _status(row: dict[str, Any], superseded: bool) -> str:
    status = row.get("status")
    if superseded or (isinstance(status, str) and status.lower() == "superseded"):
        return "superseded"
    if isinstance(status, str) and status.lower() in GONE:
        return "removed"
    active = row.get("active")
    if active is not None and not active:
        return "removed"
    return "active"
