"""Reading an archive of `memdir export` before anything is written (N3): every line
parsed and checked — the header (format, schema, counts), each record's fields and types,
facts (F2, X3), task and session ids, file paths (X1: inside their root, none of memdir's
own files), file text (X2: no secrets) — then what no line shows alone: the counts against
the header (a truncated archive), duplicates, links to records the archive lacks.

File contents are checked and then left in the archive: a CheckedArchive keeps their
offsets, and archive.py reads each again as it writes it. (An importer's Plan, in
importers/plan.py, is another thing: what a foreign source holds, read into items.)
"""

from __future__ import annotations

import os

from ..errors import MemdirError, ValidationError
from ..models import TASK_STATES
from ..paths import safe_path, validate_task_id
from ..storage import files
from .archive_format import (
    DB_FILES,
    DERIVED,
    FORMAT,
    KINDS,
    ROOTS,
    ROW_KINDS,
    latest_schema,
    root_dir,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

    from ..memory import Memory

    Row = dict[str, Any]


# field -> (type, required) of each kind of record; a fact's are storage.sqlite.FACT_FIELDS
SPEC: dict[str, dict[str, tuple[type, bool]]] = {
    "fact": {
        "id": (int, True),
        "category": (str, True),
        "content": (str, True),
        "status": (str, False),
        "created": (str, False),
        "updated": (str, False),
        "supersedes": (int, False),
        "superseded_by": (int, False),
        "session_id": (str, False),
        "surface": (str, False),
        "agent": (str, False),
        "valid_from": (str, False),
        "valid_to": (str, False),
    },
    "fact_usage": {"fact_id": (int, True), "hits": (int, True), "last_hit": (str, True)},
    "task": {
        "id": (str, True),
        "parent_id": (str, False),
        "state": (str, True),
        "started": (str, True),
        "ended": (str, False),
    },
    "session": {
        "id": (str, True),
        "surface": (str, True),
        "parent_id": (str, False),
        "started": (str, True),
        "ended": (str, False),
    },
    "session_write": {"session_id": (str, True), "what": (str, True), "n": (int, True)},
    "kv": {"key": (str, True), "value": (str, True)},
    "file": {
        "root": (str, True),
        "path": (str, True),
        "mtime_ns": (int, False),
        "text": (str, False),
        "base64": (str, False),
    },
}


class CheckedArchive:
    """A validated archive: every record but the files' contents, which stay in the
    archive (their offsets are kept) until they are written."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: dict[str, list[tuple[int, Row]]] = {kind: [] for kind in ROW_KINDS}
        # (line, offset, root, rel, why it is not written: a secret in it, X2; or None)
        self.files: list[tuple[int, int, str, str, str | None]] = []
        self.header: dict[str, Any] = {}

    def error(self, line: int, message: str) -> ValidationError:
        return ValidationError(f"line {line} of {self.name}: {message}")


def read_checked(memory: Memory, source: IO[bytes], name: str) -> CheckedArchive:
    """Parse and check every line; raise on the first problem, naming its line."""
    plan = CheckedArchive(name)
    offset, number, seen_header = 0, 0, False
    while True:
        raw = source.readline()
        if not raw:
            break
        number, start, offset = number + 1, offset, offset + len(raw)
        if not raw.strip():
            continue
        if not seen_header:
            try:
                header = _parse(plan, raw, number)
            except ValidationError:
                raise ValidationError(
                    f"{name} is not a memdir export (its first line is not JSON): for "
                    "another tool's memory, give --from FORMAT"
                ) from None
            _check_header(plan, header, number)
            seen_header = True
            continue
        record = _parse(plan, raw, number)
        kind = record.pop("kind", None)
        if kind not in KINDS:
            known = ", ".join(KINDS)
            raise plan.error(number, f"unknown record kind {kind!r} (known: {known})")
        row = _check_fields(plan, number, kind, record)
        if kind == "file":
            refused = _check_file(memory, plan, number, row)
            plan.files.append((number, start, row["root"], row["path"], refused))
        else:
            plan.rows[kind].append((number, _check_row(memory, plan, number, kind, row)))
    if not seen_header:
        raise ValidationError(f"{name} is empty: it is not a memdir export")
    _check_whole(plan)
    return plan


def _parse(plan: CheckedArchive, raw: bytes, number: int) -> dict[str, Any]:
    import json

    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise plan.error(number, f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        if not raw.endswith(b"\n"):
            raise plan.error(
                number, f"cut short ({exc}): the archive is truncated; export it again"
            ) from None
        raise plan.error(number, f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise plan.error(number, "not a JSON object")
    return record


def _check_header(plan: CheckedArchive, header: dict[str, Any], number: int) -> None:
    version = header.get("memdir_export")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValidationError(
            f"{plan.name} is not a memdir export (its first line is no export header): "
            "for another tool's memory, give --from FORMAT"
        )
    if version > FORMAT:
        raise ValidationError(
            f"{plan.name} was written by a newer memdir (archive format {version}, this one "
            f"reads {FORMAT}): upgrade memdir to import it"
        )
    schema, latest = header.get("schema"), latest_schema()
    if isinstance(schema, int) and schema > latest:
        raise ValidationError(
            f"{plan.name} comes from a newer memdir (database schema {schema}, this one knows "
            f"{latest}): upgrade memdir to import it"
        )
    counts = header.get("counts")
    if not isinstance(counts, dict) or not all(
        k in KINDS and isinstance(v, int) for k, v in counts.items()
    ):
        raise plan.error(number, "the header's counts are missing or not {kind: number}")
    plan.header = header


def _check_fields(plan: CheckedArchive, number: int, kind: str, record: dict[str, Any]) -> Row:
    spec = SPEC[kind]
    unknown = sorted(set(record) - set(spec))
    if unknown:
        raise plan.error(number, f"a {kind} record has unknown field(s) {', '.join(unknown)}")
    for field, (wanted, required) in spec.items():
        value = record.get(field)
        if value is None:
            if required:
                raise plan.error(number, f"a {kind} record needs its {field}")
            continue
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise plan.error(
                number,
                f"the {kind}'s {field} {value!r} is not {'a number' if wanted is int else 'text'}",
            )
        if isinstance(value, int) and value < 0 and field != "mtime_ns":  # before 1970: fine
            raise plan.error(number, f"the {kind}'s {field} {value!r} is negative")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise plan.error(number, f"the {kind}'s {field} {value!r} is out of range")
    return {field: record.get(field) for field in spec}


def _check_row(memory: Memory, plan: CheckedArchive, number: int, kind: str, row: Row) -> Row:
    from .. import facts, secret_guard, sessions

    try:
        if kind == "fact":
            facts.check_id(row["id"])
            facts.check_category(row["category"])
            row["content"] = facts.check_content(row["content"], memory.settings.max_entry_bytes)
            row["status"] = facts.check_status(row["status"])
        elif kind == "task":
            validate_task_id(row["id"])
            if row["parent_id"] is not None:
                validate_task_id(row["parent_id"])
            if row["state"] not in TASK_STATES:
                raise ValidationError(f"bad task state {row['state']!r}: {', '.join(TASK_STATES)}")
        elif kind == "session":
            sessions.check_id(row["id"])
            sessions.check_surface(row["surface"])
            if row["parent_id"] is not None:
                sessions.check_id(row["parent_id"])
        # X2: every stored field of every row (text, provenance, ids, keys and values)
        secret_guard.check_fields([(k, v) for k, v in row.items() if k != "content"], kind)
        secret_guard.check(row.get("content"), kind)
    except MemdirError as exc:
        raise plan.error(number, str(exc)) from None
    return row


def _check_file(memory: Memory, plan: CheckedArchive, number: int, row: Row) -> str | None:
    """X1: the path stays inside its root and names no file memdir derives or owns (else
    the archive is refused); bytes that are not UTF-8 must decode from base64. X2: why the
    file is not written (it holds a secret: a hand edit of the source), or None."""
    import base64
    import binascii

    from .. import secret_guard

    root, rel = row["root"], row["path"]
    if root not in ROOTS:
        raise plan.error(number, f"bad root {root!r}: memory or state")
    parts = rel.split("/")
    if (
        rel.startswith("/")
        or "\\" in rel
        or any(ch < " " or ch == "\x7f" for ch in rel)  # a line break forges lines (X1)
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise plan.error(number, f"unsafe path {rel!r}: a relative path inside its root")
    if root == "state" and (len(parts) > 1 or not rel.endswith(".md")):
        raise plan.error(
            number, f"{rel!r}: the state dir takes only markdown files such as SOUL.md"
        )
    reserved = (
        parts[0].startswith(".")
        and len(parts) > 1
        or parts[-1].startswith(files.TEMP_PREFIX)
        or root == "memory"
        and rel in (*DB_FILES, DERIVED)
    )
    if reserved:
        raise plan.error(
            number, f"{rel!r} is memdir's own (database, index, view, locks): not imported"
        )
    try:
        target = safe_path(root_dir(memory.layout, root), rel)
    except ValidationError as exc:
        raise plan.error(number, str(exc)) from None
    if os.path.isdir(target):
        raise plan.error(number, f"{rel!r} is a folder in this store: move it away first")
    if (row["text"] is None) == (row["base64"] is None):
        raise plan.error(number, "a file record holds either `text` or `base64`")
    text = row["text"]
    if text is None:
        try:
            text = base64.b64decode(row["base64"], validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise plan.error(number, f"the base64 of {rel} does not decode") from None
    try:
        secret_guard.check_fields([("path", rel), ("", text)], f"file {rel}")
    except ValidationError as exc:
        return str(exc)  # X2: this file is left out; the rest of the archive is restored
    return None


def _check_whole(plan: CheckedArchive) -> None:
    """What no line shows alone: the header's counts (a truncated archive), duplicates,
    and links to records the archive does not hold."""
    counts: dict[str, int] = plan.header["counts"]
    found = {"file": len(plan.files), **{k: len(v) for k, v in plan.rows.items()}}
    for kind in KINDS:
        if found[kind] != counts.get(kind, 0):
            raise ValidationError(
                f"{plan.name} holds {found[kind]} {kind} record(s) where its header says "
                f"{counts.get(kind, 0)}: the archive is truncated or was edited; export it again"
            )
    keys = {
        "fact": ("id",),
        "fact_usage": ("fact_id",),
        "task": ("id",),
        "session": ("id",),
        "session_write": ("session_id", "what"),
        "kv": ("key",),
    }
    for kind, names in keys.items():
        seen: set[tuple[Any, ...]] = set()
        for number, row in plan.rows[kind]:
            key = tuple(row[n] for n in names)
            if key in seen:
                raise plan.error(number, f"a second {kind} {'/'.join(map(str, key))}")
            seen.add(key)
    paths = {(root, rel) for _, _, root, rel, _ in plan.files}
    if len(paths) < len(plan.files):
        number = _first_repeat([(n, (root, rel)) for n, _, root, rel, _ in plan.files])
        raise plan.error(number, "a second record of the same file")
    for number, _, root, rel, _ in plan.files:
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if (root, "/".join(parts[:depth])) in paths:
                raise plan.error(number, f"{rel!r} lies under a path the archive has as a file")
    fact_ids = {row["id"] for _, row in plan.rows["fact"]}
    for number, row in plan.rows["fact"]:
        for link in ("supersedes", "superseded_by"):
            if row[link] is not None and row[link] not in fact_ids:
                raise plan.error(
                    number, f"fact {row['id']} {link} fact {row[link]}, which the archive lacks"
                )
    for number, row in plan.rows["fact_usage"]:
        if row["fact_id"] not in fact_ids:
            raise plan.error(number, f"usage of fact {row['fact_id']}, which the archive lacks")
    session_ids = {row["id"] for _, row in plan.rows["session"]}
    for number, row in plan.rows["session_write"]:
        if row["session_id"] not in session_ids:
            raise plan.error(number, f"writes of session {row['session_id']}, which it lacks")


def _first_repeat(items: list[tuple[int, Any]]) -> int:
    seen = set()
    for number, key in items:
        if key in seen:
            return number
        seen.add(key)
    return 0
