"""Sessions and surfaces (U1-U4): subagents are read-only everywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memdir import ConflictError, Memory, NotFoundError, ReadOnlyError, ValidationError
from memdir.testing import FixedClock


def test_session_has_id_surface_parent_start_and_end(memory: Memory) -> None:  # U1
    clock = FixedClock()
    mem = Memory(clock=clock)
    top = mem.start_session(surface="telegram")
    assert top.surface == "telegram" and top.parent_id is None and top.ended is None
    assert top.started == "2026-05-28T20:26:40Z"
    child = mem.start_session(surface="repl", parent=top.id)
    assert child.parent_id == top.id and child.is_subagent
    clock.advance(90)
    ended = mem.end_session(top.id)
    assert ended.ended == "2026-05-28T20:28:10Z"


@pytest.mark.parametrize("surface", ["", "Telegram", "has space", "x" * 40])
def test_bad_surface_is_refused(memory: Memory, surface: str) -> None:  # U1
    with pytest.raises(ValidationError, match="surface"):
        memory.start_session(surface=surface)


def test_subagent_session_is_read_only_in_the_api(memory: Memory) -> None:  # U2
    parent = memory.start_session()
    memory.add_fact("visible to the subagent", "learning")
    child = memory.start_session(parent=parent.id)
    sub = Memory(session=child.id)
    assert sub.read_only
    assert sub.search("visible")  # reads work
    writes = [
        lambda: sub.add_fact("x", "learning"),
        lambda: sub.hot_set("x"),
        lambda: sub.write_procedure("p", "x"),
        lambda: sub.remove_fact(1),
        lambda: sub.supersede_fact(1, "x"),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyError, match="read-only"):
            write()
    assert memory.store.count_facts() == {"active": 1}
    assert memory.get_fact(1).status == "active"


def test_subagent_never_writes_the_session_record(memory: Memory) -> None:  # U2, U3
    parent = memory.start_session()
    child = memory.start_session(parent=parent.id)
    result = memory.end_session(child.id)
    assert result.ended is None
    assert [s.id for s in memory.sessions()] == [parent.id]  # subagents are not listed
    assert memory.store.get_session(child.id).ended is None  # type: ignore[union-attr]


def test_subagent_read_only_through_the_cli(run) -> None:  # U2
    parent = run("session", "start").out.strip()
    child = run("session", "start", "--parent", parent).out.strip()
    result = run("fact", "add", "x", "-c", "learning", "--session", child)
    assert result.code == 1 and "read-only" in result.err and result.err.count("\n") == 1
    env_result = run("hot", "append", "x", env={"MEMDIR_SESSION_ID": child})
    assert env_result.code == 1 and "read-only" in env_result.err
    assert run("search", "x", "--session", child).code == 0


def test_session_end_records_counts_even_with_no_writes(memory: Memory) -> None:  # U3
    busy = memory.start_session(surface="repl")
    quiet = memory.start_session(surface="daemon")
    mem = Memory(session=busy.id)
    mem.add_fact("one", "learning")
    mem.add_fact("two", "decision")
    mem.hot_append("hot line")
    mem.write_procedure("proc", "steps")
    ended = memory.end_session(busy.id)
    assert ended.counts == {"facts": 2, "hot": 1, "procedures": 1}
    quiet_end = memory.end_session(quiet.id)
    assert quiet_end.ended is not None and quiet_end.counts == {}
    listed = {s.id: s for s in memory.sessions()}
    assert listed[busy.id].counts["facts"] == 2 and listed[quiet.id].ended is not None
    with pytest.raises(ConflictError, match="already ended"):
        memory.end_session(busy.id)


def test_ended_session_cannot_write(memory: Memory) -> None:  # U3
    session = memory.start_session()
    memory.end_session(session.id)
    with pytest.raises(ConflictError, match="ended"):
        Memory(session=session.id).add_fact("late", "learning")


def test_sessions_command_lists_them(run) -> None:  # U3
    sid = run("session", "start", "--surface", "scheduled").out.strip()
    assert run("--session", sid, "fact", "add", "x", "-c", "learning").code == 0
    assert "1 facts" in run("session", "end", sid).out
    listed = run("sessions", "--json").json()
    assert listed[0]["id"] == sid and listed[0]["counts"] == {"facts": 1}
    assert listed[0]["surface"] == "scheduled" and listed[0]["ended"]


def test_session_from_option_or_env_and_cli_default(run, state_dir: Path) -> None:  # U4
    sid = run("session", "start", "--surface", "repl").out.strip()
    by_env = run(
        "fact", "add", "via env", "-c", "learning", "--json", env={"MEMDIR_SESSION_ID": sid}
    ).json()
    assert by_env["session_id"] == sid and by_env["surface"] == "repl"
    by_option = run(
        "fact", "add", "via option", "-c", "learning", "--session", sid, "--json"
    ).json()
    assert by_option["session_id"] == sid
    plain = run("fact", "add", "no session", "-c", "learning", "--json").json()
    assert plain["session_id"] is None and plain["surface"] == "cli"


def test_unknown_session_is_adopted_on_first_write(memory: Memory) -> None:  # U1, U4
    """A session id memdir has not seen (a host's) is never refused: a read records
    nothing, the first write records it as a top-level session of the caller's surface."""
    host = "0b6c7e0e-5d43-4c1d-9c7e-6a3f1a2b3c4d"  # Claude Code's kind of id
    reader = Memory(session=host, surface="claude-code")
    assert not reader.read_only and reader.search("anything") == []
    assert memory.store.get_session(host) is None
    fact = Memory(session=host, surface="claude-code").add_fact("adopted", "learning")
    assert (fact.session_id, fact.surface) == (host, "claude-code")
    record = memory.store.get_session(host)
    assert record is not None and record.surface == "claude-code" and record.parent_id is None
    assert memory.end_session(host).counts == {"facts": 1}
    with pytest.raises(ValidationError):
        Memory(session="bad id with spaces")
    with pytest.raises(NotFoundError):
        memory.start_session(parent="missing")


def test_adopt_session_records_a_host_session_and_its_subagents(memory: Memory) -> None:
    """U1, U2, U3: a host's session and its subagent, recorded as they are; the subagent
    stays read-only; an ended host session that the host resumes is open again."""
    top = memory.adopt_session("host-1", "claude-code")
    assert (top.id, top.surface, top.parent_id, top.ended) == ("host-1", "claude-code", None, None)
    assert memory.adopt_session("host-1", "codex") == top  # already known: as it is
    child = memory.adopt_session("agent-9", "claude-code", parent="host-1")
    assert child.parent_id == "host-1" and child.is_subagent
    with pytest.raises(ReadOnlyError, match="read-only"):
        Memory(session="agent-9").add_fact("from the subagent", "learning")
    orphan = memory.adopt_session("agent-7", "claude-code", parent="host-2")  # parent unseen
    assert orphan.parent_id == "host-2" and memory.store.get_session("host-2") is not None
    Memory(session="host-1").add_fact("one", "learning")
    memory.end_session("host-1")
    assert memory.adopt_session("host-1", "claude-code").ended is not None  # no reopen asked
    again = memory.adopt_session("host-1", "claude-code", reopen=True)
    assert again.ended is None and again.counts == {"facts": 1}
    Memory(session="host-1").add_fact("two", "learning")
    assert memory.end_session("host-1").counts == {"facts": 2}


def test_an_unrecorded_host_session_starts_a_subagent_under_itself(memory: Memory) -> None:
    """U1, U2: the host's session, not yet recorded, is adopted when it starts a child."""
    host = Memory(session="host-5", surface="claude-code")
    child = host.start_session(surface="claude-code", parent="host-5")
    assert child.parent_id == "host-5" and memory.store.get_session("host-5") is not None


def test_u2_a_subagent_adopts_no_top_level_session(memory: Memory) -> None:
    """U2: a process running as a subagent neither adopts a new top-level session (which
    could write) nor acts as an unseen one through --session."""
    parent = memory.start_session()
    child = memory.start_session(parent=parent.id)
    sub = Memory(session=child.id)
    with pytest.raises(ReadOnlyError, match="cannot start"):
        sub.adopt_session("fresh-host-id", "claude-code")
    env = {**os.environ, "MEMDIR_SESSION_ID": child.id}
    escaping = Memory(session="fresh-host-id", env=env)
    with pytest.raises(ReadOnlyError, match="acts only as itself"):
        escaping.add_fact("as a new session", "learning")
    assert memory.store.get_session("fresh-host-id") is None


# -- U2: who may end or start which session -----------------------------------------------


def _tree(memory: Memory) -> dict[str, str]:
    """Two unrelated top-level sessions; a child and a grandchild under the first."""
    a = memory.start_session()
    b = memory.start_session()
    child = Memory(session=a.id).start_session(parent=a.id)
    grandchild = Memory(session=a.id).start_session(parent=child.id)
    other_child = Memory(session=b.id).start_session(parent=b.id)
    return {
        "a": a.id,
        "b": b.id,
        "child": child.id,
        "grandchild": grandchild.id,
        "other_child": other_child.id,
    }


# (caller, target): may the caller end the target?
_END_CASES = [
    ("a", "a", True),
    ("a", "child", True),
    ("a", "grandchild", True),
    ("a", "b", False),
    ("a", "other_child", False),
    ("child", "a", False),
    ("child", "child", True),
    ("child", "grandchild", False),
    ("child", "b", False),
    ("grandchild", "child", False),
    ("grandchild", "a", False),
    ("other_child", "a", False),
    ("other_child", "b", False),
]


@pytest.mark.parametrize(("caller", "target", "allowed"), _END_CASES)
def test_u2_only_the_session_or_its_owner_ends_it(
    memory: Memory, caller: str, target: str, allowed: bool
) -> None:
    """U2: a subagent ends only itself; a top-level session ends itself and its subagents;
    nobody ends an unrelated session, and a refused end changes nothing."""
    ids = _tree(memory)
    mem = Memory(session=ids[caller])
    if allowed:
        mem.end_session(ids[target])
        return
    with pytest.raises(ReadOnlyError, match=f"cannot end session {ids[target]}"):
        mem.end_session(ids[target])
    assert memory.store.get_session(ids[target]).ended is None  # type: ignore[union-attr]
    if target in ("a", "b"):
        Memory(session=ids[target]).add_fact("the owner still writes", "learning")


def test_u2_subagent_cannot_end_its_parent_through_the_cli(run) -> None:
    """U2: `session end PARENT` from the child (by --session or MEMDIR_SESSION_ID) is
    refused with one line, and the parent keeps writing."""
    parent = run("session", "start").out.strip()
    child = run("session", "start", "--parent", parent, "--session", parent).out.strip()
    by_option = run("session", "end", parent, "--session", child)
    assert by_option.code == 1 and "cannot end session" in by_option.err
    assert by_option.err.count("\n") == 1
    by_env = run("session", "end", parent, env={"MEMDIR_SESSION_ID": child})
    assert by_env.code == 1 and "cannot end session" in by_env.err
    assert run("fact", "add", "still mine", "-c", "learning", "--session", parent).code == 0
    assert run("session", "end", child, "--session", parent).code == 0
    assert run("session", "end", parent, "--session", parent).code == 0


@pytest.mark.parametrize(("caller", "parent", "allowed"), [
    ("a", "a", True),
    ("a", "child", True),
    ("a", "b", False),
    ("a", "other_child", False),
    ("child", "child", True),
    ("child", "a", False),
    ("child", "b", False),
    ("child", None, False),
    ("grandchild", "child", False),
    ("a", None, True),
])  # fmt: skip
def test_u2_a_child_starts_only_under_the_callers_own_session(
    memory: Memory, caller: str, parent: str | None, allowed: bool
) -> None:
    """U2: no child under someone else's session, and no top-level session (which could
    write) from a subagent."""
    ids = _tree(memory)
    mem = Memory(session=ids[caller])
    parent_id = ids[parent] if parent else None
    if allowed:
        assert mem.start_session(parent=parent_id).parent_id == parent_id
        return
    with pytest.raises(ReadOnlyError, match="cannot start"):
        mem.start_session(parent=parent_id)


def test_u2_no_child_under_an_ended_session(memory: Memory) -> None:
    """U2/U3: an ended session is not reopened by starting a subagent under it."""
    top = memory.start_session()
    memory.end_session(top.id)
    for caller in (memory, Memory(session=top.id)):
        with pytest.raises(ConflictError, match="ended"):
            caller.start_session(parent=top.id)


def test_u2_a_subagent_process_cannot_write_as_another_session(run) -> None:
    """U2/U4: with MEMDIR_SESSION_ID naming a subagent, `--session OTHER` does not turn the
    process into the parent (or any other session); naming itself still reads."""
    parent = run("session", "start").out.strip()
    other = run("session", "start").out.strip()
    child = run("session", "start", "--parent", parent, "--session", parent).out.strip()
    env = {"MEMDIR_SESSION_ID": child}
    for target in (parent, other):
        result = run("fact", "add", "as you", "-c", "learning", "--session", target, env=env)
        assert result.code == 1 and "acts only as itself" in result.err
    assert run("search", "x", "--session", child, env=env).code == 0
    assert "as you" not in run("search", "as you").out
    # the parent's own process, with the parent in its environment, may act as its child
    own = run("search", "x", "--session", child, env={"MEMDIR_SESSION_ID": parent})
    assert own.code == 0
