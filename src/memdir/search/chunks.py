"""Markdown files as search chunks (Q1, Q3): pure functions from a file's text to pieces
that each answer something, with their line range and date.

- task notes: one chunk per note (its timestamp is its date);
- daily logs: one per `## ` section (dated by the day and its `## HH:MM`);
- global entries and procedures: one per heading section; the frontmatter's name and
  description open the first chunk, its YAML is not indexed.
A section longer than MAX_CHARS is cut at paragraph or list-item boundaries.
"""

from __future__ import annotations

import re
import time

from ..clock import iso
from ..records import Record
from ..storage import frontmatter
from ..storage.hashing import text_hash
from ..tasks import NOTE_RE

MAX_CHARS = 1200
HARD_CHARS = 4 * MAX_CHARS  # a part without a boundary is cut at a line break, at most this
HEADING_RE = re.compile(r"^#{1,6}\s")
TIME_RE = re.compile(r"^## (\d\d):(\d\d)\s*$")


class Chunk(Record):
    start: int  # first line, from 1
    end: int  # last line
    date: str | None
    content: str
    hash: str


def chunk(kind: str, text: str, date: str | None, day: str | None = None) -> list[Chunk]:
    """`date`: the file's own date (ISO UTC) when nothing finer is known; `day`: for a daily
    log, its local date YYYY-MM-DD."""
    lines = text.split("\n")
    if kind == "task":
        return _notes(lines)
    offset, intro, body = _frontmatter(lines)
    pieces = _sections(body, offset)
    out: list[Chunk] = []
    for start, _end, piece in pieces:
        when = date
        if kind == "daily" and day is not None:
            when = next((t for t in map(lambda x: _daily_time(day, x), piece) if t), None) or date
        for s, part in _split(start, piece):
            while part and not part[-1].strip():
                part = part[:-1]
            content = "\n".join(part).strip()
            if content:
                out.append(Chunk(s, s + len(part) - 1, when, content, text_hash(content)))
    if intro:  # the frontmatter's name and description open the first chunk
        if out:
            first = out[0]
            content = f"{intro}\n{first.content}"
            out[0] = first._replace(content=content, hash=text_hash(content))
        else:
            out.append(Chunk(1, max(1, offset), date, intro, text_hash(intro)))
    return out


def _notes(lines: list[str]) -> list[Chunk]:
    out: list[Chunk] = []
    current: list[str] = []
    start, when = 0, None
    for number, line in enumerate(lines, 1):
        match = NOTE_RE.match(line)
        if (match or (line.strip() and not line.startswith("  "))) and current:
            out.extend(_note_parts(start, when, current))
            current = []
        if not current:
            if not line.strip():
                continue
            start, when = number, (match.group(1) if match else None)
        current.append(line)
    if current:
        out.extend(_note_parts(start, when, current))
    return out


def _note_parts(start: int, when: str | None, lines: list[str]) -> list[Chunk]:
    """One chunk per note; a note too long for one is cut into bounded parts."""
    if sum(len(x) + 1 for x in lines) <= MAX_CHARS:
        return [_make(start, start + len(lines) - 1, when, lines)]
    return [_make(s, s + len(part) - 1, when, part) for s, part in _split(start, lines)]


def _make(start: int, end: int, when: str | None, lines: list[str]) -> Chunk:
    while len(lines) > 1 and not lines[-1].strip():  # blank lines after a note are not it
        lines = lines[:-1]
    content = "\n".join(lines).strip()
    return Chunk(start, start + len(lines) - 1, when, content, text_hash(content))


def _frontmatter(lines: list[str]) -> tuple[int, str | None, list[str]]:
    """(lines before the body, 'name — description' from the frontmatter, body lines)."""
    text = "\n".join(lines)
    try:
        raw, _ = frontmatter.split(text)
    except Exception:  # an unclosed block: index the file as it is
        return 0, None, lines
    if raw is None:
        return 0, None, lines
    skip = raw.count("\n") + 3  # the two fences and the YAML between them
    intro = None
    try:
        meta, _ = frontmatter.parse(text, "")
        parts = [str(meta[k]) for k in ("name", "description") if meta.get(k)]
        intro = " — ".join(parts) or None
    except Exception:  # broken YAML: the body is still worth finding
        pass
    return skip, intro, lines[skip:]


def _sections(body: list[str], offset: int) -> list[tuple[int, int, list[str]]]:
    """Heading sections with something under the heading."""
    sections: list[tuple[int, int, list[str]]] = []
    current: list[str] = []
    start = offset + 1
    for number, line in enumerate(body, offset + 1):
        if HEADING_RE.match(line) and current:
            sections.append((start, number - 1, current))
            start, current = number, []
        elif not current and not line.strip():
            continue
        if not current:
            start = number
        current.append(line)
    if current:
        sections.append((start, start + len(current) - 1, current))
    return [s for s in sections if any(x.strip() for x in s[2] if not HEADING_RE.match(x))]


def _split(start: int, lines: list[str]) -> list[tuple[int, list[str]]]:
    """Cut a long section before blank lines or list items, each part at most MAX_CHARS
    where a boundary allows, and at most HARD_CHARS whatever the text (Q3: a chunk
    is bounded, so a 5 MB log is indexed as thousands of small ones): (first line, lines)
    of each part."""
    if sum(len(x) + 1 for x in lines) <= MAX_CHARS:
        return [(start, lines)]
    parts: list[tuple[int, list[str]]] = []
    current: list[str] = []
    begin, size = start, 0
    for number, line in enumerate(lines, start):
        if len(line) > HARD_CHARS:  # one huge line: pieces of it, each on that line
            if current:
                parts.append((begin, current))
                current, size = [], 0
            parts.extend(
                (number, [line[i : i + MAX_CHARS]]) for i in range(0, len(line), MAX_CHARS)
            )
            continue
        boundary = not line.strip() or line.startswith(("- ", "* ", "1. "))
        over = size + len(line) > (MAX_CHARS if boundary else HARD_CHARS)
        if current and over:
            parts.append((begin, current))
            current, size = [], 0
        if not current:
            begin = number
        current.append(line)
        size += len(line) + 1
    if current:
        parts.append((begin, current))
    return parts


def _daily_time(day: str, first_line: str) -> str | None:
    match = TIME_RE.match(first_line)
    if match is None:
        return None
    try:
        local = time.strptime(f"{day} {match.group(1)}:{match.group(2)}", "%Y-%m-%d %H:%M")
    except ValueError:
        return None
    return iso(time.mktime(local))
