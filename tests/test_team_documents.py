"""W1: in team mode the markdown tiers are rows of the scope, and each machine's memory root
holds a rendered view of them. Two "machines" are two state dirs with their own memory roots
and the same database URL and scope; a real server (tests/pg_server.py), real processes.
On SQLite nothing changes: the files are the truth (test_hot.py and the rest run there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dbrows import look
from memdir import Memory
from memdir.storage.documents import VIEW_STATE

pytestmark = pytest.mark.usefixtures("pg_server")


def machine(tmp_path: Path, name: str, url: str, cap: int | None = None) -> dict[str, str]:
    """The environment of one machine: its own state dir and memory root, the shared URL."""
    state = tmp_path / name
    state.mkdir(exist_ok=True)
    if cap is not None:
        (state / "config.toml").write_text(f"[memory]\nhot_cap_chars = {cap}\n", "utf-8")
    env = {**os.environ, "MEMDIR_STATE_DIR": str(state), "MEMDIR_DATABASE_URL": url}
    env.pop("MEMDIR_MEMORY_DIR", None)
    return env


def stored(url: str, path: str = "HOT.md", scope: str = "default") -> tuple[str | None, int]:
    with look(url, scope) as db:  # the scope's rows, as its stores see them (L4)
        row = db.execute(
            f'SELECT body, revision FROM "memdir_{scope}".documents WHERE path = %s', (path,)
        ).fetchone()
    assert row is not None, f"{path} is not a row"
    return row[0], row[1]


def test_w1_hot_md_is_a_row_every_machine_renders(tmp_path: Path, pg_url: str) -> None:  # W1 H2
    """A write on one machine is a row; the other machine's next read renders it into its
    own memory root; a write there builds on it (nothing of either is lost)."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- from machine a")
        hot_a = Path(one.layout.hot)
    assert stored(pg_url)[0] == "- from machine a\n"
    with Memory(env=b) as two:
        assert two.layout.memory_dir != str(hot_a.parent)
        assert not os.path.exists(two.layout.hot)  # nothing rendered before a read
        assert two.hot() == "- from machine a\n"
        assert Path(two.layout.hot).read_text("utf-8") == "- from machine a\n"  # the view
        two.hot_append("- from machine b")
    with Memory(env=a) as one:
        assert one.hot() == "- from machine a\n- from machine b\n"
        assert hot_a.read_text("utf-8") == "- from machine a\n- from machine b\n"
        assert (
            json.loads((hot_a.parent / VIEW_STATE).read_text("utf-8"))["files"]["HOT.md"][0]
            == stored(pg_url)[1]
        )


def test_w1_hot_cap_is_checked_on_what_is_stored_not_on_a_stale_view(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H3
    """Machine b's view is behind (it last read HOT.md before machine a filled it): its
    append is applied to the stored text, so the cap holds for what is stored and what a
    cut removes is kept (in b's HOT.overflow.md)."""
    a, b = machine(tmp_path, "a", pg_url, cap=1000), machine(tmp_path, "b", pg_url, cap=1000)
    with Memory(env=b) as two:
        two.hot_append("- b was here first")
    with Memory(env=a) as one:
        for i in range(9):
            one.hot_append(f"- line {i} of machine a " + "x" * 80)
    body_a, _ = stored(pg_url)
    assert body_a is not None and 900 < len(body_a) <= 1000
    with Memory(env=b) as two:
        assert Path(two.layout.hot).read_text("utf-8") == "- b was here first\n"  # stale
        result = two.hot_append("- b adds a long line " + "y" * 200)
        body, _ = stored(pg_url)
        assert body is not None and len(body) <= 1000 and result.chars == len(body)
        assert result.cut_chars > 0 and body.startswith("- b was here first\n- line 0 of machine a")
        assert Path(two.layout.hot).read_text("utf-8") == body
        assert "y" * 200 in Path(two.layout.memory_dir, "HOT.overflow.md").read_text("utf-8")
        assert Path(two.layout.hot + ".bak").read_text("utf-8") == body_a  # what it replaced


def test_w1_hot_set_checks_the_revision_against_the_stored_row(
    tmp_path: Path, pg_url: str
) -> None:  # W1 V4
    """`hot set --expected` made from a version another machine has replaced since is a
    conflict: nothing is written."""
    from memdir import revisions
    from memdir.errors import ConflictError

    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_set("# Team\n- first\n")
        seen = revisions.of(one.hot())
    with Memory(env=b) as two:
        two.hot_append("- b's line")
    with Memory(env=a) as one, pytest.raises(ConflictError):
        one.hot_set("# Team\n- a's rewrite\n", expected=seen)
    assert stored(pg_url)[0] == "# Team\n- first\n- b's line\n"


def test_w1_a_hand_edit_of_the_view_goes_back_as_a_write(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H1
    """Editing the rendered HOT.md by hand is a write: the next memdir call on that machine
    stores it (against the revision it was rendered from), and the other machine sees it."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- rendered")
        Path(one.layout.hot).write_text("- rendered\n- added by hand on a\n", "utf-8")
        one.hot_append("- appended after the edit")
    assert stored(pg_url)[0] == "- rendered\n- added by hand on a\n- appended after the edit\n"
    with Memory(env=b) as two:
        assert two.hot().splitlines()[1] == "- added by hand on a"


def test_w1_an_edit_on_two_machines_at_once_keeps_both_and_doctor_reports_it(
    tmp_path: Path, pg_url: str, run: Any
) -> None:  # W1 H1
    """Machine a edits its rendered HOT.md by hand while machine b writes to the row: the
    row's version wins the file, a's edit is kept whole (in the database and beside the
    file), doctor names the conflict and how to settle it; deleting the kept file after
    merging settles it."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- shared start")
        root = Path(one.layout.memory_dir)
    (root / "HOT.md").write_text("- shared start\n- a's hand edit\n", "utf-8")
    with Memory(env=b) as two:
        two.hot_append("- b's write")
    res = run("doctor", "--json", env=a)  # a look: it renders and pushes nothing
    assert not [f for f in res.json()["findings"] if f["check"] == "docs.conflict"]
    with Memory(env=a) as one:
        assert one.hot() == "- shared start\n- b's write\n"  # the row's version
    kept = list(root.glob("HOT.md.conflict-*"))
    assert [p.read_text("utf-8") for p in kept] == ["- shared start\n- a's hand edit\n"]
    res = run("doctor", "--json", env=b)  # any machine of the scope sees it
    conflicts = [f for f in res.json()["findings"] if f["check"] == "docs.conflict"]
    assert len(conflicts) == 1 and conflicts[0]["where"] == ["HOT.md"]
    assert kept[0].name in conflicts[0]["message"] and "delete" in conflicts[0]["action"]
    assert not [f for f in res.json()["findings"] if f["check"] == "layout.stray"]
    # settled: merged by hand into the file, the kept one deleted
    (root / "HOT.md").write_text("- shared start\n- b's write\n- a's hand edit\n", "utf-8")
    kept[0].unlink()
    with Memory(env=a) as one:
        one.hot()
    assert stored(pg_url)[0] == "- shared start\n- b's write\n- a's hand edit\n"
    res = run("doctor", "--json", env=a)
    assert not [f for f in res.json()["findings"] if f["check"] == "docs.conflict"]


APPENDER = """
import json, os, sys, time
from memdir import Memory

me, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Memory() as mem:
    mem.hot()  # connected and rendered: then both start at once
    print(json.dumps({"ready": me}), flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    for i in range(n):
        done = mem.hot_append(f"- {me} line {i}")
        print(json.dumps({"i": i, "chars": done.chars, "cap": done.cap}), flush=True)
"""


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_w1_two_machines_appending_to_hot_md_at_once_lose_nothing_and_keep_the_cap(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H3 L3
    """Two processes, each its own memory root (two machines), append to HOT.md at once:
    every acknowledged line is stored exactly once, in each writer's order; then, with a
    cap the lines overflow, the stored text never exceeds it."""
    (tmp_path / "appender.py").write_text(textwrap.dedent(APPENDER), encoding="utf-8")

    def race(cap: int, n: int) -> list[list[dict[str, Any]]]:
        envs = [machine(tmp_path, f"{name}{cap}", pg_url, cap=cap) for name in ("a", "b")]
        go = tmp_path / f"go{cap}"
        procs = [
            subprocess.Popen(
                [sys.executable, str(tmp_path / "appender.py"), f"m{k}", str(n), str(go)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            )
            for k, env in enumerate(envs)
        ]  # fmt: skip
        try:
            for proc in procs:
                assert proc.stdout is not None
                assert "ready" in json.loads(proc.stdout.readline() or "{}"), proc.stderr
            go.touch()
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=240)
                assert proc.returncode == 0, err
                results.append([json.loads(line) for line in out.splitlines()])
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate()
        return results

    n = 30
    race(100_000, n)
    body, _ = stored(pg_url)
    assert body is not None
    lines = body.splitlines()
    for me in ("m0", "m1"):
        mine = [line for line in lines if line.startswith(f"- {me} ")]
        assert mine == [f"- {me} line {i}" for i in range(n)]  # all, once, in order
    assert len(lines) == 2 * n

    results = race(1000, n)  # ~40 more lines of ~15 chars: over the cap
    body, _ = stored(pg_url)
    assert body is not None and len(body) <= 1000 and "HOT TRUNCATED" in body
    assert all(line["chars"] <= line["cap"] == 1000 for lines in results for line in lines)


def test_w1_sqlite_keeps_hot_md_a_file(tmp_path: Path) -> None:  # W1 H2
    """Without a URL the file is the truth, as before: no view state, no rows."""
    env = machine(tmp_path, "local", "")
    env.pop("MEMDIR_DATABASE_URL")
    with Memory(env=env) as mem:
        assert not mem.docs.shared
        mem.hot_append("- local")
        Path(mem.layout.hot).write_text("- edited by hand\n", "utf-8")
        assert mem.hot() == "- edited by hand\n"
        assert not os.path.exists(os.path.join(mem.layout.memory_dir, VIEW_STATE))


# -- the other tiers: daily logs, procedures, task notes, heartbeat state (W1) ---------------


def test_w1_daily_logs_procedures_notes_and_heartbeat_are_rows_too(
    tmp_path: Path, pg_url: str
) -> None:  # W1 E1 P1 T1 B1
    """What one machine writes to a log, a procedure, a task's notes or the heartbeat
    state, the other reads (its view rendered from the rows); a write there builds on it."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        day = one.daily_append("a deployed the API").date
        one.write_procedure("deploy", "# Deploy\n1. build\n2. ship\n")
        one.start_task("build")
        one.add_note("build", "a: the cache is cold")
        one.heartbeat_mark("email")
    with Memory(env=b) as two:
        assert "a deployed the API" in two.daily(day)
        assert two.procedure("deploy").content.startswith("# Deploy")
        assert [n.content for n in two.notes("build")] == ["a: the cache is cold"]
        assert [c.name for c in two.heartbeat_status() if c.last is not None] == ["email"]
        two.daily_append("b rolled it back")
        two.add_note("build", "b: warmed it")
        two.heartbeat_mark("calendar")
    with Memory(env=a) as one:
        log = one.daily(day)
        assert "a deployed the API" in log and "b rolled it back" in log
        assert [n.content for n in one.notes("build")] == ["a: the cache is cold", "b: warmed it"]
        marked = {c.name for c in one.heartbeat_status() if c.last is not None}
        assert marked == {"email", "calendar"}
    body, _ = stored(pg_url, f"daily/{day}.md")
    assert body is not None and "b rolled it back" in body
    assert stored(pg_url, "tasks/build.md")[0] is not None


def test_w1_a_procedure_written_from_a_stale_revision_is_refused(
    tmp_path: Path, pg_url: str
) -> None:  # W1 P1 V4
    """The revision check of a procedure write is made on the stored row."""
    from memdir import revisions
    from memdir.errors import ConflictError

    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.write_procedure("deploy", "# Deploy\n1. build\n")
        seen = revisions.of(Path(one.layout.procedure("deploy")).read_text("utf-8"))
    with Memory(env=b) as two:
        two.write_procedure("deploy", "# Deploy\n1. build\n2. test\n")
    with Memory(env=a) as one:
        with pytest.raises(ConflictError):
            one.write_procedure("deploy", "# Deploy\n1. ship it\n", expected=seen)
        assert one.procedure("deploy").content == "# Deploy\n1. build\n2. test\n"


def test_w1_files_made_or_removed_by_hand_in_a_view_go_to_the_rows(
    tmp_path: Path, pg_url: str
) -> None:  # W1 P1 T4
    """A procedure made by hand in one machine's root, and a task note file deleted by hand
    there, reach the other machine through the rows."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.start_task("old")
        one.add_note("old", "a note to drop")
        root = Path(one.layout.memory_dir)
    with Memory(env=b) as two:
        assert [n.content for n in two.notes("old")] == ["a note to drop"]
        other = Path(two.layout.memory_dir)
    (root / "procedures").mkdir(exist_ok=True)
    (root / "procedures" / "by-hand.md").write_text("# Made by hand\n", "utf-8")
    (root / "tasks" / "old.md").unlink()
    with Memory(env=a) as one:
        one.procedures()  # a read: the view's changes go back first
    assert stored(pg_url, "procedures/by-hand.md")[0] == "# Made by hand\n"
    assert stored(pg_url, "tasks/old.md")[0] is None  # deleted: a row with no body
    with Memory(env=b) as two:
        assert [p.name for p in two.procedures()] == ["by-hand"]
        assert two.notes("old") == []
    assert not (other / "tasks" / "old.md").exists()


def test_w1_migrate_carries_the_markdown_tiers_both_ways(
    tmp_path: Path, pg_url: str, run: Any
) -> None:  # W1 (migrate)
    """Into a scope, a local memory root's tiers become its rows (the root their view);
    out of one, the rows are rendered into the new local root, whose files are the truth."""
    local = machine(tmp_path, "local", "")
    local["MEMDIR_DATABASE_URL"] = ""
    with Memory(env=local) as mem:
        mem.hot_append("- carried")
        day = mem.daily_append("a local log").date
        mem.write_procedure("deploy", "# Deploy\n")
        mem.write_entry("api-style", "how the API is written", "REST")
        mem.add_fact("Deploys go out on Tuesdays", "convention")
    res = run("migrate", "--to", pg_url, "--json", env=local)
    assert res.code == 0, res.err
    assert res.json()["counts"]["document"] == 4
    assert stored(pg_url)[0] == "- carried\n"
    assert stored(pg_url, "procedures/deploy.md")[0] == "# Deploy\n"
    assert "a local log" in (stored(pg_url, f"daily/{day}.md")[0] or "")
    with Memory(env=machine(tmp_path, "b", pg_url)) as two:
        two.hot_append("- written in the team")
    back = machine(tmp_path, "back", pg_url)
    res = run("migrate", "--to", "local", "--json", env=back)
    assert res.code == 0, res.err
    assert res.json()["counts"]["document"] == 4
    back_state = Path(back["MEMDIR_STATE_DIR"])
    assert "- api-style — how the API is written" in next(back_state.rglob("MEMORY.md")).read_text(
        "utf-8"
    )
    back["MEMDIR_DATABASE_URL"] = ""
    with Memory(env=back) as mem:
        assert type(mem.store).__name__ == "SQLiteStore"
        assert mem.hot() == "- carried\n- written in the team\n"
        assert "a local log" in mem.daily(day)
        assert [p.name for p in mem.procedures()] == ["deploy"]
        assert not os.path.exists(os.path.join(mem.layout.memory_dir, VIEW_STATE))
    res = run("migrate", "--to", pg_url, env=local)  # the scope holds memory: refused
    assert res.code != 0 and "holds memory already" in res.err


def test_w1_a_read_never_creates_the_scope_and_a_look_renders_nothing(
    tmp_path: Path, pg_url: str, run: Any
) -> None:  # W1
    """Reading hot memory before anything is stored makes no scope; doctor on a view with
    a hand edit pushes nothing and writes nothing."""
    env = machine(tmp_path, "a", pg_url)
    with Memory(env=env) as mem:
        assert mem.hot() == ""
        assert not mem.store.exists()
        mem.hot_append("- first")
        root = Path(mem.layout.memory_dir)
    (root / "HOT.md").write_text("- first\n- by hand\n", "utf-8")
    before = (root / VIEW_STATE).read_bytes()
    res = run("doctor", "--json", env=env)
    assert res.code == 0, res.err
    assert (root / VIEW_STATE).read_bytes() == before
    assert stored(pg_url)[0] == "- first\n"


def test_w1_a_file_that_is_not_text_is_left_alone_in_a_view(
    tmp_path: Path, pg_url: str
) -> None:  # W1 Z
    """A view's file that is not UTF-8 (or holds a NUL) is neither stored nor overwritten by
    a render: a write to it is refused in one line, as on SQLite."""
    from memdir.errors import StorageError

    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- first")
        hot = Path(one.layout.hot)
    junk = b"- first\n\xff\xfe\x00binary\n"
    hot.write_bytes(junk)
    with Memory(env=b) as two:
        two.hot_append("- b")
    with Memory(env=a) as one:
        one.hot()
        with pytest.raises(StorageError, match="HOT.md is not UTF-8"):
            one.hot_append("- more")
    assert hot.read_bytes() == junk and stored(pg_url)[0] == "- first\n- b\n"
    hot.write_text("- first\n- b\n- a NUL \0 here\n", "utf-8")
    with Memory(env=a) as one, pytest.raises(StorageError, match="NUL"):
        one.hot_append("- more")
    assert stored(pg_url)[0] == "- first\n- b\n"


def test_w1_global_entries_are_rows_and_memory_md_follows_on_each_machine(
    tmp_path: Path, pg_url: str
) -> None:  # W1 G2 G3
    """An entry written on one machine is a row; the other lists it, and its MEMORY.md
    (derived on each machine from its view) names it; a removal there reaches the first."""
    from memdir import revisions
    from memdir.errors import ConflictError

    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.write_entry("api-style", "how the API is written", "REST, JSON, v1 paths")
        seen = revisions.of(Path(one.layout.entry("api-style")).read_text("utf-8"))
        index_a = Path(one.layout.index_file)
    assert "REST, JSON" in (stored(pg_url, "global/api-style.md")[0] or "")
    with Memory(env=b) as two:
        assert [e.name for e in two.entries()] == ["api-style"]
        assert Path(two.layout.index_file).read_text("utf-8") == (
            "- api-style — how the API is written\n"
        )
        two.write_entry("api-style", "how the API is written", "REST, JSON, v2 paths")
        two.write_entry("deploys", "when deploys go out", "Tuesdays")
    with Memory(env=a) as one:
        with pytest.raises(ConflictError):
            one.write_entry("api-style", "how the API is written", "GraphQL", expected=seen)
        assert one.entry("api-style").content == "REST, JSON, v2 paths\n"
        assert index_a.read_text("utf-8") == (
            "- api-style — how the API is written\n- deploys — when deploys go out\n"
        )
        one.remove_entry("deploys")
    assert stored(pg_url, "global/deploys.md")[0] is None
    with Memory(env=b) as two:
        assert [e.name for e in two.entries()] == ["api-style"]
        assert "deploys" not in Path(two.layout.index_file).read_text("utf-8")


def test_w1_a_write_whose_rules_read_the_tiers_does_not_wait_for_itself(
    tmp_path: Path, pg_url: str
) -> None:  # W1 P1 X5
    """A procedure like another: its duplicate guard reads that one (a refresh of the view)
    inside the write that holds the view's lock. Run in a child process, bounded, so a
    lock waiting on itself fails the test instead of hanging it."""
    env = machine(tmp_path, "a", pg_url)
    script = textwrap.dedent(
        """
        from memdir import Memory
        with Memory() as mem:
            mem.write_procedure("deploy", "# Deploy\\\\n1. build the image\\\\n2. push it\\\\n")
            again = mem.write_procedure(
                "deploy-too", "# Deploy\\\\n1. build the image\\\\n2. push it\\\\n"
            )
            print(again.similar)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "deploy" in proc.stdout


def test_w1_a_write_whose_rules_render_entries_never_takes_the_entries_lock_inside(
    tmp_path: Path, pg_url: str
) -> None:  # W1 P1 L3
    """Lock order: an entry write holds the entries' lock, then the view's. A procedure
    write holds the view's lock (and the scope's) while its duplicate guard reads the other
    procedures, a refresh that may render another machine's entries: deriving MEMORY.md
    there took the entries' lock inside the view's, and beside a memorize on the same
    machine the two waited on each other for ever (every writer of the scope behind
    them). Here the entries' lock is held by another process throughout: the procedure
    write must finish without it, and MEMORY.md follows on the next read."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    text = "# Deploy\n1. build the image\n2. push it\n"
    with Memory(env=a) as one:
        one.write_procedure("deploy", text)
        root = one.layout.memory_dir
        locks = one.layout.locks_dir
    with Memory(env=b) as two:
        two.write_entry("from-b", "an entry machine b wrote", "what b knows")
    holder = textwrap.dedent(
        f"""
        import os, sys, time
        from memdir.entries import LOCK
        from memdir.storage import files
        with files.locked({locks!r}, LOCK):
            print("held", flush=True)
            while not os.path.exists({str(tmp_path / "release")!r}):
                time.sleep(0.05)
        """
    )
    held = subprocess.Popen(
        [sys.executable, "-c", holder], env=a, stdout=subprocess.PIPE, text=True
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        writer = textwrap.dedent(
            f"""
            from memdir import Memory
            from memdir.storage import documents
            plain = documents.TeamDocuments.refresh
            def inside_only(self):  # a refresh outside the write may wait for the lock
                if self.root in documents._views():
                    plain(self)
            documents.TeamDocuments.refresh = inside_only
            with Memory() as mem:
                print(mem.write_procedure("deploy-too", {text!r}).similar)
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", writer], env=a, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert "deploy" in proc.stdout
    finally:
        (tmp_path / "release").touch()
        held.communicate(timeout=60)
    with Memory(env=a) as one:
        one.recall()
    assert "from-b" in Path(root, "MEMORY.md").read_text("utf-8")


def test_w1_a_hand_edit_saved_while_a_write_waits_is_kept_not_written_over(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H2
    """A person saves HOT.md on machine a while `hot append` there waits for the scope's
    lock (the view was checked before the wait): the append lands, and the hand edit, which
    the render would have written over unseen, is kept as a conflict beside the file."""
    from memdir.storage.postgres.connection import LOCK_CLASS

    a = machine(tmp_path, "a", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- before")
        hot = Path(one.layout.hot)
    with psycopg.connect(pg_url) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, "memdir_default")
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "memdir", "hot", "append", "- from the write"],
            env=a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            with psycopg.connect(pg_url, autocommit=True) as look:
                for _ in range(600):  # the writer waiting for the lock: the view checked
                    waiting = look.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    ).fetchone()
                    if waiting and waiting[0]:
                        break
                    proc.poll()
                    assert proc.returncode is None, proc.communicate()
                    import time

                    time.sleep(0.05)
                else:
                    raise AssertionError("the writer never waited for the scope's lock")
            hot.write_text("- before\n- typed by hand meanwhile\n", "utf-8")
        finally:
            holder.rollback()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    body, _ = stored(pg_url)
    assert body == "- before\n- from the write\n"
    kept = list(hot.parent.glob("HOT.md.conflict-*"))
    assert [p.read_text("utf-8") for p in kept] == ["- before\n- typed by hand meanwhile\n"]
    assert hot.read_text("utf-8") == body
    with Memory(env=a) as one:
        assert [c.path for c in one.docs.conflicts()] == ["HOT.md"]


def test_w1_a_wiped_view_is_rendered_again_not_deleted_for_the_team(
    tmp_path: Path, pg_url: str
) -> None:  # W1 D1
    """Every rendered file gone at once (the root wiped, made again): rendered again from
    the rows, not pushed as deletions to every machine. Some files deleted by hand are
    deletions (test_w1_files_made_or_removed_by_hand_in_a_view_go_to_the_rows, and
    test_search's deleted files on this backend)."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- hot line")
        one.start_task("t")
        one.add_note("t", "a task note")
        one.write_procedure("deploy", "# Deploy\n1. build\n")
        root = Path(one.layout.memory_dir)
    rendered = json.loads((root / VIEW_STATE).read_text("utf-8"))["files"]
    assert {"HOT.md", "tasks/t.md", "procedures/deploy.md"} <= set(rendered)
    for rel in rendered:
        (root / rel).unlink()
    with Memory(env=a) as one:
        assert one.hot() == "- hot line\n"
        assert [n.content for n in one.notes("t")] == ["a task note"]
        assert [p.name for p in one.procedures()] == ["deploy"]
    for rel in ("HOT.md", "tasks/t.md", "procedures/deploy.md"):
        assert (root / rel).exists() and stored(pg_url, rel)[0]
    with Memory(env=b) as two:
        assert two.hot() == "- hot line\n"


def test_w1_a_view_state_of_the_wrong_shape_breaks_no_call(tmp_path: Path, pg_url: str) -> None:
    # W1 Z
    """`.view.json` edited into valid JSON of another shape (a revision that is not a number):
    reads and writes go on, nothing stored is lost, the state is written whole again."""
    a = machine(tmp_path, "a", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- kept")
        state = Path(one.layout.memory_dir) / VIEW_STATE
    state.write_text(json.dumps({"seen": "many", "files": {"HOT.md": ["x", 1, 2, 3]}}), "utf-8")
    with Memory(env=a) as one:
        assert one.hot() == "- kept\n"
        one.hot_append("- and more")
    assert stored(pg_url)[0] == "- kept\n- and more\n"
    again = json.loads(state.read_text("utf-8"))
    assert isinstance(again["seen"], int) and isinstance(again["files"]["HOT.md"][0], int)
