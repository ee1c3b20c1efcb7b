"""Recall (R1-R4): the context an agent step starts with, built from data, under a budget.

    <HOT.md, verbatim>

    [Long-term Memory]
    <preamble: where entries live and how to read one>
    - name — description            (most recently updated first)
    (… N more entries)

    [Task Memory]
    Task <id>:
    - <time> [workflow/step] (agent) note
    Parent task <id>:
    ...

The two bracketed sections together fit `budget` characters. Each may use half; what one
does not need, the other may use. Past its share, the index keeps its newest lines and
says how many it left out, and task notes drop oldest first, wherever they are in the
lineage. Everything recalled is defanged (R4): no marker in it can act as a live block.
"""

from __future__ import annotations

from .errors import ValidationError
from .markers import defang
from .models import Entry, Note, Recalled
from .records import Record

TIERS = ("task", "global")
LONG_TERM = "[Long-term Memory]"
TASK_MEMORY = "[Task Memory]"


class Policy(Record):
    """R3/M5: a step's memory policy. `read=False` recalls nothing; `recall` names the
    tiers shown; `memorize=False` strips and drops every marker block."""

    memorize: bool = True
    recall: tuple[str, ...] = TIERS
    read: bool = True


def policy_from(value: object) -> Policy:
    """R3: a Policy from a step's config, e.g. {"memorize": "off", "recall": ["task"],
    "read": False}; None means the default (everything on)."""
    if value is None:
        return Policy()
    if isinstance(value, Policy):
        return value
    if not isinstance(value, dict):
        raise ValidationError("a step policy is a mapping of memorize, recall and read")
    unknown = set(value) - {"memorize", "recall", "read"}
    if unknown:
        raise ValidationError(
            f"unknown step policy keys {sorted(unknown)}: use memorize, recall and read"
        )
    memorize = value.get("memorize", True)
    if memorize in ("on", "off"):
        memorize = memorize == "on"
    read = value.get("read", True)
    tiers = value.get("recall", TIERS)
    if isinstance(tiers, str):
        tiers = [t.strip() for t in tiers.split(",") if t.strip()]
    if not isinstance(memorize, bool) or not isinstance(read, bool):
        raise ValidationError("step policy: memorize is on/off (or true/false), read is true/false")
    if not isinstance(tiers, list | tuple) or not set(tiers) <= set(TIERS):
        raise ValidationError(f"step policy: recall is a list of tiers out of {', '.join(TIERS)}")
    return Policy(memorize, tuple(tiers), read)


def build(
    hot: str,
    memory_dir: str,
    entries: list[Entry],
    lineage: list[tuple[str, list[Note]]],
    budget: int,
    policy: Policy,
) -> Recalled:
    if not policy.read:
        return Recalled("", 0, len(entries), 0, sum(len(n) for _, n in lineage))
    # Defang first, then measure: the budget holds for the text as it is shown (R2, R4).
    hot, memory_dir = defang(hot), defang(memory_dir)
    index = [
        e._replace(description=defang(e.description))
        for e in entries
        if e.error is None and "global" in policy.recall
    ]
    index.sort(key=lambda e: e.updated or "", reverse=True)
    notes = [
        (task, [_defanged(n) for n in task_notes])
        for task, task_notes in (lineage if "task" in policy.recall else [])
    ]
    wants_index = bool(index)
    index_need = _index_size(memory_dir, index) if wants_index else 0
    notes_need = _notes_size(notes)
    index_budget = _index_share(budget, index_need, notes_need)
    parts = [hot.rstrip("\n")] if hot.strip() else []
    shown_entries = shown_notes = 0
    index_text = ""
    if wants_index:
        index_text, shown_entries = _index_section(memory_dir, index, index_budget)
        parts.append(index_text)
    if notes:
        # whatever the index did not use is the notes' to use
        notes_budget = budget - len(index_text) - (2 if index_text else 0)
        text, shown_notes = _notes_section(notes, max(0, notes_budget))
        parts.append(text)
    total_notes = sum(len(n) for _, n in notes)
    text = "\n\n".join(p for p in parts if p) + "\n" if any(parts) else ""
    return Recalled(text, shown_entries, len(index), shown_notes, total_notes)


def _defanged(note: Note) -> Note:
    return note._replace(
        content=defang(note.content),
        workflow=note.workflow and defang(note.workflow),
        step=note.step and defang(note.step),
        agent=note.agent and defang(note.agent),
    )


def _index_share(budget: int, index_need: int, notes_need: int) -> int:
    """Half each; a section that needs less than its half lends the rest to the other.
    The two sections are joined by a blank line, which counts against the budget."""
    room = max(0, budget - (2 if index_need and notes_need else 0))
    if index_need <= room // 2:
        return index_need
    return max(room // 2, room - notes_need)


def _preamble(memory_dir: str) -> str:
    return (
        f"{LONG_TERM}\nDurable entries, one line each; the full text of one is in "
        f"{memory_dir}/global/<name>.md (or `memdir show <name>`)."
    )


def _index_size(memory_dir: str, index: list[Entry]) -> int:
    return len(_preamble(memory_dir)) + sum(len(_line(e)) + 1 for e in index)


def _line(entry: Entry) -> str:
    return f"- {entry.name} — {entry.description}"


def _index_section(memory_dir: str, index: list[Entry], budget: int) -> tuple[str, int]:
    """The preamble and as many index lines as fit, then `(… N more entries)`."""
    head = _preamble(memory_dir)
    if _index_size(memory_dir, index) <= budget:
        return "\n".join([head, *(_line(e) for e in index)]), len(index)
    used, shown = len(head), 0
    if used + 1 + len(_more(len(index))) > budget:
        return "", 0
    for entry in index:
        rest = len(index) - shown - 1
        tail = 1 + len(_more(rest)) if rest else 0
        cost = 1 + len(_line(entry))
        if used + cost + tail > budget:
            break
        used += cost
        shown += 1
    lines = [head, *(_line(e) for e in index[:shown])]
    if shown < len(index):
        lines.append(_more(len(index) - shown))
    return "\n".join(lines), shown


def _more(count: int) -> str:
    return f"(… {count} more entries)"


def _notes_size(lineage: list[tuple[str, list[Note]]]) -> int:
    size = len(TASK_MEMORY)
    for position, (task, notes) in enumerate(lineage):
        if notes:
            size += 1 + len(_task_header(position, task))
            size += sum(1 + len(_note_line(n)) for n in notes)
    return size if size > len(TASK_MEMORY) else 0


def _notes_section(lineage: list[tuple[str, list[Note]]], budget: int) -> tuple[str, int]:
    """Own notes first, then each ancestor's; past the budget the oldest notes go first
    (untimed, hand-written lines count as oldest). Sizes are kept as running sums, so the
    cost is one sort, not a render per dropped note."""
    per_task = [len(notes) for _, notes in lineage]
    headers = [1 + len(_task_header(p, task)) for p, (task, _) in enumerate(lineage)]
    total_notes = sum(per_task)
    size = len(TASK_MEMORY) + sum(h for h, n in zip(headers, per_task, strict=True) if n)
    size += sum(1 + len(_note_line(n)) for _, notes in lineage for n in notes)
    oldest_first = sorted(
        (note.time, position, index)
        for position, (_, notes) in enumerate(lineage)
        for index, note in enumerate(notes)
    )
    dropped: set[tuple[int, int]] = set()
    for _, position, index in oldest_first:
        left_out = 1 + len(_left_out(len(dropped))) if dropped else 0
        if size + left_out <= budget:
            break
        dropped.add((position, index))
        size -= 1 + len(_note_line(lineage[position][1][index]))
        per_task[position] -= 1
        if per_task[position] == 0:
            size -= headers[position]
    if len(dropped) == total_notes:
        return "", 0
    lines = [TASK_MEMORY]
    for position, (task, notes) in enumerate(lineage):
        kept = [n for index, n in enumerate(notes) if (position, index) not in dropped]
        if kept:
            lines.append(_task_header(position, task))
            lines.extend(_note_line(n) for n in kept)
    if dropped:
        lines.append(_left_out(len(dropped)))
    return "\n".join(lines), total_notes - len(dropped)


def _left_out(count: int) -> str:
    return f"(… {count} older notes left out)"


def _task_header(position: int, task: str) -> str:
    if position == 0:
        return f"Task {task}:"
    return ("Parent" if position == 1 else "Ancestor") + f" task {task}:"


def _note_line(note: Note) -> str:
    where = "/".join(p for p in (note.workflow, note.step) if p)
    tag = f"[{where}] " if where else ""
    who = f"({note.agent}) " if note.agent else ""
    stamp = f"{note.time} " if note.time else ""
    return f"- {stamp}{tag}{who}" + note.content.replace("\n", "\n  ")
