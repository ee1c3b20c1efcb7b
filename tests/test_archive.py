"""`memdir export` / `memdir import` (N3): one archive restores a whole store
with nothing lost — every fact row, supersede chains and provenance, usage, tasks,
sessions, values, every file byte for byte with its mtime. Real files, real SQLite, the
real CLI; refusals (non-empty store, truncated or garbled archive, paths out of the root,
X1; secrets, X2) write nothing. Each state dir is a store of its own, memory.db or, in the
PostgreSQL lanes, a scope of its own of the test's database (W1, L4)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dbrows import TEAM, own_store
from dbrows import rows as db_rows
from memdir import ConflictError, Memory, ReadOnlyError, ValidationError
from memdir.curation import archive, archive_check, archive_format
from memdir.storage.documents import is_document
from memdir.storage.sqlite import FACT_FIELDS
from memdir.storage.sqlite.archive import fields
from memdir.testing import FixedClock

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
DAY = 86_400.0
TABLES = ("facts", "fact_usage", "tasks", "sessions", "session_writes", "kv")
NOT_UTF8 = b"\xff\xfe raw \x00 bytes \xc3\x28"
PROCEDURE_WITH_FRONTMATTER = (
    "---\ndescription: how a release is cut\ntags: [release]\n---\n# Release\n1. tag\n2. push\n"
)


@pytest.fixture(autouse=True)
def stores_apart(tmp_path: Path) -> None:
    """Exports from one state dir and imports into another: two stores, where one URL is
    one (W1): each state dir the tests name is a scope of its own there (L4)."""
    for name in ("a", "b", "c", "s", "restored"):
        own_store(tmp_path / name)


def build_store(state: Path) -> dict[str, Any]:
    """A store holding every kind of record, written through the public API."""
    clock = FixedClock(T0)
    with Memory(str(state), create=True, clock=clock) as mem:
        top = mem.start_session(surface="repl")
        sub = mem.start_session(surface="repl", parent=top.id)  # a subagent session (U2)
        with Memory(str(state), clock=clock, session=top.id, agent="coder") as agent:
            first = agent.add_fact("Deploys go through staging", "convention")  # F5
            clock.advance(60)
            second = agent.supersede_fact(first.id, "Deploys go through staging, then canary")
            clock.advance(60)
            third = agent.supersede_fact(second.id, "Deploys go staging, canary, then prod")
            agent.hot_set("Name: Ada Lovelace, timezone Europe/London")
            agent.hot_append("Prefers short answers")  # HOT.md.bak holds the first version
        gone = mem.add_fact("The office is in Leeds", "learning")
        clock.advance(60)
        mem.remove_fact(gone.id)
        mem.add_fact("Ada prefers tea to coffee", "preference")
        mem.write_procedure("deploy", "# Deploy\n1. make test\n2. push the tag\n")
        mem.write_procedure("release", PROCEDURE_WITH_FRONTMATTER)
        mem.write_entry("ci-duration", "CI takes ~12 min", "Main's CI runs 12 minutes.")
        mem.write_entry("release-day", "Releases on Tuesdays", "Cut from main on Tuesday.")
        mem.start_task("sprint-12")
        mem.start_task("fix-login", parent="sprint-12")
        mem.add_note("sprint-12", "Goal: login and billing")
        mem.add_note(
            "fix-login",
            "Root cause: the session cookie is not renewed",
            workflow="bugfix",
            step="analyze",
        )
        mem.end_task("fix-login", "done")
        mem.daily_append("Met Bob about the launch")
        clock.advance(DAY)
        mem.daily_append("Learned to check the calendar first", section="Evolution Log")
        mem.heartbeat_mark("email")
        mem.distill()
        mem.distill_done()  # the watermark (kv)
        mem.end_session(top.id)
    with Memory(str(state)) as mem:  # a search would record this; written directly
        db_rows(mem.store, "DELETE FROM fact_usage WHERE fact_id = ?", (third.id,))
        db_rows(
            mem.store, "INSERT INTO fact_usage VALUES (?, 3, ?)", (third.id, "2026-05-29T10:00:00Z")
        )
    (state / "SOUL.md").write_text("You are a careful release engineer.\n", encoding="utf-8")
    stray = state / "memory" / "attachments" / "blob.bin"
    stray.parent.mkdir()
    stray.write_bytes(NOT_UTF8)
    os.utime(stray, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    return {
        "top": top.id,
        "sub": sub.id,
        "chain": [first.id, second.id, third.id],
        "removed": gone.id,
    }


def rows(state: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Memory(str(state), create=True) as mem:
        return {t: db_rows(mem.store, f"SELECT * FROM {t} ORDER BY 1, 2") for t in TABLES}


def stored_files(state: Path) -> dict[str, tuple[bytes, int]]:
    """Every file the archive carries: path -> (bytes, mtime_ns). In the PostgreSQL lanes a
    document (HOT.md, an entry, a log...) is a row, which keeps its time to the second: its
    file has that second (and the row's revision in nanoseconds, W1)."""
    found: dict[str, tuple[bytes, int]] = {}
    for root in (state, state / "memory"):
        for path in root.rglob("*"):
            rel = path.relative_to(state).as_posix()
            skip = (
                rel.startswith("memory/memory.db")
                or "/.locks/" in f"/{rel}"
                or rel in ("memory/MEMORY.md", "memory/.view.json", "config.toml")
                or not path.is_file()
            )
            if not skip and (root != state or path.parent == state):
                row = TEAM and rel.startswith("memory/") and is_document(rel[len("memory/") :])
                mtime = path.stat().st_mtime_ns
                found[rel] = (path.read_bytes(), mtime // 10**9 if row else mtime)
    return found


def export_file(state: Path, out: Path) -> archive.Exported:
    with Memory(str(state), create=True) as mem:
        return archive.export_to(mem, str(out))


def import_file(state: Path, path: Path | str, **options: Any) -> Any:
    with Memory(str(state), create=True) as mem:
        return archive.import_archive(mem, str(path), **options)


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def nothing_written(state: Path) -> bool:
    """No file of the store, and no row: no memory.db; in the PostgreSQL lanes, none in
    the scope."""
    if TEAM:
        return not stored_files(state) and not any(rows(state).values())
    return not (state / "memory" / "memory.db").exists() and not stored_files(state)


# -- the round trip ------------------------------------------------------------------------


def test_round_trip_restores_every_record(tmp_path: Path) -> None:  # N3, F3, F5, T3, U1
    source, target, out = tmp_path / "a", tmp_path / "b", tmp_path / "backup.jsonl"
    made = build_store(source)
    before_rows, before_files = rows(source), stored_files(source)
    index_before = (source / "memory" / "MEMORY.md").read_text(encoding="utf-8")

    exported = export_file(source, out)
    assert exported.counts == {
        "file": 13,
        "fact": 5,
        "fact_usage": 1,
        "task": 2,
        "session": 2,
        "session_write": 1,
        "kv": 2,
    }
    assert exported.left_out == []
    report = import_file(target, out)

    assert report.skipped == [] and not report.dry_run and report.format == "memdir"
    assert rows(target) == before_rows  # every column of every fact, usage, task, session...
    assert stored_files(target) == before_files  # byte for byte, mtime to the nanosecond
    assert (target / "memory" / "MEMORY.md").read_text(encoding="utf-8") == index_before  # G3
    with Memory(str(target), create=True) as mem:
        chain = mem.fact_history(made["chain"][-1])  # F3: the whole chain, same ids
        assert [f.id for f in chain] == made["chain"]
        assert [f.status for f in chain] == ["superseded", "superseded", "active"]
        assert {(f.session_id, f.agent) for f in chain} == {(made["top"], "coder")}  # F5
        assert mem.get_fact(made["removed"]).status == "removed"
        sessions = {s.id: s for s in mem.sessions()}
        assert sessions[made["top"]].ended is not None
        assert sessions[made["top"]].counts == {"hot": 2, "facts": 3}
        assert mem.store.get_session(made["sub"]).parent_id == made["top"]  # type: ignore[union-attr]
        assert [t.id for t in mem.store.all_tasks() if t.parent_id == "sprint-12"] == ["fix-login"]
        assert [n.content for n in mem.notes("fix-login")] == [
            "Root cause: the session cookie is not renewed"
        ]
        assert mem.procedure("release").description == "how a release is cut"
        assert [e.name for e in mem.entries()] == ["ci-duration", "release-day"]
        assert not mem.distill().items  # the watermark came along: nothing to distill again
        assert [c.last for c in mem.heartbeat_status() if c.name == "email"] == [T0 + 180 + DAY]
        # the search index was rebuilt: facts, entries, procedures and logs are found
        kinds = {
            hit.kind
            for hit in mem.search("canary OR CI OR calendar OR tag", mode="lexical", limit=20)
        }
        assert {"fact", "global", "procedure", "daily"} <= kinds
        assert [h.id for h in mem.search("canary", kinds="fact", mode="lexical")] == [
            made["chain"][-1]
        ]


def test_archive_format(tmp_path: Path) -> None:  # N3: header, kinds, base64
    build_store(tmp_path / "a")
    out = tmp_path / "backup.jsonl"
    export_file(tmp_path / "a", out)
    header, *records = lines_of(out)
    assert header["memdir_export"] == 1 and header["schema"] >= 6
    assert "config.toml" in header["note"]
    assert [r["id"] for r in records if r["kind"] == "fact"] == [1, 2, 3, 4, 5]  # by id
    assert set(records[0]) == {"kind", *FACT_FIELDS}
    blob = next(r for r in records if r.get("path") == "attachments/blob.bin")
    assert "text" not in blob and blob["mtime_ns"] == 1_700_000_000_123_456_789
    soul = next(r for r in records if r.get("root") == "state")
    assert soul["path"] == "SOUL.md" and soul["text"].startswith("You are")
    paths = {r["path"] for r in records if r["kind"] == "file"}
    assert {
        "HOT.md",
        "HOT.md.bak",
        "heartbeat-state.json",
        "procedures/release.md",
        "global/ci-duration.md",
        "tasks/fix-login.md",
    } <= paths
    assert not paths & {"MEMORY.md", "memory.db", "config.toml"}
    assert not any(p.startswith(".locks") for p in paths)


def test_export_leaves_out_links_and_hidden_folders(tmp_path: Path) -> None:  # X1, L6
    state = tmp_path / "a"
    with Memory(str(state), create=True) as mem:
        mem.hot_set("Name: Ada")
    memory = state / "memory"
    (tmp_path / "outside.md").write_text("not memory\n", encoding="utf-8")
    (memory / "linked.md").symlink_to(tmp_path / "outside.md")
    (memory / ".git").mkdir()
    (memory / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (memory / ".tmp-HOT.md.123.abc").write_text("a killed writer's\n", encoding="utf-8")
    out = tmp_path / "backup.jsonl"
    exported = export_file(state, out)
    assert exported.left_out == [".git/ (hidden)", "linked.md (a symlink)"]
    assert [r["path"] for r in lines_of(out)[1:]] == ["HOT.md"]


def test_archive_fields_are_the_tables_columns() -> None:  # N3: nothing left behind
    assert set(archive_check.SPEC["fact"]) == set(FACT_FIELDS)
    for kind in archive_format.ROW_KINDS:
        assert set(archive_check.SPEC[kind]) == set(fields(kind))


def test_export_of_an_empty_store(tmp_path: Path) -> None:  # N3
    out = tmp_path / "empty.jsonl"
    exported = export_file(tmp_path / "a", out)
    assert set(exported.counts.values()) == {0}
    assert not (tmp_path / "a" / "memory" / "memory.db").exists()  # reading creates nothing
    assert len(lines_of(out)) == 1
    report = import_file(tmp_path / "b", out)
    assert report.imported == [] and report.skipped == []


# -- a store that is not empty ---------------------------------------------------------------


def test_import_refuses_a_store_that_holds_memory(tmp_path: Path) -> None:  # N3, Z
    build_store(tmp_path / "a")
    out = tmp_path / "backup.jsonl"
    export_file(tmp_path / "a", out)
    target = tmp_path / "b"
    with Memory(str(target), create=True) as mem:
        mem.add_fact("The target's own fact", "learning")
    before_rows, before_files = rows(target), stored_files(target)
    with pytest.raises(ConflictError, match="not empty .*--force"):
        import_file(target, out)
    with pytest.raises(ConflictError, match="not empty"):
        import_file(target, out, dry_run=True)
    assert rows(target) == before_rows and stored_files(target) == before_files


def test_force_merges_with_new_ids(tmp_path: Path) -> None:  # N3, F3
    made = build_store(tmp_path / "a")
    out = tmp_path / "backup.jsonl"
    export_file(tmp_path / "a", out)
    target = tmp_path / "b"
    with Memory(str(target), create=True) as mem:
        own = [mem.add_fact(f"The target's own fact number {i}", "learning").id for i in (1, 2)]
        mem.start_task("sprint-12")
        mem.hot_set("The target's hot memory")

    report = import_file(target, out, force=True)

    skipped = {(i.kind, i.target): i.reason for i in report.skipped}
    assert set(skipped) == {("task", "sprint-12"), ("hot", "HOT.md.bak")}
    assert "already" in (skipped[("task", "sprint-12")] or "")
    assert skipped[("hot", "HOT.md.bak")] == "the store keeps its own HOT.md.bak"
    [hot] = [i for i in report.imported if i.target == "HOT.md"]
    assert hot.note == "replaced the store's HOT.md (the previous one kept in HOT.md.bak)"
    with Memory(str(target), create=True) as mem:
        new_ids = {int(i.target) for i in report.imported if i.kind == "fact"}
        assert len(new_ids) == 5 and min(new_ids) > max(own)
        assert [f.content for f in mem.store.facts_by_id(own).values()] == [
            "The target's own fact number 1",
            "The target's own fact number 2",
        ]
        active = mem.search("canary", kinds="fact", mode="lexical")[0]
        chain = mem.fact_history(active.id)  # the links follow the new ids
        assert [f.content for f in chain] == [
            "Deploys go through staging",
            "Deploys go through staging, then canary",
            "Deploys go staging, canary, then prod",
        ]
        assert all(f.id in new_ids for f in chain) and chain[0].id != made["chain"][0]
        assert mem.store.get_task("sprint-12").parent_id is None  # type: ignore[union-attr]
        assert mem.store.get_task("fix-login").parent_id == "sprint-12"  # type: ignore[union-attr]
        assert mem.hot().startswith("Name: Ada")  # a file is overwritten
        backup_text = (Path(mem.path) / "HOT.md.bak").read_text(encoding="utf-8")
        assert backup_text == "The target's hot memory"  # H4: the replaced one is kept
    # the same archive again: every fact and file is recognised, nothing is doubled
    again = import_file(target, out, force=True)
    assert [(i.kind, i.target) for i in again.imported] == []
    assert len([i for i in again.skipped if i.kind == "fact"]) == 5
    with Memory(str(target), create=True) as mem:
        assert sum(mem.store.count_facts().values()) == 7


def test_dry_run_writes_nothing(tmp_path: Path) -> None:  # N3
    build_store(tmp_path / "a")
    out = tmp_path / "backup.jsonl"
    export_file(tmp_path / "a", out)
    target = tmp_path / "b"
    report = import_file(target, out, dry_run=True)
    assert report.dry_run and len(report.imported) == 5 + 2 + 2 + 2 + 13
    assert {i.kind for i in report.imported} >= {
        "fact",
        "task",
        "session",
        "kv",
        "hot",
        "entry",
        "procedure",
        "note",
        "daily",
        "heartbeat",
        "identity",
        "file",
    }
    assert nothing_written(target)


# -- bad archives: a clear error, nothing written ---------------------------------------------


@pytest.fixture
def backup(tmp_path: Path) -> Path:
    build_store(tmp_path / "a")
    out = tmp_path / "backup.jsonl"
    export_file(tmp_path / "a", out)
    return out


def test_truncated_archive_is_refused(tmp_path: Path, backup: Path) -> None:  # N3, Z
    data = backup.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 40])  # mid-line
    with pytest.raises(ValidationError, match=r"line \d+ of .*cut short.*truncated"):
        import_file(tmp_path / "b", cut)
    lines = data.splitlines(keepends=True)
    cut.write_bytes(b"".join(lines[:-2]))  # at a line break: the header's counts tell
    with pytest.raises(ValidationError, match="holds 11 file record.*header says 13"):
        import_file(tmp_path / "b", cut)
    assert nothing_written(tmp_path / "b")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: "this is not json", r"line 4 of .*: not JSON"),
        (lambda r: {**r, "kind": "mystery"}, r"line 4 .*unknown record kind 'mystery'"),
        (lambda r: {**r, "category": "gossip"}, r"line 4 .*category"),
        (lambda r: {**r, "id": "seven"}, r"line 4 .*not a number"),
        (lambda r: {**r, "extra": 1}, r"line 4 .*unknown field\(s\) extra"),
        (lambda r: {**r, "content": "key AKIAABCDEFGHIJKLMNOP"}, r"line 4 .*AWS access key"),
    ],
)
def test_garbled_line_is_refused(
    tmp_path: Path, backup: Path, change: Callable[..., Any], message: str
) -> None:  # N3, Z, F2, X2
    records = lines_of(backup)
    records[3] = change(records[3])  # a fact
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
        encoding="utf-8",
    )
    with pytest.raises(ValidationError, match=message):
        import_file(tmp_path / "b", bad)
    assert nothing_written(tmp_path / "b")


@pytest.mark.parametrize(
    ("root", "path", "message"),
    [
        ("memory", "../evil.md", "unsafe path"),
        ("memory", "daily/../../evil.md", "unsafe path"),
        ("memory", "/tmp/evil.md", "unsafe path"),
        ("state", "../evil.md", "unsafe path"),
        ("state", "config.toml", "only markdown"),
        ("memory", "memory.db", "memdir's own"),
        ("memory", ".locks/global.lock", "memdir's own"),
        ("memory", ".view.json", "memdir's own"),  # team mode's record of the view (W1)
        ("other", "evil.md", "bad root"),
    ],
)
def test_paths_outside_the_root_are_refused(
    tmp_path: Path, backup: Path, root: str, path: str, message: str
) -> None:  # X1
    records = lines_of(backup)
    records[-1] = {"kind": "file", "root": root, "path": path, "text": "pwned\n"}
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, records)
    config = tmp_path / "b" / "config.toml"  # in the PostgreSQL lanes, the store's scope
    before = config.read_text(encoding="utf-8") if config.exists() else None
    with pytest.raises(ValidationError, match=rf"line {len(records)} of .*{message}"):
        import_file(tmp_path / "b", bad)
    assert nothing_written(tmp_path / "b")
    assert not (tmp_path / "evil.md").exists()
    assert (config.read_text(encoding="utf-8") if config.exists() else None) == before


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path, backup: Path) -> None:  # X1
    target, outside = tmp_path / "b", tmp_path / "outside"
    outside.mkdir()
    (target / "memory").mkdir(parents=True)
    (target / "memory" / "daily").symlink_to(outside)
    with pytest.raises(ValidationError, match="outside the memory root"):
        import_file(target, backup)
    assert list(outside.iterdir()) == []


def test_a_file_holding_a_secret_is_left_out(tmp_path: Path, backup: Path) -> None:  # X2
    """A hand edit of the source put a secret in a file: that file is not written (nothing
    of the secret reaches disk), the rest of the archive is restored, the report says why."""
    records = lines_of(backup)
    hot = next(i for i, r in enumerate(records) if r.get("path") == "HOT.md")
    records[hot]["text"] += "token = ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
    binary = {
        "kind": "file",
        "root": "memory",
        "path": "global/notes.bin",
        "mtime_ns": 1,
        "base64": base64.b64encode(b"\xff\nkey ghp_" + b"A" * 36).decode(),
    }
    records.append(binary)
    records[0]["counts"]["file"] += 1
    write_lines(backup, records)
    report = import_file(tmp_path / "b", backup)
    reasons = {i.target: i.reason or "" for i in report.skipped}
    assert "GitHub token" in reasons["HOT.md"] and "GitHub token" in reasons["global/notes.bin"]
    assert not (tmp_path / "b" / "memory" / "HOT.md").exists()
    assert not (tmp_path / "b" / "memory" / "global" / "notes.bin").exists()
    assert any(i.kind == "fact" for i in report.imported)
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert b"ghp_abcdefghijklmnop" not in on_disk and b"ghp_AAAA" not in on_disk


def test_ids_out_of_range_are_refused(tmp_path: Path, backup: Path) -> None:  # Z
    records = lines_of(backup)
    fact = next(i for i, r in enumerate(records) if r.get("kind") == "fact")
    records[fact]["id"] = 99999999999999999999
    write_lines(backup, records)
    with pytest.raises(ValidationError, match=rf"line {fact + 1} .*out of range"):
        import_file(tmp_path / "b", backup)
    assert nothing_written(tmp_path / "b")


def test_not_an_archive(tmp_path: Path) -> None:  # Z
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="not a memdir export.*--from"):
        import_file(tmp_path / "b", notes)
    newer = tmp_path / "newer.jsonl"
    write_lines(newer, [{"memdir_export": 2, "counts": {}}])
    with pytest.raises(ValidationError, match="newer memdir.*upgrade"):
        import_file(tmp_path / "b", newer)
    with pytest.raises(ValidationError, match="cannot read"):
        import_file(tmp_path / "b", tmp_path / "missing.jsonl")


def test_a_subagent_session_cannot_import(tmp_path: Path, backup: Path) -> None:  # U2
    target = tmp_path / "b"
    with Memory(str(target), create=True) as mem:
        child = mem.start_session(parent=mem.start_session().id)
    with Memory(str(target), session=child.id) as sub, pytest.raises(ReadOnlyError):
        archive.import_archive(sub, str(backup))


# -- the command line --------------------------------------------------------------------------


def test_cli_round_trip_through_a_pipe(
    tmp_path: Path, state_dir: Path, run: Callable[..., Any]
) -> None:  # N3, C
    build_store(state_dir)
    exported = run("export")
    assert exported.code == 0, exported.err
    assert exported.err.startswith("exported 13 files, 5 facts, 1 fact usage row, 2 tasks")
    target = tmp_path / "restored"
    assert run("init", "--state-dir", str(target)).code == 0  # a named state dir must exist (L1)
    imported = run("import", "-", "--state-dir", str(target), input=exported.out)
    assert imported.code == 0, imported.err
    assert "imported 5 facts\n" in imported.out and "imported 2 global entries" in imported.out
    assert rows(target) == rows(state_dir) and stored_files(target) == stored_files(state_dir)

    again = run("import", "-", "--state-dir", str(target), input=exported.out)
    assert again.code == 1 and again.out == ""
    assert again.err.count("\n") == 1 and "not empty" in again.err
    merged = run(
        "import",
        "-",
        "--state-dir",
        str(target),
        "--force",
        "--dry-run",
        "--json",
        input=exported.out,
    )
    assert merged.code == 0, merged.err
    report = merged.json()
    assert report["dry_run"] and report["format"] == "memdir" and report["source"] == "stdin"
    assert {i["kind"] for i in report["skipped"]} >= {"fact", "task", "session", "kv", "hot"}
    assert report["imported"] == []  # every record and file is in the store already


def test_cli_export_to_a_file(
    tmp_path: Path, state_dir: Path, run: Callable[..., Any]
) -> None:  # N3, C
    build_store(state_dir)
    out = tmp_path / "backup.jsonl"
    done = run("export", "--out", str(out), "--json")
    assert done.code == 0, done.err
    assert done.json()["counts"]["fact"] == 5 and done.json()["path"] == str(out)
    assert lines_of(out)[0]["counts"]["fact"] == 5
    failed = run("export", "--out", str(tmp_path / "no-such-dir" / "x.jsonl"))
    assert failed.code == 1 and "no-such-dir: No such file" in failed.err
    assert "Traceback" not in failed.err
    assert not (tmp_path / "no-such-dir").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


def test_cli_import_errors_are_one_line(
    tmp_path: Path, backup: Path, run: Callable[..., Any]
) -> None:  # N3, C, Z
    data = backup.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[:-40])
    (tmp_path / "b").mkdir(exist_ok=True)  # a named state dir must exist (L1)
    for args in (
        ("import", str(cut)),
        ("import", str(tmp_path / "missing")),
        ("import", str(backup), "--from", "no-such-format"),
    ):
        result = run(*args, "--state-dir", str(tmp_path / "b"))
        assert result.code == 1, result.err
        assert result.err.startswith("memdir: error:") and result.err.count("\n") == 1
    assert nothing_written(tmp_path / "b")


def test_an_import_cut_off_after_the_facts_keeps_their_links(
    tmp_path: Path, backup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # N3: facts and their supersede links are one transaction
    target = tmp_path / "b"
    calls = {"n": 0}
    links_sql = "SELECT id, status, supersedes, superseded_by FROM facts ORDER BY id"
    with Memory(str(target), create=True) as mem:
        store_type = type(mem.store)  # SQLiteStore, or PostgresStore in the PostgreSQL lanes
        real = store_type.restore_rows

        def cut_off(self: Any, rows: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError("the disk went away")
            real(self, rows)

        monkeypatch.setattr(store_type, "restore_rows", cut_off)
        with pytest.raises(OSError):
            archive.import_archive(mem, str(backup), dry_run=False, force=False)
    with Memory(str(target), create=True) as mem:
        archive.import_archive(mem, str(backup), dry_run=False, force=True)  # finish it
        links = db_rows(mem.store, links_sql)
    with Memory(str(tmp_path / "a"), create=True) as source:
        expected = db_rows(source.store, links_sql)
    assert links == expected


def test_a_merge_does_not_store_a_fact_the_store_says_already(tmp_path: Path) -> None:
    """N1 on the import path: --force into a store that holds the same text (other
    case and spacing, X5) skips it as a duplicate; links to it lead to the store's."""
    with Memory(str(tmp_path / "b"), create=True) as other:
        old = other.add_fact("Deploys go through make ship", "convention")
        other.supersede_fact(old.id, "Deploys go through make release")
    out = tmp_path / "b.jsonl"
    export_file(tmp_path / "b", out)
    with Memory(str(tmp_path / "a"), create=True) as mem:
        mine = mem.add_fact("deploys go through  make RELEASE", "convention")
        report = archive.import_archive(mem, str(out), dry_run=False, force=True)
        assert [i.reason for i in report.skipped if i.kind == "fact"] == [
            f"duplicate of fact {mine.id}"
        ]
        assert mem.stats().facts_active == 1
        ((status, superseded_by),) = db_rows(
            mem.store,
            "SELECT status, superseded_by FROM facts WHERE content = ?",
            ("Deploys go through make ship",),
        )
    assert (status, superseded_by) == ("superseded", mine.id)  # the link leads to ours


def test_export_holds_the_hits_searches_left_in_the_journal(tmp_path: Path) -> None:  # N3 N2
    """A search notes its hits beside the database rather than in it; an export takes
    them in first, so the archive holds what doctor sees."""
    with Memory(str(tmp_path / "s"), env={}, create=True) as mem:
        kiwi = mem.add_fact("kiwi harvest is in March", "learning")
        mem.search("kiwi", mode="lexical")
        out = tmp_path / "backup.jsonl"
        archive.export_to(mem, str(out))
    usage = [
        json.loads(line)
        for line in out.read_text().splitlines()
        if json.loads(line).get("kind") == "fact_usage"
    ]
    assert [(u["fact_id"], u["hits"]) for u in usage] == [(kiwi.id, 1)]


def test_a_forked_history_travels_whole_with_its_links(tmp_path: Path) -> None:  # N3 F3
    """A fact superseded twice, and a version that ended in its sibling: both links come
    along, with the same ids into an empty store and with new ids in a merge."""
    source, out = tmp_path / "a", tmp_path / "backup.jsonl"
    with Memory(str(source), create=True) as mem:
        a = mem.add_fact("Reviews need one approval", "convention")
        mem.supersede_fact(a.id, "Reviews need two approvals")
        c = mem.supersede_fact(a.id, "Reviews need a code owner")
        d = mem.supersede_fact(a.id, "Reviews need a green CI run")
        mem.supersede_fact(d.id, "Reviews need two approvals")  # d ends in its sibling b
        before = [tuple(f) for f in mem.fact_history(a.id)]
    export_file(source, out)
    import_file(tmp_path / "b", out)
    with Memory(str(tmp_path / "b"), create=True) as mem:
        assert [tuple(f) for f in mem.fact_history(c.id)] == before
        assert mem.store.forked_facts() == [a.id]
    target = tmp_path / "c"
    with Memory(str(target), create=True) as mem:
        mem.add_fact("The target's own fact", "learning")
    import_file(target, out, force=True)
    with Memory(str(target), create=True) as mem:
        [hit] = mem.search("code owner", kinds="fact", mode="lexical")
        chain = mem.fact_history(hit.id)
        shape = [(f.content, f.status) for f in chain]
        assert shape == [(f[2], f[3]) for f in before]
        ids = {f.content: f.id for f in chain}
        late = next(f for f in chain if f.content == "Reviews need a green CI run")
        assert late.superseded_by == ids["Reviews need two approvals"]  # the settled link
        assert mem.store.forked_facts() == [ids["Reviews need one approval"]]
