"""V2: the timeline of what was written to memory, newest first, with who wrote it.

It is read from what the store keeps, not from a journal of its own: a fact carries its
session, surface and agent (F5) and the times it was added and changed; an entry its
creating and updating agent (G1); a task note its agent, workflow and step (T1); a
procedure, HOT.md and a day's log only the time their file last changed (their writers
are not recorded). So an event shows the provenance its tier keeps, and nothing made up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .clock import iso
from .models import Entry, Fact, Note, Procedure, Session
from .records import Record

TIERS = ("fact", "entry", "procedure", "hot", "task", "daily", "session")


class Event(Record):
    """One write in the timeline: when, which tier and item, what happened, by whom."""

    when: str  # ISO 8601 UTC, as every stored time
    tier: str  # one of TIERS
    action: str  # added, superseded, removed, written, note, changed, started, ended
    ref: str  # the item: a fact id, an entry or procedure name, a task id, a day
    summary: str  # the first line of what was written (or what it became)
    session_id: str | None = None
    surface: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def fact_events(recent: Iterable[Fact]) -> list[Event]:
    """A fact's adding (as a supersede when it replaced one) and, for a removed fact, its
    removal. A superseded fact's end is its successor's adding, shown once."""
    out = []
    for fact in recent:
        action = "added" if fact.supersedes is None else f"superseded #{fact.supersedes}"
        who = (fact.session_id, fact.surface, fact.agent)
        out.append(Event(fact.created, "fact", action, str(fact.id), _line(fact.content), *who))
        if fact.status == "removed":
            # the remover is not recorded (a removal keeps the fact's row as it was)
            out.append(Event(fact.updated, "fact", "removed", str(fact.id), _line(fact.content)))
    return out


def entry_events(entries: Iterable[Entry]) -> list[Event]:
    out = []
    for entry in entries:
        if entry.error is not None:
            continue
        when = entry.updated or entry.created or ""
        action = "added" if entry.created == entry.updated else "updated"
        agent = entry.updated_by if action == "updated" else entry.agent
        summary = entry.description or _line(entry.content or "")
        out.append(Event(when, "entry", action, entry.name, summary, agent=agent))
    return out


def procedure_events(procedures: Iterable[Procedure]) -> list[Event]:
    return [
        Event(p.updated, "procedure", "written", p.name, p.description or _line(p.content))
        for p in procedures
    ]


def note_events(notes: Iterable[Note]) -> list[Event]:
    return [Event(n.time, "task", "note", n.task, _line(n.content), agent=n.agent) for n in notes]


def file_event(tier: str, ref: str, path: str, summary: str) -> Event | None:
    """A file whose writes are not recorded one by one: its last change (mtime)."""
    try:
        when = iso(os.stat(path).st_mtime)
    except OSError:
        return None
    return Event(when, tier, "changed", ref, summary)


def session_events(sessions: Iterable[Session]) -> list[Event]:
    out = []
    for s in sessions:
        out.append(Event(s.started, "session", "started", s.id, s.surface, s.id, s.surface))
        if s.ended:
            counts = ", ".join(f"{n} {kind}" for kind, n in sorted(s.counts.items()))
            summary = counts or "no writes"
            out.append(Event(s.ended, "session", "ended", s.id, summary, s.id, s.surface))
    return out


def select(
    events: Iterable[Event],
    *,
    tier: str | None = None,
    session: str | None = None,
    agent: str | None = None,
    limit: int = 100,
) -> list[Event]:
    """The events that match every filter given, newest first, at most `limit`."""
    kept = [
        e
        for e in events
        if e.when
        and (tier is None or e.tier == tier)
        and (session is None or e.session_id == session)
        and (agent is None or e.agent == agent)
    ]
    kept.sort(key=lambda e: (e.when, e.tier, e.ref), reverse=True)
    return kept[:limit]


def _line(text: str, width: int = 160) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= width else first[: width - 1] + "…"
