"""Daily logs (E1): memory/daily/YYYY-MM-DD.md, one file per local day.

    # 2026-06-10

    ## 09:14
    Met Bob about the launch.

    ## Decisions
    - 11:30 Ship on Tuesday

    ## Evolution Log
    - 18:02 Learned to check the calendar before proposing times

A plain append goes under a `## HH:MM` heading (joining the last one if it has the same
minute); a named section gets `- HH:MM text` lines. `## Evolution Log` is append-only and
always the last section: every write puts it back at the bottom. Each append rewrites the
day's file atomically under the day's lock, so concurrent appends never lose each other.
"""

from __future__ import annotations

import os
import time

from .errors import NotFoundError, ValidationError
from .paths import Layout, is_date_name
from .quoting import DAILY_HEADING, quote_lines
from .records import Record
from .storage import files
from .storage.documents import Documents

EVOLUTION = "Evolution Log"
SECTION_MAX = 80


class DailyWrite(Record):
    date: str
    path: str
    section: str

    def to_dict(self) -> dict[str, str]:
        return dict(self._asdict())


def local_date(moment: float, days_back: int = 0) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(moment - days_back * 86400))


def resolve_date(value: str | None, now: float) -> str:
    """'today', 'yesterday', YYYY-MM-DD (checked), or None for today."""
    if value in (None, "", "today"):
        return local_date(now)
    if value == "yesterday":
        return _yesterday(now)
    assert value is not None
    try:
        time.strptime(value, "%Y-%m-%d")
    except ValueError:
        raise ValidationError(f"bad date {value!r}: use YYYY-MM-DD, today or yesterday") from None
    return value


def _yesterday(now: float) -> str:
    """The local calendar day before today (a day is not always 86,400 s: DST)."""
    today = time.localtime(now)
    noon = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, 12, 0, 0, 0, 0, -1))
    return local_date(noon - 86400)


def path_of(layout: Layout, date: str) -> str:
    if not is_date_name(date) or not _is_calendar_date(date):
        raise ValidationError(f"bad date {date!r}: use YYYY-MM-DD")
    return os.path.join(layout.memory_dir, "daily", f"{date}.md")


def append(
    layout: Layout,
    text: str,
    now: float,
    section: str | None = None,
    docs: Documents | None = None,
) -> DailyWrite:
    """Append an entry to today's log: a read-modify-write of the document (the file under
    its lock; in team mode the stored row, W1)."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("nothing to append: give the text of the log entry")
    section = _check_section(section)
    date = local_date(now)
    clock = time.strftime("%H:%M", time.localtime(now))
    path = path_of(layout, date)
    heading = clock if section is None else section

    def change(current: str | None) -> str:
        title, sections = _parse(current or "")
        if section is None:
            # a `## ` line of the entry would open a section of its own: quoted (E1)
            entry = quote_lines(text.strip("\n"), DAILY_HEADING)
            _add(sections, heading, entry.split("\n"), join_last=True)
        else:
            _add(sections, heading, _stamped(clock, text), join_last=False)
        return _render(title or [f"# {date}", ""], sections)

    (docs or Documents(layout.memory_dir)).change(path, f"daily-{date}", change)
    return DailyWrite(date, os.path.relpath(path, layout.memory_dir), heading)


def read(layout: Layout, date: str) -> str:
    text = files.read_inside(layout.memory_dir, path_of(layout, date), f"daily/{date}.md")
    if text is None:
        raise NotFoundError(f"no daily log for {date}", kind="daily", key=date)
    return text


def dates(layout: Layout) -> list[str]:
    names = files.listdir(os.path.join(layout.memory_dir, "daily"), root=layout.memory_dir)
    return sorted(n[:-3] for n in names if n.endswith(".md") and is_date_name(n[:-3]))


Section = tuple[str, list[str]]  # (heading text, body lines)


def _is_calendar_date(text: str) -> bool:
    from datetime import date  # a C module: ~1 ms, only where a date is named

    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _check_section(section: str | None) -> str | None:
    if section is None:
        return None
    name = " ".join(str(section).split()).lstrip("#").strip()
    if not name or len(name) > SECTION_MAX:
        raise ValidationError(f"bad section name {section!r}: one line of at most {SECTION_MAX}")
    return EVOLUTION if name.lower() == EVOLUTION.lower() else name


def _stamped(clock: str, text: str) -> list[str]:
    first, *rest = text.strip("\n").split("\n")
    return [f"- {clock} {first}", *(f"  {line}" for line in rest)]


def _parse(text: str) -> tuple[list[str], list[Section]]:
    title: list[str] = []
    sections: list[Section] = []
    for line in text.split("\n"):
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            title.append(line)
    while title and not title[-1].strip():
        title.pop()
    return (title + [""] if title else []), sections


def _add(sections: list[Section], heading: str, lines: list[str], join_last: bool) -> None:
    """Add `lines` under `heading`: the Evolution Log's own section, else the named one,
    else (join_last) the last section if it has this heading; otherwise a new section at
    the end (just above the Evolution Log, which _render puts last)."""
    if heading == EVOLUTION or not join_last:
        target = next((s for s in sections if s[0].lower() == heading.lower()), None)
    else:
        others = [s for s in sections if not _is_evolution(s[0])]
        target = others[-1] if others and others[-1][0] == heading else None
    if target is None:
        target = (heading, [])
        sections.append(target)
    body = target[1]
    while body and not body[-1].strip():
        body.pop()
    if body and join_last and heading != EVOLUTION:
        body.append("")  # entries under one timed heading are paragraphs
    body.extend(lines)


def _render(title: list[str], sections: list[Section]) -> str:
    """E1: the Evolution Log goes last, whatever a hand edit did to the order."""
    ordered = [s for s in sections if not _is_evolution(s[0])] + [
        s for s in sections if _is_evolution(s[0])
    ]
    parts = ["\n".join(title).rstrip("\n")] if title else []
    for heading, body in ordered:
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        parts.append("\n".join([f"## {heading}", *body]))
    return "\n\n".join(parts) + "\n"


def _is_evolution(heading: str) -> bool:
    """A hand-typed `## evolution log` is the Evolution Log too (appends find it that way)."""
    return heading.lower() == EVOLUTION.lower()
