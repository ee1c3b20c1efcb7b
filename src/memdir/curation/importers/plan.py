"""What an importer means to bring in (N4): a Plan of items read from another agent's
memory, built by pure readers (no writes), applied by one shared step (importers/__init__).

Also the small pure helpers every reader shares: kebab-case names (P1, X1), one-line
descriptions (G1), timestamps in the archive's format, text files read without surprises.
"""

from __future__ import annotations

import os
import re
import unicodedata

from ...clock import ISO_FORMAT
from ...errors import ValidationError
from ...models import ImportItem
from ...names import NAME_MAX
from ...records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DESCRIPTION_CHARS = 200  # well inside entries.DESCRIPTION_MAX (300)
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


class EntryItem(Record):
    """A global entry (G1) to write: memory/global/<name>.md."""

    name: str
    description: str
    content: str
    source: str


class ProcedureItem(Record):
    """A procedure (P1) to write: memory/procedures/<name>.md."""

    name: str
    content: str
    source: str


class HotItem(Record):
    """The text of HOT.md (H1-H4)."""

    text: str
    source: str


class FileItem(Record):
    """A whole file memdir keeps as is: a daily log (`key` its date), an identity file
    (`key` its name, identity.IDENTITY_FILES) or the heartbeat state (`key` unused)."""

    kind: str  # daily | identity | heartbeat
    key: str
    content: str
    source: str


class FactRow(Record):
    """One fact for Memory.import_facts: `row` has storage.sqlite.FACT_FIELDS keys, `id`
    and the supersede links in the source's numbering. `note` says what was changed on
    the way in (a category mapped), for the report."""

    row: dict[str, Any]
    source: str
    note: str | None = None


Planned = EntryItem | ProcedureItem | HotItem | FileItem


class Plan:
    """Everything one source holds, in the order it is to be written, and what the
    reader already left out (with its one-line reason)."""

    def __init__(self) -> None:
        self.items: list[Planned] = []
        self.facts: list[FactRow] = []
        self.skipped: list[ImportItem] = []
        self._names: set[str] = set()

    def entry(self, base: str, description: str, content: str, source: str) -> None:
        name = self.unique_name(base)
        self.items.append(EntryItem(name, one_line(description), content, source))

    def procedure(self, base: str, content: str, source: str) -> None:
        self.items.append(ProcedureItem(self.unique_name(base, procedure=True), content, source))

    def skip(self, kind: str, source: str, reason: str, target: str = "") -> None:
        self.skipped.append(ImportItem(kind, target, source, reason))

    def unique_name(self, base: str, *, procedure: bool = False) -> str:
        """A kebab-case name no other item of this import has (entries and procedures
        live in different folders, so each kind has its own set)."""
        stem = slug(base)
        taken = self._names
        key = "procedure:" if procedure else "entry:"
        name, n = stem, 1
        while key + name in taken:
            n += 1
            suffix = f"-{n}"
            name = stem[: NAME_MAX - len(suffix)].rstrip("-") + suffix
        taken.add(key + name)
        return name


def slug(text: str, fallback: str = "imported") -> str:
    """A kebab-case name (names.NAME_RE, at most 64 characters) from a title or file
    name: accents folded, anything else between words becomes one hyphen."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    name = _NOT_NAME.sub("-", folded.lower()).strip("-")
    name = name[:NAME_MAX].rstrip("-")
    return name or fallback


def one_line(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """G1: a description is one line; a long one is shortened with an ellipsis (the full
    text stays in the content)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def title_of(text: str, fallback: str) -> str:
    """The first heading of a markdown text, else its first non-empty line, else fallback."""
    first = None
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match and match.group(1):
            return match.group(1)
        if first is None and line.strip() and line.strip() != "---":
            first = line.strip().lstrip("-*> ").strip()
    return first or fallback


def sections(text: str) -> list[tuple[str | None, str]]:
    """A markdown text split at its `## ` headings (never inside a code fence):
    (heading, body) pairs; the text before the first heading has heading None."""
    found: list[tuple[str | None, list[str]]] = [(None, [])]
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and line.startswith("## ") and not line.startswith("###"):
            found.append((line[3:].strip().rstrip("#").strip(), []))
            continue
        found[-1][1].append(line)
    return [(heading, "\n".join(lines).strip("\n")) for heading, lines in found]


def is_only_headings(text: str) -> bool:
    """Whether a text holds nothing but headings and blank lines (a title alone)."""
    return all(not line.strip() or _HEADING.match(line) for line in text.splitlines())


def read_source(path: str, what: str) -> str:
    """The text of a source file; unreadable, not UTF-8 or binary (NUL bytes) is a
    ValidationError naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise ValidationError(f"{path} is not a UTF-8 text file: expected {what}") from None
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    if "\0" in text:
        raise ValidationError(f"{path} holds NUL bytes, so it is not text: expected {what}")
    return text


def read_or_skip(plan: Plan, kind: str, path: str, shown: str, what: str) -> str | None:
    """read_source for one file among many: one unreadable file is skipped with its reason,
    and the rest of the import goes on."""
    try:
        return read_source(path, what)
    except ValidationError as exc:
        plan.skip(kind, shown, str(exc))
        return None


def iso_time(value: object) -> str | None:
    """A source's timestamp (ISO 8601 with or without zone, unix seconds or milliseconds)
    in the archive's format (UTC, to the second); None when it is missing or unreadable.
    A time without a zone is taken as UTC."""
    from datetime import UTC, datetime

    if value is None or isinstance(value, bool) or value == "":
        return None
    seconds: float | None = None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.astimezone(UTC).strftime(ISO_FORMAT)
    if seconds is None:
        return None
    if seconds > 1e11:  # milliseconds (JavaScript's Date.now())
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime(ISO_FORMAT)
    except (OverflowError, OSError, ValueError):
        return None


def listing(folder: str) -> list[str]:
    """A folder's names, sorted; an unreadable folder lists nothing."""
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []
