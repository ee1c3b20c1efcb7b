"""The facade's parts behind the memory browser (V2-V5), on real files and a real store:
the timeline of writes, the revision an edit is checked against (with the competing
write made by another process), and why a search hit matched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memdir import ConflictError, Memory, ValidationError
from memdir.testing import cli_command, cli_env


def cli(state_dir: Path, *args: str) -> None:
    done = subprocess.run(
        cli_command(*args), env=cli_env(str(state_dir)), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_v5_an_edit_from_a_stale_revision_is_refused_and_nothing_is_written(
    state_dir: Path,
) -> None:
    """V5: HOT.md, an entry and a procedure changed by another process after the editor
    read their revision: the write is a ConflictError and the other writer's text stays."""
    with Memory(str(state_dir), agent="editor") as memory:
        memory.hot_set("- first")
        memory.write_entry("ci", "CI", "First body.\n")
        memory.write_procedure("release", "# Release\n\n1. tag\n")
        seen = {
            "hot": memory.revision("hot"),
            "entry": memory.revision("entry", "ci"),
            "procedure": memory.revision("procedure", "release"),
        }
        cli(state_dir, "hot", "set", "- by another process")
        cli(state_dir, "procedure", "write", "release", str(_file(state_dir, "# Other\n")))
        with Memory(str(state_dir)) as other:  # a second writer on its own connection
            other.write_entry("ci", "CI", "Another body.\n")

        with pytest.raises(ConflictError, match="changed by another writer"):
            memory.hot_set("- mine", expected=seen["hot"])
        with pytest.raises(ConflictError, match="entry ci was changed"):
            memory.write_entry("ci", "CI", "My body.\n", expected=seen["entry"])
        with pytest.raises(ConflictError, match="procedure release was changed"):
            memory.write_procedure("release", "# Mine\n", expected=seen["procedure"])
        assert memory.hot().strip() == "- by another process"
        assert memory.entry("ci").content == "Another body.\n"
        assert memory.procedure("release").content == "# Other\n"

        # from what is there now, each write lands
        memory.hot_set("- mine", expected=memory.revision("hot"))
        memory.write_entry("ci", "CI", "My body.\n", expected=memory.revision("entry", "ci"))
        assert memory.hot().strip() == "- mine"
        assert memory.entry("ci").content == "My body.\n"


def test_v5_a_file_removed_meanwhile_is_a_conflict_and_a_new_one_needs_none(
    state_dir: Path,
) -> None:
    """V5: an entry removed after the editor opened it is not silently made again; an
    editor that started from no file ("none") creates it."""
    with Memory(str(state_dir)) as memory:
        memory.write_entry("gone", "Gone", "Body.\n")
        seen = memory.revision("entry", "gone")
        memory.remove_entry("gone")
        with pytest.raises(ConflictError, match="removed by another writer"):
            memory.write_entry("gone", "Gone", "Again.\n", expected=seen)
        assert memory.revision("entry", "gone") == "none"
        memory.write_entry("gone", "Gone", "Again.\n", expected="none")
        assert memory.entry("gone").content == "Again.\n"
        with pytest.raises(ValidationError, match="no revision"):
            memory.revision("fact")


def _file(state_dir: Path, text: str) -> Path:
    path = state_dir.parent / "proc.md"
    path.write_text(text)
    return path


def test_v2_the_timeline_says_who_wrote_what_newest_first_and_filters(state_dir: Path) -> None:
    """V2: facts with their session, surface and agent (added, superseded, removed),
    entries with their agent, task notes, sessions; filtered by tier, session, agent."""
    with Memory(str(state_dir), agent="planner") as memory:
        session = memory.start_session("repl")
        memory.bind_session(session.id)
        first = memory.add_fact("The cache is Redis", "learning")
        memory.supersede_fact(first.id, "The cache is Valkey")
        gone = memory.add_fact("The old host is box1", "learning")
        memory.remove_fact(gone.id)
        memory.write_entry("deploy", "How we deploy", "Run make deploy.\n")
        memory.start_task("t1")
        memory.add_note("t1", "Started on the cache")
        memory.hot_set("- hot")
        events = memory.timeline()

        facts = [(e.action, e.ref) for e in events if e.tier == "fact"]
        assert ("added", str(first.id)) in facts
        assert ("superseded #1", "2") in facts
        assert ("removed", str(gone.id)) in facts
        added = next(e for e in events if e.tier == "fact" and e.ref == "2")
        assert (added.session_id, added.surface, added.agent) == (session.id, "repl", "planner")
        entry = next(e for e in events if e.tier == "entry")
        assert (entry.ref, entry.agent, entry.action) == ("deploy", "planner", "added")
        assert any(e.tier == "task" and e.ref == "t1" and e.agent == "planner" for e in events)
        assert any(e.tier == "hot" for e in events)
        assert any(e.tier == "session" and e.action == "started" for e in events)
        assert [e.when for e in events] == sorted((e.when for e in events), reverse=True)

        assert {e.tier for e in memory.timeline(tier="entry")} == {"entry"}
        mine = memory.timeline(session=session.id)
        assert mine and all(e.session_id == session.id for e in mine)
        assert memory.timeline(agent="nobody") == []
        assert len(memory.timeline(limit=2)) == 2
        with pytest.raises(ValidationError, match="unknown tier"):
            memory.timeline(tier="nope")


def test_v3_why_a_hit_matched(state_dir: Path) -> None:
    """V3: the question's words found in each hit, and how it was ranked."""
    with Memory(str(state_dir)) as memory:
        memory.add_fact("Deploys to staging happen on Fridays", "decision")
        hits = memory.search("deploy staging", mode="lexical")
        (why,) = memory.explain("deploy staging", hits)
        assert why.terms == ["deploy", "staging"]  # "deploy" finds "Deploys"
        assert why.how == "by its words"
        assert memory.searched_mode == "lexical"


def test_v6_memdir_ui_refuses_bad_input_in_one_line(state_dir: Path) -> None:
    """V6/Z: a port in use, an address off loopback without --allow-remote, a bad port:
    one line saying what to do, exit 1, no traceback, no server."""
    import socket

    from memdir.testing import free_port

    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        cases = {
            ("--port", str(port)): f"port {port} is in use",
            ("--host", "192.0.2.7", "--port", "8767"): "not a loopback address",
            ("--port", "70000"): "bad --port 70000",
        }
        for args, said in cases.items():
            done = subprocess.run(
                cli_command("ui", *args),
                env=cli_env(str(state_dir)),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 1, (args, done.stderr)
            assert said in done.stderr and "Traceback" not in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
            assert done.stdout == ""
