"""Importers from other agents' memory (N4): each format on a small sample written
as that tool writes it, imported into a fresh store; dry runs, --force, secrets (X2) and
garbled sources (Z). Real files and databases, no mocks."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from memdir import Memory
from memdir.curation.importers import FORMATS, run
from memdir.errors import ValidationError
from memdir.models import ImportReport

GITHUB_TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyzAB"  # split: no scanner trips


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def imported(report: ImportReport, kind: str | None = None) -> dict[str, str]:
    """target -> source of what was imported (of one kind), with its note if any."""
    return {
        i.target: i.source if i.note is None else f"{i.source} ({i.note})"
        for i in report.imported
        if kind is None or i.kind == kind
    }


def skipped(report: ImportReport) -> dict[str, str]:
    """source -> reason of what was skipped."""
    return {i.source: i.reason or "" for i in report.skipped}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the state dir and its bytes. memory.db-shm is left out: SQLite
    updates its read marks on any read of a WAL database, and a dry run reads; so is the
    team view's .view.json, for the same reason (W1: a read records the rows it saw)."""
    found = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            if not name.endswith("-shm") and name != ".view.json":
                path = os.path.join(folder, name)
                found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


# -- Claude Code ---------------------------------------------------------------------------


def claude_project(root: Path) -> Path:
    project = root / "proj"
    write(project / "CLAUDE.md", "# Project\n\n- Use pnpm, never npm\n- Run `make test` first\n")
    write(project / "CLAUDE.local.md", "# Mine\n\n- My sandbox URL is http://localhost:3000\n")
    return project


def claude_auto_memory(root: Path) -> Path:
    folder = root / ".claude" / "projects" / "-home-ada-proj" / "memory"
    write(
        folder / "MEMORY.md",
        "# Memory\n\n- [Debugging](debugging.md) — flaky CI and how to tell\n"
        "- [Build setup](build.md)\n",
    )
    write(
        folder / "debugging.md",
        "# Debugging notes\n\nThe integration suite flakes when Redis starts late;\n"
        "rerun with `make it-retry`.\n",
    )
    write(
        folder / "build.md",
        "---\nname: build-setup\ndescription: How the build is wired\ntype: project\n---\n\n"
        "`make dist` builds the wheel; CI caches ~/.cache/pip.\n",
    )
    write(folder / "scratch.txt", "not markdown\n")
    return folder


def test_claude_code_project_files_become_entries(memory: Memory, tmp_path: Path) -> None:
    # N4: CLAUDE.md files -> global entries (G1)
    report = run(memory, "claude-code", str(claude_project(tmp_path)))
    assert imported(report) == {"claude-md": "CLAUDE.md", "claude-local-md": "CLAUDE.local.md"}
    entry = memory.entry("claude-md")
    assert entry.description == "Project instructions from CLAUDE.md"
    assert "Use pnpm, never npm" in (entry.content or "")
    index = Path(memory.layout.index_file).read_text()
    assert "- claude-md — Project instructions from CLAUDE.md" in index
    assert report.skipped == []


def test_claude_code_auto_memory_topics_and_index(memory: Memory, tmp_path: Path) -> None:
    # N4: topic files -> entries named from the file; MEMORY.md of links only is skipped
    report = run(memory, "claude-code", str(claude_auto_memory(tmp_path)))
    assert imported(report) == {"debugging": "debugging.md", "build-setup": "build.md"}
    debugging = memory.entry("debugging")
    assert debugging.description == "Debugging notes"
    assert "Redis starts late" in (debugging.content or "")
    build = memory.entry("build-setup")
    assert build.description == "project: How the build is wired"
    assert (build.content or "").startswith("`make dist` builds the wheel")  # no frontmatter
    reasons = skipped(report)
    assert reasons["MEMORY.md"].startswith("index of the topic files")
    assert reasons["scratch.txt"] == "not a markdown topic file"


def test_claude_code_memory_md_with_content_is_kept(memory: Memory, tmp_path: Path) -> None:
    # N4: a project folder holding memory/ (PATH/memory/), MEMORY.md with its own text
    project = claude_project(tmp_path)
    write(project / "memory" / "MEMORY.md", "# Memory\n\nAda reviews PRs on Fridays.\n")
    write(project / "memory" / "ci.md", "# CI\n\nMain's CI takes 12 minutes.\n")
    report = run(memory, "claude-code", str(project))
    assert set(imported(report)) == {"claude-md", "claude-local-md", "ci", "claude-memory"}
    assert "Ada reviews PRs on Fridays." in (memory.entry("claude-memory").content or "")


def test_claude_code_same_text_twice_is_two_entries(memory: Memory, tmp_path: Path) -> None:
    # N4, X5: the name is the identity: .claude/CLAUDE.md repeating CLAUDE.md is
    # imported under its own name, with a note naming the entry it repeats
    project = claude_project(tmp_path)
    write(project / ".claude" / "CLAUDE.md", (project / "CLAUDE.md").read_text())
    report = run(memory, "claude-code", str(project))
    notes = {i.source: i for i in report.imported}
    twin = notes[".claude/CLAUDE.md"]
    assert twin.target != "claude-md" and "claude-md" in (twin.note or "")
    assert memory.entry(twin.target).content == memory.entry("claude-md").content


def test_claude_code_not_that_format(memory: Memory, tmp_path: Path) -> None:
    # N4, Z: a folder with nothing of Claude Code's is a one-line ValidationError
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValidationError, match="not Claude Code memory: expected a Claude Code"):
        run(memory, "claude-code", str(tmp_path / "empty"))


# -- OpenClaw ------------------------------------------------------------------------------


def openclaw_workspace(root: Path) -> Path:
    ws = root / "workspace"
    write(
        ws / "MEMORY.md",
        "# MEMORY.md - Long-Term Memory\n\nAda maintains memdir.\n\n"
        "## Preferences\n- Short answers, code first\n\n"
        "## Projects\n- memdir: v1 ships in June\n```md\n## not a heading in a fence\n```\n",
    )
    write(ws / "memory" / "2026-01-14.md", "# 2026-01-14\n\n## 09:12\nSet up the release CI.\n")
    write(ws / "memory" / "2026-01-15.md", "# 2026-01-15\n\n## 17:40\nShipped 0.9.\n")
    write(ws / "memory" / "2026-01-15-release-retro.md", "# Release retro\n\nTag earlier.\n")
    write(
        ws / "memory" / "heartbeat-state.json",
        json.dumps({"lastChecks": {"email": 1767225600, "weather": None}}),
    )
    write(ws / "SOUL.md", "# SOUL.md\n\nBe direct. Have opinions.\n")
    write(ws / "USER.md", "# USER.md\n\n- Name: Ada\n- Timezone: Europe/London\n")
    write(ws / "AGENTS.md", "# AGENTS.md\n\nRead SOUL.md first.\n")
    write(ws / "HEARTBEAT.md", "# HEARTBEAT.md\n\n- check email\n")
    write(ws / "BOOTSTRAP.md", "# BOOTSTRAP.md\n\nWho am I?\n")
    return ws


def test_openclaw_workspace(memory: Memory, tmp_path: Path, state_dir: Path) -> None:
    # N4: MEMORY.md split by `## `, daily logs (E1), identity files (E2), heartbeat (B1)
    report = run(memory, "openclaw", str(openclaw_workspace(tmp_path)))
    assert imported(report, "entry") == {
        "memory-md": "MEMORY.md",
        "preferences": "MEMORY.md ## Preferences",
        "projects": "MEMORY.md ## Projects",
        "2026-01-15-release-retro": "memory/2026-01-15-release-retro.md",
    }
    assert (
        memory.entry("memory-md").content
        == "# MEMORY.md - Long-Term Memory\n\nAda maintains memdir.\n"
    )
    assert memory.entry("preferences").content == "- Short answers, code first\n"
    assert "## not a heading in a fence" in (memory.entry("projects").content or "")
    assert memory.entry("2026-01-15-release-retro").description == "Release retro"
    assert set(imported(report, "daily")) == {"daily/2026-01-14.md", "daily/2026-01-15.md"}
    assert memory.daily("2026-01-14") == "# 2026-01-14\n\n## 09:12\nSet up the release CI.\n"
    assert set(imported(report, "identity")) == {"SOUL.md", "USER.md", "AGENTS.md"}
    assert (
        state_dir / "USER.md"
    ).read_text() == "# USER.md\n\n- Name: Ada\n- Timezone: Europe/London\n"
    booted = {part.name: part.text for part in memory.boot().parts}
    assert "Be direct" in booted["SOUL.md"]  # E3: the boot sequence reads what came in
    checks = {c.name: c for c in memory.heartbeat_status()}
    assert checks["email"].last == 1767225600
    assert checks["weather"].last is None
    reasons = skipped(report)
    assert "heartbeat checklist" in reasons["HEARTBEAT.md"]
    assert "first-run ritual" in reasons["BOOTSTRAP.md"]


def test_openclaw_never_overwrites_without_force(
    memory: Memory, tmp_path: Path, state_dir: Path
) -> None:
    # N4: an existing entry, daily log, identity file and heartbeat state stay as they
    # are without --force, and are replaced with it
    ws = openclaw_workspace(tmp_path)
    memory.write_entry("preferences", "Mine", "- Long answers\n")
    write(state_dir / "SOUL.md", "# my own soul\n")
    daily_file = Path(memory.path) / "daily" / "2026-01-14.md"
    write(daily_file, "# 2026-01-14\n\nmy own log\n")
    memory.heartbeat_mark("email")
    report = run(memory, "openclaw", str(ws))
    reasons = skipped(report)
    exists = "exists (use --force to overwrite)"
    assert reasons["MEMORY.md ## Preferences"] == exists
    assert reasons["SOUL.md"] == exists
    assert reasons["memory/2026-01-14.md"] == exists
    assert reasons["memory/heartbeat-state.json"] == exists
    assert memory.entry("preferences").content == "- Long answers\n"
    assert (state_dir / "SOUL.md").read_text() == "# my own soul\n"
    assert daily_file.read_text() == "# 2026-01-14\n\nmy own log\n"
    assert "projects" in imported(report)  # the rest came in

    forced = run(memory, "openclaw", str(ws), force=True)
    assert not [s for s in forced.skipped if s.reason == exists]
    assert memory.entry("preferences").content == "- Short answers, code first\n"
    assert (state_dir / "SOUL.md").read_text() == "# SOUL.md\n\nBe direct. Have opinions.\n"
    assert "Set up the release CI" in daily_file.read_text()


def test_openclaw_dry_run_writes_nothing(memory: Memory, tmp_path: Path, state_dir: Path) -> None:
    # N4: a dry run reports what would come in and writes nothing, not even memory.db
    ws = openclaw_workspace(tmp_path)
    before = snapshot(state_dir)
    report = run(memory, "openclaw", str(ws), dry_run=True)
    assert report.dry_run
    assert snapshot(state_dir) == before
    assert not os.path.exists(memory.layout.db)
    assert "preferences" in imported(report) and "SOUL.md" in imported(report)
    assert report.to_dict() == run(memory, "openclaw", str(ws), dry_run=True).to_dict()
    # and a real run brings in exactly what the dry run announced
    real = run(memory, "openclaw", str(ws))
    assert [i.target for i in real.imported] == [i.target for i in report.imported]


def test_openclaw_secret_is_skipped_and_never_reaches_disk(
    memory: Memory, tmp_path: Path, state_dir: Path
) -> None:
    # X2: one section holding a token is refused; the rest of MEMORY.md comes in
    ws = tmp_path / "ws"
    write(
        ws / "MEMORY.md",
        f"## Deploy\nThe deploy bot uses {GITHUB_TOKEN}\n\n## Style\n- Tabs, never spaces\n",
    )
    write(ws / "TOOLS.md", f"gh auth: {GITHUB_TOKEN}\n")
    report = run(memory, "openclaw", str(ws))
    reasons = skipped(report)
    assert "GitHub token" in reasons["MEMORY.md ## Deploy"]
    assert "GitHub token" in reasons["TOOLS.md"]
    assert imported(report) == {"style": "MEMORY.md ## Style"}
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert GITHUB_TOKEN.encode() not in path.read_bytes(), path


# -- MCP memory server -----------------------------------------------------------------------


def test_mcp_memory_entities_and_relations(memory: Memory, tmp_path: Path) -> None:
    # N4: each entity -> an entry with its observations and relations, both ways
    lines = [
        {
            "type": "entity",
            "name": "John_Smith",
            "entityType": "person",
            "observations": ["Speaks Spanish", "Graduated in 2019"],
        },
        {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
        {"type": "relation", "from": "Jane_Doe", "to": "John_Smith", "relationType": "mentors"},
        {"type": "relation", "from": "X", "to": "Y", "relationType": "knows"},
    ]
    text = "\n".join(json.dumps(line) for line in lines[:2]) + "\n{not json\n"
    text += "\n".join(json.dumps(line) for line in lines[2:]) + "\n"
    file = write(tmp_path / "memory.jsonl", text)
    report = run(memory, "mcp-memory", str(file))
    assert imported(report) == {"john-smith": "memory.jsonl:1", "anthropic": "memory.jsonl:2"}
    john = memory.entry("john-smith")
    assert john.description == "person: John_Smith"
    assert john.content == (
        "# John_Smith\n\n- Speaks Spanish\n- Graduated in 2019\n\n## Relations\n\n"
        "- John_Smith works_at Anthropic (entry `anthropic`)\n"
        "- Jane_Doe mentors John_Smith\n"
    )
    anthropic = memory.entry("anthropic")
    assert anthropic.description == "organization: Anthropic"
    assert "- John_Smith works_at Anthropic (entry `john-smith`)" in (anthropic.content or "")
    reasons = skipped(report)
    assert reasons["memory.jsonl:3"].startswith("malformed line: not JSON")
    assert "neither end is an entity" in reasons["memory.jsonl:6"]


def test_mcp_memory_garbled_file_is_a_clear_error(memory: Memory, tmp_path: Path) -> None:
    # Z: a file that is not the server's JSON lines at all
    file = write(tmp_path / "memory.jsonl", "name,type\nJohn,person\n")
    with pytest.raises(ValidationError, match=r"not an MCP memory file \(line 1: not JSON"):
        run(memory, "mcp-memory", str(file))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValidationError, match="holds no memory.jsonl"):
        run(memory, "mcp-memory", str(tmp_path / "empty"))


# -- mem0 ------------------------------------------------------------------------------------


def mem0_export(root: Path) -> Path:
    results = [
        {
            "id": "0b9f-1",
            "memory": "Prefers dark mode in every editor",
            "hash": "a1",
            "metadata": {"category": "user_preferences"},
            "categories": ["user_preferences"],
            "created_at": "2025-03-01T09:30:00-08:00",
            "updated_at": "2025-03-02T10:00:00-08:00",
            "user_id": "ada",
        },
        {
            "id": "0b9f-2",
            "memory": "Decided to ship v1 without plugins",
            "metadata": None,
            "categories": ["decisions"],
            "created_at": "2025-03-05T12:00:00Z",
            "updated_at": None,
            "agent_id": "planner",
        },
        {
            "id": "0b9f-3",
            "memory": "Team rule: squash merges only",
            "metadata": {"category": "guideline"},
            "created_at": "2025-03-06T12:00:00Z",
        },
        {"id": "0b9f-4", "memory": "Is allergic to peanuts", "categories": ["health"]},
        {"id": "0b9f-5", "memory": "prefers DARK mode in  every editor"},  # repeat of 1
        {"id": "0b9f-6", "memory": "Releases are cut on Tuesdays"},  # repeat of a stored fact
        {"id": "0b9f-7", "memory": f"Deploy token {GITHUB_TOKEN}"},
        {"id": "0b9f-8", "metadata": {}},
        "just a string",
    ]
    return write(root / "mem0.json", json.dumps({"results": results}))


def test_mem0_export_to_facts(memory: Memory, tmp_path: Path) -> None:
    # N4, F2, F5: categories mapped, times and authors kept, repeats and secrets left out
    stored = memory.add_fact("releases are cut on TUESDAYS", "convention")
    report = run(memory, "mem0", str(mem0_export(tmp_path)))
    ids = {source: int(target) for target, source in imported(report, "fact").items()}
    assert list(ids) == ["memory 0b9f-1", "memory 0b9f-2", "memory 0b9f-3", "memory 0b9f-4"]
    dark = memory.get_fact(ids["memory 0b9f-1"])
    assert (dark.category, dark.status, dark.surface, dark.agent) == (
        "preference",
        "active",
        "import",
        "mem0",
    )
    assert dark.created == "2025-03-01T17:30:00Z"  # in UTC
    assert dark.valid_from == "2025-03-01T17:30:00Z"
    assert dark.updated == "2025-03-02T18:00:00Z"
    ship = memory.get_fact(ids["memory 0b9f-2"])
    assert (ship.category, ship.agent, ship.updated) == ("decision", "planner", ship.created)
    assert memory.get_fact(ids["memory 0b9f-3"]).category == "convention"
    assert memory.get_fact(ids["memory 0b9f-4"]).category == "learning"
    reasons = skipped(report)
    assert reasons["memory 0b9f-5"] == "duplicate of memory 0b9f-1 earlier in the file"
    assert reasons["memory 0b9f-6"] == f"duplicate of fact {stored.id}"
    assert "GitHub token" in reasons["memory 0b9f-7"]
    assert reasons["memory 0b9f-8"].startswith("malformed record")
    assert reasons["item 9"].startswith("malformed record")
    assert [h.id for h in memory.search("peanuts", kinds="fact", mode="lexical")] == [
        ids["memory 0b9f-4"]
    ]
    # importing the same export again brings in nothing twice
    again = run(memory, "mem0", str(mem0_export(tmp_path)))
    assert again.imported == []
    assert skipped(again)["memory 0b9f-1"] == f"duplicate of fact {ids['memory 0b9f-1']}"


def test_mem0_dry_run_does_not_create_the_database(
    memory: Memory, tmp_path: Path, state_dir: Path
) -> None:
    # N4: nothing at all is written by a dry run, memory.db included
    before = snapshot(state_dir)
    report = run(memory, "mem0", str(mem0_export(tmp_path)), dry_run=True)
    assert {i.target for i in report.imported} == {"new fact"}
    assert len(report.imported) == 5  # 0b9f-6 is new here: the archive is empty
    assert not os.path.exists(memory.layout.db)
    assert snapshot(state_dir) == before


def test_mem0_garbled_export_is_a_clear_error(memory: Memory, tmp_path: Path) -> None:
    # Z: not JSON, or JSON without memories
    with pytest.raises(ValidationError, match="is not JSON .*: expected a mem0 export"):
        run(memory, "mem0", str(write(tmp_path / "a.json", "{oops")))
    with pytest.raises(ValidationError, match="holds no list of memories"):
        run(memory, "mem0", str(write(tmp_path / "b.json", '{"memory": "x"}')))


# -- AFK -------------------------------------------------------------------------------------


def afk_state(root: Path, *, nested: bool = False, hot: str | None = None) -> Path:
    state = root / "afk"
    base = state / "memory" if nested else state
    write(base / "HOT.md", hot if hot is not None else "# Hot\n- User: Ada, Europe/London\n")
    write(base / "procedures" / "deploy.md", "# Deploy\n1. make test\n2. push the tag\n")
    write(base / "procedures" / "Release Notes.md", "# Release notes\nWrite them from git log.\n")
    write(base / "procedures" / "notes.txt", "not a procedure\n")
    db = sqlite3.connect(base / "memory.db")
    db.executescript(
        """
        CREATE TABLE facts (
            id INTEGER PRIMARY KEY, category TEXT, fact TEXT NOT NULL,
            superseded_by INTEGER, created_at TEXT, updated_at TEXT, active INTEGER DEFAULT 1
        );
        CREATE TABLE sessions (id TEXT PRIMARY KEY, started TEXT);
        """
    )
    rows = [
        (
            1,
            "convention",
            "Deploys go out on Fridays",
            2,
            "2025-01-01T10:00:00Z",
            "2025-02-01T10:00:00Z",
            0,
        ),
        (
            2,
            "convention",
            "Deploys go out on Thursdays",
            5,
            "2025-02-01T10:00:00Z",
            "2025-03-01T10:00:00Z",
            0,
        ),
        (3, "preferences", "Ada prefers tabs", None, "2025-01-02T08:00:00Z", None, 1),
        (4, "gotcha", "The staging DB resets nightly", None, "2025-01-03T08:00:00Z", None, 1),
        (5, "convention", "Deploys go out on Tuesdays", None, "2025-03-01T10:00:00Z", None, 1),
        (6, "learning", f"CI uses {GITHUB_TOKEN}", None, "2025-01-04T08:00:00Z", None, 1),
        (7, "decision", "Dropped Python 3.10 support", None, 1735689600, None, 0),
    ]
    db.executemany("INSERT INTO facts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    return state


def test_afk_state_dir(memory: Memory, tmp_path: Path) -> None:
    # N4, F3: supersede chains rebuilt with their times, categories mapped, hot, procedures
    source = afk_state(tmp_path)
    db_before = (source / "memory.db").read_bytes()
    report = run(memory, "afk", str(source))
    assert (source / "memory.db").read_bytes() == db_before  # read-only
    assert memory.hot() == "# Hot\n- User: Ada, Europe/London\n"
    assert memory.procedure("deploy").content.startswith("# Deploy\n1. make test")
    assert "release-notes" in imported(report, "procedure")
    facts = {source: int(target) for target, source in imported(report, "fact").items()}
    # source "memory.db fact 4 (category 'gotcha' ...)" -> the AFK id 4 -> memdir's id
    new = {int(source.split(" (")[0].split()[-1]): fid for source, fid in facts.items()}
    chain = memory.fact_history(new[5])
    assert [f.content for f in chain] == [
        "Deploys go out on Fridays",
        "Deploys go out on Thursdays",
        "Deploys go out on Tuesdays",
    ]
    assert [f.status for f in chain] == ["superseded", "superseded", "active"]
    assert chain[0].created == "2025-01-01T10:00:00Z"
    assert chain[0].valid_to == "2025-02-01T10:00:00Z"
    assert chain[1].supersedes == chain[0].id and chain[1].superseded_by == chain[2].id
    assert memory.get_fact(new[3]).category == "preference"
    assert memory.get_fact(new[4]).category == "learning"
    removed = memory.get_fact(new[7])
    assert (removed.status, removed.created) == ("removed", "2025-01-01T00:00:00Z")
    sources = {v: k for k, v in facts.items()}
    assert "'gotcha' is not memdir's: imported as learning" in sources[new[4]]
    assert "'preferences' is not memdir's: imported as preference" in sources[new[3]]
    reasons = skipped(report)
    assert "GitHub token" in reasons["memory.db fact 6"]
    assert reasons["memory.db sessions"] == "only the facts table is imported"
    assert reasons[os.path.join("procedures", "notes.txt")] == "not a markdown file"
    hits = memory.search("Deploys", kinds="fact", mode="lexical")
    assert [h.id for h in hits] == [new[5]]  # superseded versions stay out of search


def test_afk_nested_layout_and_repeats(memory: Memory, tmp_path: Path) -> None:
    # N4: the memory/ subfolder layout; a chain whose current fact is already stored
    # is left out whole, with its earlier versions
    stored = memory.add_fact("deploys go out on tuesdays", "convention")
    report = run(memory, "afk", str(afk_state(tmp_path, nested=True)))
    reasons = skipped(report)
    for fid in (1, 2, 5):
        where = os.path.join("memory", "memory.db") + f" fact {fid}"
        assert reasons[where] == f"duplicate of fact {stored.id} (with its 2 earlier version(s))"
    assert memory.procedure("deploy")
    assert len(memory.fact_history(stored.id)) == 1


def test_afk_dry_run_with_existing_memory(memory: Memory, tmp_path: Path, state_dir: Path) -> None:
    # N4: a dry run over a store in use checks repeats and existence as a real run
    # would, and changes no file
    stored = memory.add_fact("Deploys go out on Tuesdays", "convention")
    memory.write_procedure("deploy", "# Deploy\nour own way\n")
    before = snapshot(state_dir)
    report = run(memory, "afk", str(afk_state(tmp_path)), dry_run=True)
    assert snapshot(state_dir) == before
    reasons = skipped(report)
    assert reasons["memory.db fact 5"].startswith(f"duplicate of fact {stored.id}")
    assert reasons[os.path.join("procedures", "deploy.md")] == "exists (use --force to overwrite)"
    assert "GitHub token" in reasons["memory.db fact 6"]
    assert set(imported(report)) == {"HOT.md", "release-notes", "new fact"}
    facts = [i.source for i in report.imported if i.kind == "fact"]  # notes apart
    assert facts == ["memory.db fact 3", "memory.db fact 4", "memory.db fact 7"]


def test_afk_hot_over_the_cap_is_cut_and_kept_whole(memory: Memory, tmp_path: Path) -> None:
    # N4, H3: never cut silently: HOT.md is cut to the cap, the whole text kept in an entry
    lines = [f"- line {n:04d}: something durable the agent wrote down" for n in range(160)]
    text = "\n".join(lines) + "\n"
    cap = memory.settings.hot_cap_chars
    assert len(text) > cap
    report = run(memory, "afk", str(afk_state(tmp_path, hot=text)))
    hot_item = next(i for i in report.imported if i.kind == "hot")
    assert "over the 5,250 cap: cut to fit" in (hot_item.note or "")
    assert "imported-hot-md" in (hot_item.note or "")
    assert len(memory.hot()) <= cap and "HOT TRUNCATED" in memory.hot()
    assert memory.hot().startswith(text[:600])
    assert memory.entry("imported-hot-md").content == text


def test_afk_existing_hot_needs_force(memory: Memory, tmp_path: Path) -> None:
    # N4: a non-empty HOT.md is never overwritten without --force
    memory.hot_set("# mine\n")
    source = afk_state(tmp_path)
    report = run(memory, "afk", str(source))
    assert skipped(report)["HOT.md"] == "exists (use --force to overwrite)"
    assert memory.hot() == "# mine\n"
    run(memory, "afk", str(source), force=True)
    assert memory.hot() == "# Hot\n- User: Ada, Europe/London\n"


def test_afk_garbled_database_is_a_clear_error(memory: Memory, tmp_path: Path) -> None:
    # Z: a memory.db that is not SQLite, or has no facts table
    write(tmp_path / "a" / "memory.db", "this is not a database\n")
    with pytest.raises(ValidationError, match="not a readable SQLite database"):
        run(memory, "afk", str(tmp_path / "a"))
    sqlite3.connect(tmp_path / "b.db").close()
    (tmp_path / "b").mkdir()
    db = sqlite3.connect(tmp_path / "b" / "memory.db")
    db.execute("CREATE TABLE notes (x)")
    db.close()
    with pytest.raises(ValidationError, match=r"has no facts table \(tables: notes\)"):
        run(memory, "afk", str(tmp_path / "b"))
    (tmp_path / "c").mkdir()
    with pytest.raises(ValidationError, match="not an AFK state folder"):
        run(memory, "afk", str(tmp_path / "c"))


# -- shared ----------------------------------------------------------------------------------


def test_unknown_format_and_missing_path(memory: Memory, tmp_path: Path) -> None:
    # N4: clear one-line errors
    assert FORMATS == ("claude-code", "openclaw", "mcp-memory", "mem0", "afk")
    with pytest.raises(ValidationError, match="unknown import format 'letta': one of claude-code"):
        run(memory, "letta", str(tmp_path))
    with pytest.raises(ValidationError, match="no such file or folder .*: expected a mem0 export"):
        run(memory, "mem0", str(tmp_path / "missing.json"))


def test_subagent_cannot_import(state_dir: Path, tmp_path: Path) -> None:
    # U2: a read-only session is refused once, before anything is written; a dry run is fine
    from memdir.errors import ReadOnlyError

    with Memory() as memory:
        parent = memory.start_session()
        child = memory.start_session(parent=parent.id)
    file = mem0_export(tmp_path)
    with Memory(session=child.id) as sub:
        assert run(sub, "mem0", str(file), dry_run=True).imported
        with pytest.raises(ReadOnlyError):
            run(sub, "mem0", str(file))


def test_report_to_dict(memory: Memory, tmp_path: Path) -> None:
    # N4: what the CLI renders
    report = run(memory, "claude-code", str(claude_project(tmp_path)), dry_run=True)
    data = report.to_dict()
    assert data["format"] == "claude-code" and data["dry_run"] is True
    assert data["imported"][0] == {"kind": "entry", "target": "claude-md", "source": "CLAUDE.md"}


def test_imported_facts_are_not_stale_on_arrival(memory: Memory, tmp_path: Path) -> None:
    """N2, N4: memories created long ago elsewhere count as stale from the day they
    were imported, not from their creation; a search still records them as found."""
    from memdir.curation import doctor

    report = run(memory, "mem0", str(mem0_export(tmp_path)))
    assert report.imported
    checks = [f.check for f in doctor.run(memory).findings]
    assert "facts.stale" not in checks
    rows = memory.store._require().execute("SELECT hits FROM fact_usage").fetchall()
    assert rows and all(hits == 0 for (hits,) in rows)


def test_one_unreadable_file_is_skipped_and_the_rest_imported(
    memory: Memory, tmp_path: Path
) -> None:  # N4, Z
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_bytes(b"\xff\xfe not utf-8")
    (workspace / "SOUL.md").write_bytes(b"binary\x00soul")
    (workspace / "USER.md").write_text("The user is Ada.\n", encoding="utf-8")
    (workspace / "memory" / "2026-02-30.md").write_text("## 09:00\nno such day\n", "utf-8")
    (workspace / "memory" / "2026-02-28.md").write_text("## 09:00\na real day\n", "utf-8")
    report = run(memory, "openclaw", str(workspace))
    assert sorted((i.kind, i.target) for i in report.imported) == [
        ("daily", "daily/2026-02-28.md"),
        ("identity", "USER.md"),
    ]
    reasons = {i.source: i.reason or "" for i in report.skipped}
    assert "not a UTF-8 text file" in reasons["MEMORY.md"]
    assert "NUL bytes" in reasons["SOUL.md"]
    assert "bad date '2026-02-30'" in reasons["memory/2026-02-30.md"]
    assert not (Path(memory.path) / "daily" / "2026-02-30.md").exists()
