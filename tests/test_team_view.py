"""W1: the rendered view of team mode, seen from more than one machine and more than one
process: the caches its files key, its lock, its state when a write is refused, the
MEMORY.md it derives, and how often a call looks at the database. Two "machines" are two
state dirs with their own memory roots on one scope of a real server (tests/pg_server.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dbrows import look
from memdir import Memory
from memdir.errors import ConflictError, StorageError
from memdir.storage import files
from memdir.storage.documents import VIEW_STATE, TeamDocuments
from test_team_documents import machine, stored

pytestmark = pytest.mark.usefixtures("pg_server")

DEPLOY = "# Deploy\n1. build the image\n2. push it\n"


def shared_caches(url: str) -> dict[str, Any]:
    """The rows the machines of a scope share that key a file by its (mtime, size)."""
    with look(url) as db:  # the scope's rows, as its stores see them (L4)

        def rows(sql: str) -> dict[str, tuple[Any, ...]]:
            return {str(r[0]): tuple(r[1:]) for r in db.execute(sql).fetchall()}

        listing = db.execute("SELECT listing FROM entry_listing").fetchone()
        return {
            "entry_cache": rows("SELECT name, mtime_ns, size FROM entry_cache"),
            "procedure_prints": rows("SELECT name, mtime_ns, size FROM procedure_prints"),
            "files": rows("SELECT path, mtime_ns, size, hash FROM files"),
            "chunks": rows("SELECT path, array_agg(id ORDER BY id) FROM chunks GROUP BY path"),
            "listing": None if listing is None else listing[0],
        }


def test_w1_a_render_on_another_machine_is_a_hit_of_the_shared_caches(
    tmp_path: Path, pg_url: str
) -> None:  # W1 G4 Q3
    """Machine a wrote and read (the entry cache, the entries' listing, the procedure prints
    and the search index are rows of the scope, keyed by each file's mtime and size). Machine
    b renders the same files: they get the same mtime there (their row's), so b's reads use
    what a cached instead of parsing and chunking every file again under the scope's lock."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.write_entry("api-style", "how the API is written", "REST, JSON, v1 paths")
        one.write_procedure("deploy", DEPLOY)
        one.write_procedure("release", "# Release\n1. tag it\n")  # its guard prints deploy
        one.daily_append("shipped the deploy script")
        assert [e.name for e in one.entries()] == ["api-style"]
        one.recall()
        assert one.search("deploy")
        root_a = Path(one.layout.memory_dir)
    before = shared_caches(pg_url)
    assert before["files"] and before["entry_cache"] and before["listing"]
    assert "deploy" in before["procedure_prints"]
    with Memory(env=b) as two:
        assert [e.name for e in two.entries()] == ["api-style"]
        two.recall()
        assert two.search("deploy")
        similar = two.write_procedure("deploy-too", DEPLOY + "3. watch it\n").similar
        assert [s.ref for s in similar] == ["deploy"]  # the guard read deploy's prints
        root_b = Path(two.layout.memory_dir)
    for rel in before["files"]:
        assert os.stat(root_a / rel).st_mtime_ns == os.stat(root_b / rel).st_mtime_ns, rel
    after = shared_caches(pg_url)
    for table in ("entry_cache", "procedure_prints", "files", "chunks"):
        kept = {key: after[table].get(key) for key in before[table]}
        assert kept == before[table], table  # nothing parsed, printed or chunked again
    assert after["listing"] == before["listing"]


def test_w1_a_hand_edit_with_the_rendered_mtime_and_size_is_still_seen(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H1
    """A hand edit saved with the same size and the mtime the render gave (a coarse clock, a
    tool that keeps the mtime) is pushed all the same: the view knows a file as rendered by
    its ctime too, which nothing sets back."""
    a = machine(tmp_path, "a", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- rendered line")
        hot = Path(one.layout.hot)
        was = os.stat(hot)
        hot.write_text("- ReNdErEd line\n", "utf-8")
        os.utime(hot, ns=(was.st_atime_ns, was.st_mtime_ns))
        assert os.stat(hot).st_size == was.st_size
    with Memory(env=a) as one:
        assert one.hot() == "- ReNdErEd line\n"
    assert stored(pg_url)[0] == "- ReNdErEd line\n"


def test_w1_the_views_lock_is_waited_for_within_the_busy_timeout(
    tmp_path: Path, pg_url: str
) -> None:  # W1 L3
    """Another process holding the view's lock (stuck on a network call, say) makes a write
    wait memory.busy_timeout_ms at most, then fail in one line that says what is held and
    what to do; nothing is stored."""
    a = machine(tmp_path, "a", pg_url)
    Path(a["MEMDIR_STATE_DIR"], "config.toml").write_text(
        "[memory]\nbusy_timeout_ms = 300\n", "utf-8"
    )
    with Memory(env=a) as one:
        one.hot_append("- before")
        root = one.layout.memory_dir
    with files.locked(os.path.join(root, ".locks"), "view"):  # another open file: a holder
        proc = subprocess.run(
            [sys.executable, "-m", "memdir", "hot", "append", "- while held"],
            env=a, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert "view of" in line and "locked by another memdir process" in line
    assert "waited 300 ms" in line and "busy_timeout_ms" in line
    assert stored(pg_url)[0] == "- before\n"


def test_w1_postgres_connections_have_keepalives_and_a_statement_timeout(
    tmp_path: Path, pg_url: str
) -> None:  # W1 L3
    """A server gone quiet mid-call (a dead host, a cut network) must not hold a process,
    and the view's lock it holds, for ever: TCP keepalives and a statement timeout."""
    with Memory(env=machine(tmp_path, "a", pg_url)) as one:
        one.hot_append("- connected")
        db = one.store._live()  # type: ignore[attr-defined]
        params = db.info.get_parameters()
        assert params.get("keepalives") == "1" and int(params["keepalives_idle"]) > 0
        row = db.execute("SHOW statement_timeout").fetchone()
        assert row is not None and row[0] not in ("0", "")


def test_w1_a_refused_write_keeps_what_its_refresh_rendered(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H1 V4
    """A write refused by its rule (a stale `hot set --expected`) after its refresh rendered
    another machine's changes: the view's state says they were rendered, so when the rows
    move on again they are rendered over, not taken for hand edits (conflicts)."""
    from memdir import revisions

    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_set("# Team\n- first\n")
        seen = revisions.of(one.hot())
    with Memory(env=b) as two:
        two.hot_append("- b's line")
        two.write_procedure("deploy", DEPLOY)
    with Memory(env=a) as one, pytest.raises(ConflictError):
        one.hot_set("# Team\n- a's rewrite\n", expected=seen)  # renders b's, then refused
    with Memory(env=b) as two:
        two.hot_append("- b again")
        two.write_procedure("deploy", DEPLOY + "3. watch it\n")
    with Memory(env=a) as one:
        assert one.hot() == "# Team\n- first\n- b's line\n- b again\n"
        assert one.procedure("deploy").content.endswith("3. watch it\n")
        assert one.docs.conflicts() == []
        assert not list(Path(one.layout.memory_dir).rglob("*.conflict-*"))


def test_w1_a_refresh_inside_a_write_pushes_no_hand_edit(tmp_path: Path, pg_url: str) -> None:
    # W1 H1 P1
    """A procedure write's duplicate guard reads the other procedures (a refresh inside the
    write's transaction). A hand edit of one of them saved while the write waited for the
    scope's lock is not pushed there: the write failing afterwards would undo the push, and
    the view would take the edit as stored. The next refresh outside pushes it."""
    a = machine(tmp_path, "a", pg_url)
    with Memory(env=a) as one:
        one.write_procedure("deploy", DEPLOY)
        other = Path(one.layout.procedure("deploy"))
        real = one.store.change_document

        def edit_then_fail(path: str, change: Any, **kw: Any) -> Any:
            if path != "procedures/release.md":
                return real(path, change, **kw)
            other.write_text(DEPLOY + "3. edited by hand meanwhile\n", "utf-8")

            def then_fail(current: str | None) -> str | None:
                change(current)  # the guard: a refresh inside the transaction
                raise StorageError("the connection went while it committed")

            return real(path, then_fail, **kw)

        one.store.change_document = edit_then_fail
        with pytest.raises(StorageError, match="connection went"):
            one.write_procedure("release", DEPLOY + "3. tag it\n")
        one.store.change_document = real
        assert stored(pg_url, "procedures/deploy.md")[0] == DEPLOY  # not pushed inside
        assert "edited by hand" in one.procedure("deploy").content
    assert "edited by hand" in (stored(pg_url, "procedures/deploy.md")[0] or "")


def test_w1_memory_md_stays_due_when_a_render_lands_while_another_process_derives(
    tmp_path: Path, pg_url: str
) -> None:  # W1 G3
    """Process 1 of machine a derives MEMORY.md after a render of global/; meanwhile process
    2 of the same root renders another machine's newer entry. Process 1 must not clear the
    flag process 2 set: the next read derives MEMORY.md again, and it names the new entry."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=b) as two:
        two.write_entry("first", "the first entry", "one")
    with Memory(env=a) as one:
        other = TeamDocuments(one.layout.memory_dir, one.store)  # process 2 of this root
        derive = one.docs.after_render
        assert derive is not None
        calls: list[int] = []

        def derive_while_another_renders() -> None:
            calls.append(1)
            derive()
            if len(calls) == 1:
                with Memory(env=b) as two:
                    two.write_entry("second", "the second entry", "two")
                other.refresh()  # renders global/second.md: MEMORY.md is due again

        one.docs.after_render = derive_while_another_renders
        one.docs.refresh()
        state = json.loads(Path(one.layout.memory_dir, VIEW_STATE).read_text("utf-8"))
        assert state.get("derive"), "the newer render's flag was cleared"
        one.docs.refresh()
        index = Path(one.layout.index_file).read_text("utf-8")
        assert "- first — the first entry" in index and "- second — the second entry" in index
        assert len(calls) == 2


def test_w1_a_call_refreshes_the_view_once(tmp_path: Path, pg_url: str) -> None:  # W1 R1
    """recall reads HOT.md, the entries and the task's notes: the view is refreshed once for
    the whole call (one look at the scope's change counter), not once a read; a call after
    it refreshes again and sees another machine's write."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- a line")
        one.start_task("t")
        one.add_note("t", "a note")
        asked: list[int] = []
        real = one.store.document_revision

        def counted() -> int:
            asked.append(1)
            return real()

        one.store.document_revision = counted
        recalled = one.recall(task="t")
        assert "- a line" in recalled.text and len(asked) == 1
        with Memory(env=b) as two:
            two.hot_append("- b line")
        assert "- b line" in one.recall(task="t").text and len(asked) == 2


def test_w1_a_lost_view_state_takes_renders_for_renders_and_keeps_hand_edits(
    tmp_path: Path, pg_url: str
) -> None:  # W1 H1 Z
    """`.view.json` deleted while machine b moved the rows on: a file of a's view that says
    what its row says now, or said at an earlier revision (a render of a, stale), is no hand
    edit: the row is rendered, no conflict is kept. A file saying what no revision said is
    a hand edit on no known revision: kept as a conflict beside the file, nothing lost."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- a line")
        one.write_procedure("deploy", DEPLOY)
        one.write_entry("api-style", "how the API is written", "REST")
        one.daily_append("a's day")
        root = Path(one.layout.memory_dir)
        daily = root / "daily" / f"{one.daily_log()[0]}.md"
    with Memory(env=b) as two:
        two.hot_append("- b line")
        two.write_procedure("deploy", DEPLOY + "3. watch it\n")
        two.daily_append("b's day")
    (root / VIEW_STATE).unlink()
    edited = daily.read_text("utf-8") + "- typed by hand on a\n"
    daily.write_text(edited, "utf-8")
    with Memory(env=a) as one:
        assert one.hot() == "- a line\n- b line\n"
        assert one.procedure("deploy").content.endswith("3. watch it\n")
        assert [e.name for e in one.entries()] == ["api-style"]
        assert [c.path for c in one.docs.conflicts()] == [str(daily.relative_to(root))]
    kept = list(root.rglob("*.conflict-*"))
    assert [p.read_text("utf-8") for p in kept] == [edited]
    assert "b's day" in daily.read_text("utf-8")
