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

from . import advice
from .errors import ValidationError
from .markers import defang, has_marker
from .models import Note, Recalled
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
    index: list[tuple[str, str, str | None]],
    lineage: list[tuple[str, list[Note]]],
    budget: int,
    policy: Policy,
) -> Recalled:
    """`index`: (name, description, updated) of the global entries; `lineage`: the task's
    notes, then its parent's... Every line is rendered (and defanged) once, then measured:
    the budget holds for the text as it is shown (R2, R4)."""
    total_notes = sum(len(notes) for _, notes in lineage)
    if not policy.read:
        return Recalled("", 0, len(index), 0, total_notes)
    hot, memory_dir = defang(hot), defang(memory_dir)
    rows = []
    if "global" in policy.recall:
        rows = sorted(index, key=lambda row: row[2] or "", reverse=True)  # newest first
    notes = []
    if "task" in policy.recall:
        notes = [(task, _rendered(tuple(task_notes))) for task, task_notes in lineage]
    else:
        total_notes = 0
    # Index lines are measured without being built: only the ones shown are rendered. A
    # marker cannot span a line break, so one test of all the descriptions clears them all.
    if has_marker("\n".join(description for _, description, _ in rows)):
        sizes = [_line_size(name, description) for name, description, _ in rows]
    else:
        sizes = [len(name) + len(description) + 5 for name, description, _ in rows]
    index_need = len(_preamble(memory_dir)) + sum(sizes) + len(sizes) if rows else 0
    index_budget = _index_share(budget, index_need, _notes_size(notes))
    parts = [hot.rstrip("\n")] if hot.strip() else []
    shown_entries = shown_notes = 0
    index_text = ""
    if rows:
        index_text, shown_entries = _index_section(memory_dir, rows, sizes, index_budget)
        parts.append(index_text)
    if total_notes:
        # whatever the index did not use is the notes' to use
        notes_budget = budget - len(index_text) - (2 if index_text else 0)
        text, shown_notes = _notes_section(notes, max(0, notes_budget))
        parts.append(text)
    text = "\n\n".join(p for p in parts if p) + "\n" if any(parts) else ""
    return Recalled(text, shown_entries, len(rows), shown_notes, total_notes)


def _inert(line: str) -> str:
    return defang(line)


def _rendered(notes: tuple[Note, ...]) -> list[tuple[str, str]]:
    """(time, line as shown) of each of a task's notes, defanged (R4: a line without a
    marker is as it was). The same notes render the same lines, so a process that lives
    on (the notes kept under a watch, tasks.notes) renders them once, not every recall."""
    lines = _RENDERED.get(notes)
    if lines is None:
        lines = [(n.time, _note_line(n)) for n in notes]
        if has_marker("\n".join(line for _, line in lines)):  # a marker spans no line break
            lines = [(t, _inert(line)) for t, line in lines]
        if len(_RENDERED) >= 16:
            _RENDERED.clear()
        _RENDERED[notes] = lines
    return list(lines)


_RENDERED: dict[tuple[Note, ...], list[tuple[str, str]]] = {}  # the last tasks' rendered notes


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
        f"{memory_dir}/global/<name>.md ({advice.entry_show('<name>')})."
    )


def _index_line(name: str, description: str) -> str:
    return _inert(f"- {name} — {description}")


def _line_size(name: str, description: str) -> int:
    if has_marker(description):
        return len(_index_line(name, description))
    return len(name) + len(description) + 5  # "- " and " — "


def _index_section(
    memory_dir: str, rows: list[tuple[str, str, str | None]], sizes: list[int], budget: int
) -> tuple[str, int]:
    """The preamble and as many index lines as fit, then `(… N more entries)`."""
    head = _preamble(memory_dir)
    used, shown, total = len(head), 0, len(rows)
    if used + sum(sizes) + total > budget:
        if used + 1 + len(_more(total)) > budget:
            return "", 0
        for size in sizes:
            rest = total - shown - 1
            tail = 1 + len(_more(rest)) if rest else 0
            if used + 1 + size + tail > budget:
                break
            used += 1 + size
            shown += 1
    else:
        shown = total
    lines = [head, *(_index_line(name, description) for name, description, _ in rows[:shown])]
    if shown < total:
        lines.append(_more(total - shown))
    return "\n".join(lines), shown


def _more(count: int) -> str:
    return f"(… {count} more entries)"


NoteLines = list[tuple[str, list[tuple[str, str]]]]  # (task, [(time, rendered line)])


def _notes_size(notes: NoteLines) -> int:
    size = 0
    for position, (task, lines) in enumerate(notes):
        if lines:
            size += 1 + len(_task_header(position, task)) + sum(1 + len(t) for _, t in lines)
    return size + len(TASK_MEMORY) if size else 0


def _notes_section(notes: NoteLines, budget: int) -> tuple[str, int]:
    """Own notes first, then each ancestor's; past the budget the oldest notes go first
    (untimed, hand-written lines count as oldest): the newest are taken while they fit,
    with the line saying how many were left out. The size only grows with each note
    taken, so the first that does not fit ends it."""
    headers = [1 + len(_task_header(p, task)) for p, (task, _) in enumerate(notes)]
    total = sum(len(lines) for _, lines in notes)
    if _notes_size(notes) <= budget:
        kept = None  # all of them
        taken = total
    else:
        newest_first = sorted(
            (
                (when, position, index)
                for position, (_, lines) in enumerate(notes)
                for index, (when, _) in enumerate(lines)
            ),
            reverse=True,
        )
        kept = set()
        used, taken = len(TASK_MEMORY), 0
        shown = [False] * len(notes)
        for _, position, index in newest_first[: total - 1]:  # all of them did not fit
            add = 1 + len(notes[position][1][index][1])
            if not shown[position]:
                add += headers[position]
            if used + add + 1 + len(_left_out(total - taken - 1)) > budget:
                break
            used += add
            taken += 1
            shown[position] = True
            kept.add((position, index))
    if not taken:
        return "", 0
    out = [TASK_MEMORY]
    for position, (task, lines) in enumerate(notes):
        texts = [t for i, (_, t) in enumerate(lines) if kept is None or (position, i) in kept]
        if texts:
            out.append(_task_header(position, task))
            out.extend(texts)
    if taken < total:
        out.append(_left_out(total - taken))
    return "\n".join(out), taken


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
