"""`memdir hook EVENT` (K2) and host sessions (K3, U1-U4) on the payloads Claude Code
2.1.332 sends (tests/host_payloads/), each run as a real `memdir hook EVENT` process with
the payload on stdin, as the host runs it; what it did is checked on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbrows import writer_lock_held
from memdir import Memory, ReadOnlyError, hooks
from memdir.testing import at_once, cli_command, cli_env
from memdir.tools import TOOLS
from storeconfig import write_config

PAYLOADS = Path(__file__).parent / "host_payloads" / "claude-code-2.1.332"
HOST = "5f0c3a7e-2b9d-4e61-8f14-0d6a9c3b7e21"  # the session id in the payloads
AGENT = "a3f8c9d2e1b04f67"  # the subagent's agent_id in them


def payload(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    data.update(changes)
    return data


class Hooked:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code, self.out, self.err = proc.returncode, proc.stdout, proc.stderr

    @property
    def answer(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)["hookSpecificOutput"]
        return data

    @property
    def context(self) -> str:
        text: str = self.answer["additionalContext"]
        return text


def hook(
    state_dir: Path, *args: str, stdin: str | dict[str, Any], env: dict[str, str] | None = None
) -> Hooked:
    """`memdir hook ARGS` as Claude Code runs it: the payload on stdin, in the project."""
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    proc = subprocess.run(
        cli_command("hook", *args),
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(str(state_dir), env),
    )
    return Hooked(proc)


@pytest.fixture
def store(state_dir: Path) -> Iterator[Memory]:
    """A store with every boot part: HOT.md, an identity file, both days' logs, entries."""
    (state_dir / "SOUL.md").write_text("You are Ada's careful shop assistant.\n")
    with Memory() as memory:
        memory.hot_set("Deploys go through `make ship`, never by hand.\n")
        memory.daily_append("Moved the shop to the new host.")
        memory.write_entry("ci-duration", "How long CI takes", "About 12 minutes.")
        yield memory


# -- SessionStart: the boot context, the host session adopted -------------------------------


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_session_start_injects_the_boot_context(  # K2, E3, K3, U1
    state_dir: Path, store: Memory, source: str
) -> None:
    result = hook(state_dir, "SessionStart", stdin=payload(f"SessionStart-{source}"))
    assert (result.code, result.err) == (0, "")
    assert result.answer["hookEventName"] == "SessionStart"
    text = result.context
    hot, soul = text.index("Deploys go through"), text.index("careful shop assistant")
    today, index = text.index("Moved the shop"), text.index("ci-duration")
    assert hot < soul < today < index  # HOT.md first, the MEMORY.md index of a main session
    assert "left out" not in text  # all of it fits
    session = store.store.get_session(HOST)
    assert session is not None and (session.surface, session.parent_id) == ("claude-code", None)


@pytest.mark.slow  # eighty entries written through the API: ~2 s
def test_session_start_stays_within_its_budget(  # K2, E3, H3
    state_dir: Path, store: Memory
) -> None:
    """A full HOT.md, a long log and an index bigger than the budget: what is injected stays in
    [hooks] start_budget_chars, HOT.md whole and first, and the last line says what was
    left out and how to read it."""
    store.hot_set("\n".join(f"- rule {i}: " + "keep it short " * 6 for i in range(60))[:5200])
    store.daily_append("\n".join(f"step {i}: " + "long log line " * 20 for i in range(40)))
    with store.bulk():  # an index of ~14,000 chars, over the whole budget by itself
        for i in range(80):
            store.write_entry(f"entry-{i:03}", f"what entry {i} says " * 8, f"body {i}")
    for budget in (None, 3000):
        if budget is not None:
            write_config(state_dir, f"[hooks]\nstart_budget_chars = {budget}\n")
        text = hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup")).context
        assert len(text) <= (budget or 9000)
        last = text.rstrip("\n").splitlines()[-1]
        assert last.startswith("memdir: left out to stay within the budget: ")
        assert "memory_get" in last and "`memdir get PATH`" in last
        if budget is None:
            assert store.hot().strip() in text  # HOT.md whole
            assert "MEMORY.md" in last
        else:
            assert "HOT.md (cut after" in last


def test_fit_keeps_parts_whole_cuts_one_and_names_the_rest(store: Memory) -> None:  # K2, E3
    parts = store.boot().parts
    whole = hooks.fit(parts, 100_000, store.path)
    assert "left out" not in whole and all(p.text.strip() in whole for p in parts)
    budget = len(whole) + hooks.TRAILER_ROOM - 10  # the last part no longer fits
    small = hooks.fit(parts, budget, store.path)
    assert len(small) <= budget and "Deploys go through" in small
    assert small.splitlines()[-1].startswith("memdir: left out to stay within the budget: ")
    assert "MEMORY.md" in small.splitlines()[-1] and "ci-duration" not in small
    assert hooks.fit([], 1000, store.path) == ""


def test_session_start_resume_opens_an_ended_session_again(  # K3, U3
    state_dir: Path, store: Memory
) -> None:
    hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"))
    assert hook(state_dir, "SessionEnd", stdin=payload("SessionEnd")).code == 0
    assert store.store.get_session(HOST).ended is not None  # type: ignore[union-attr]
    hook(state_dir, "SessionStart", stdin=payload("SessionStart-resume"))
    assert store.store.get_session(HOST).ended is None  # type: ignore[union-attr]
    Memory(session=HOST).add_fact("written after the resume", "learning")


def test_session_start_names_the_session_its_host_process_runs(  # K3, U1
    state_dir: Path, store: Memory
) -> None:
    """The host ends one session and starts the next in the same process (/clear): its
    SessionStart names the new session for that process (CLAUDE_PID), and a server the
    process started, bound to the old session, follows it for its next writes."""
    from memdir.sessions import host_process, process_name

    host = {"CLAUDE_PID": str(os.getpid())}
    process = process_name(os.getpid())
    assert process.startswith(f"{os.getpid()}-") and host_process(host) == process
    assert process_name(os.getpid()) == process  # stable: the pid and its start time
    hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"), env=host)
    server = Memory(session=HOST)
    server.follow_host(process, "claude-code")  # at the server's start
    server.follow_host(process, "claude-code")
    assert server.session_id == HOST  # still the host's session
    late = Memory(session="started-later")  # a server started after the last SessionStart
    late.follow_host(process, "claude-code")
    late.follow_host(process, "claude-code")
    assert late.session_id == "started-later"
    other = Memory(session=HOST)  # the server of another host process (pid 1)
    other.follow_host(process_name(1), "claude-code")
    hook(state_dir, "SessionEnd", stdin=payload("SessionEnd", reason="clear"), env=host)
    cleared = payload("SessionStart-clear", session_id="after-clear-1")
    hook(state_dir, "SessionStart", stdin=cleared, env=host)
    server.follow_host(process, "claude-code")
    fact = server.add_fact("Written after the clear", "learning")
    assert (server.session_id, fact.session_id) == ("after-clear-1", "after-clear-1")
    other.follow_host(process_name(1), "claude-code")  # this host's clear is not its own
    assert other.session_id == HOST


# -- SubagentStart: the read-only slice ------------------------------------------------------


def test_subagent_start_gives_the_read_only_slice(  # K2, U2, K3
    state_dir: Path, store: Memory
) -> None:
    result = hook(state_dir, "SubagentStart", stdin=payload("SubagentStart"))
    assert (result.code, result.err) == (0, "")
    assert result.answer["hookEventName"] == "SubagentStart"
    text = result.context
    assert "Deploys go through" in text and text.endswith(hooks.READ_ONLY_LINE)
    assert "ci-duration" not in text and "careful shop assistant" not in text  # not the boot
    agent = store.store.get_session(AGENT)
    assert agent is not None and agent.parent_id == HOST and agent.is_subagent
    with pytest.raises(ReadOnlyError, match="read-only"):
        Memory(session=AGENT).add_fact("from the subagent", "learning")


# -- PreToolUse: memdir's write tools denied inside a subagent --------------------------------


def test_pre_tool_use_denies_a_subagent_write_and_allows_its_read(  # K2, U2
    state_dir: Path, store: Memory
) -> None:
    denied = hook(state_dir, "PreToolUse", stdin=payload("PreToolUse-subagent-memory_update"))
    assert (denied.code, denied.err) == (0, "")
    answer = denied.answer
    assert (answer["hookEventName"], answer["permissionDecision"]) == ("PreToolUse", "deny")
    reason = answer["permissionDecisionReason"]
    assert "read-only in a subagent" in reason and "\n" not in reason
    for allowed in ("PreToolUse-subagent-memory_search", "PreToolUse-main-memory_update"):
        result = hook(state_dir, "PreToolUse", stdin=payload(allowed))
        assert (result.code, result.out, result.err) == (0, "", "")


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("server", ["memdir", "plugin_memdir_memdir"])
def test_pre_tool_use_follows_the_tools_read_only_flags(tool: str, server: str) -> None:  # U2
    """Every tool tools.py does not mark read-only is denied in a subagent, every other is
    let through; the main session's calls and other servers' tools are never touched."""
    name = f"mcp__{server}__{tool}"
    sub = hooks.run(
        "PreToolUse", json.dumps(payload("PreToolUse-subagent-memory_update", tool_name=name))
    )
    if TOOLS[tool].read_only:
        assert sub.out == ""
    else:
        assert json.loads(sub.out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    main = hooks.run(
        "PreToolUse", json.dumps(payload("PreToolUse-main-memory_update", tool_name=name))
    )
    other = payload("PreToolUse-subagent-memory_update", tool_name=f"mcp__notes__{tool}")
    bash = payload("PreToolUse-subagent-memory_update", tool_name="Bash")
    for reply in (
        main,
        hooks.run("PreToolUse", json.dumps(other)),
        hooks.run("PreToolUse", json.dumps(bash)),
    ):
        assert (reply.out, reply.warning) == ("", None)


# -- Stop / SubagentStop: memorize blocks of the last answer --------------------------------


def entry_file(store: Memory, name: str) -> Path:
    return Path(store.layout.entry(name))


def test_stop_applies_the_answers_blocks_once_as_the_host_session(  # K2, M1, M3, K3, U3
    state_dir: Path, store: Memory
) -> None:
    result = hook(state_dir, "Stop", stdin=payload("Stop"))
    assert (result.code, result.err) == (0, "")
    said = json.loads(result.out)["systemMessage"]
    assert said == "memdir: memorized global ci-cache (created)"
    assert "caches ~/.cache/pip" in entry_file(store, "ci-cache").read_text()
    session = store.store.get_session(HOST)
    assert session is not None and session.surface == "claude-code"
    assert session.counts == {"entries": 1}
    # the host hands the same answer over again (a second Stop, a hook registered twice):
    # nothing is applied again, not even over a hand edit made meanwhile
    entry_file(store, "ci-cache").write_text(
        entry_file(store, "ci-cache").read_text().replace("keyed on", "hand-edited: keyed on")
    )
    again = hook(state_dir, "Stop", stdin=payload("Stop"))
    assert (again.code, again.out, again.err) == (0, "", "")
    assert "hand-edited" in entry_file(store, "ci-cache").read_text()
    assert store.store.get_session(HOST).counts == {"entries": 1}  # type: ignore[union-attr]


def test_stop_applies_blocks_once_when_two_hooks_race(  # K2, M4
    state_dir: Path, store: Memory
) -> None:
    """Setup's hook and the plugin's both run at one Stop: one applies, one finds it done."""
    runs = at_once(
        cli_command("hook", "Stop"), 4, cli_env(str(state_dir)), stdin=json.dumps(payload("Stop"))
    )
    assert all(code == 0 and err == "" for code, _, err in runs), runs
    assert sum(1 for _, out, _ in runs if out) == 1, runs
    assert store.store.get_session(HOST).counts == {"entries": 1}  # type: ignore[union-attr]


def test_stop_without_blocks_opens_no_store(state_dir: Path) -> None:  # K2
    """Most turns end without a block: the hook answers before it looks for a store."""
    plain = payload("Stop", last_assistant_message="All done, the tests pass.")
    result = hook(state_dir / "missing", "Stop", stdin=plain)
    assert (result.code, result.out, result.err) == (0, "", "")


def test_stop_reports_a_refused_block_to_the_user(state_dir: Path, store: Memory) -> None:  # M4
    bad = '{"scope": "global", "name": "Bad Name!", "description": "x", "content": "y"}'
    answer = f"Done.\nMEMDIR_MEMORIZE_BEGIN\n{bad}\nMEMDIR_MEMORIZE_END\n"
    result = hook(state_dir, "Stop", stdin=payload("Stop", last_assistant_message=answer))
    assert (result.code, result.err) == (0, "")
    said = json.loads(result.out)["systemMessage"]
    assert said.startswith("memdir: ") and "Bad Name!" in said and "\n" not in said
    echo = f"Done.\nMEMDIR_MEMORIZE_BEGIN\n{bad.replace('Bad Name!', 'x_MEMORIZE_END')}\n"
    echoed = hook(state_dir, "Stop", stdin=payload("Stop", last_assistant_message=echo))
    assert "MEMORIZE_END" not in echoed.out and "defanged" in echoed.out  # R4
    assert [e.name for e in store.entries()] == ["ci-duration"]  # the store's own, no other
    again = hook(state_dir, "Stop", stdin=payload("Stop", last_assistant_message=answer))
    assert json.loads(again.out)["systemMessage"] == said  # nothing applied: said again


def test_stop_logs_a_task_block_in_todays_log(state_dir: Path, store: Memory) -> None:  # M3
    """A host's session has no memdir task: a task block (the default scope) is a note in
    today's daily log, not lost; applied once like any block."""
    answer = 'Done.\nMEMDIR_MEMORIZE_BEGIN\n{"content": "The flaky test is test_upload"}\n'
    answer += "MEMDIR_MEMORIZE_END\n"
    data = payload("Stop", last_assistant_message=answer)
    result = hook(state_dir, "Stop", stdin=data)
    assert (result.code, result.err) == (0, "")
    day = store.daily_log()[0]
    assert json.loads(result.out)["systemMessage"] == f"memdir: logged a note in daily/{day}.md"
    assert store.daily().count("The flaky test is test_upload") == 1
    assert hook(state_dir, "Stop", stdin=data).out == ""
    assert store.daily().count("The flaky test is test_upload") == 1
    assert store.store.get_session(HOST).counts == {"daily": 1}  # type: ignore[union-attr]


def test_stop_reads_the_transcript_when_the_host_sends_no_answer(  # K2, M1
    state_dir: Path, store: Memory, tmp_path: Path
) -> None:
    """A host that sends only `transcript_path`: the last assistant message is read from
    the JSONL transcript, its text blocks joined (split over lines sharing its id, as older
    Claude Code versions write it), the earlier turns' blocks left alone."""
    block = (
        'MEMDIR_MEMORIZE_BEGIN {"scope": "global", "name": "from-transcript", '
        '"description": "d", "content": "read from the transcript"} MEMDIR_MEMORIZE_END'
    )
    old = block.replace("from-transcript", "earlier-turn")
    lines = [
        {"type": "user", "message": {"role": "user", "content": "first"}},
        {"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": old}]}},
        {"type": "user", "message": {"role": "user", "content": "second"}},
        {"type": "attachment", "attachment": {"type": "x"}},
        {
            "type": "assistant",
            "message": {"id": "m2", "content": [{"type": "text", "text": "Here it is."}]},
        },
        {
            "type": "assistant",
            "message": {
                "id": "m2",
                "content": [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": block}],
            },
        },
        {"type": "last-prompt", "lastPrompt": "second"},
        {"type": "system", "subtype": "turn_duration"},
    ]
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{cut")
    assert hooks.last_assistant_text(str(transcript)) == f"Here it is.\n{block}"
    data = payload("Stop", transcript_path=str(transcript))
    del data["last_assistant_message"]
    result = hook(state_dir, "Stop", stdin=data)
    assert json.loads(result.out)["systemMessage"] == (
        "memdir: memorized global from-transcript (created)"
    )
    assert not entry_file(store, "earlier-turn").exists()
    del data["transcript_path"]
    missing = hook(state_dir, "Stop", stdin=data)
    assert missing.code == 0 and "last_assistant_message" in missing.err
    for device in ("/dev/urandom", str(tmp_path)):  # endless, or no file at all
        odd = hook(state_dir, "Stop", stdin={**data, "transcript_path": device})
        assert (odd.code, odd.out) == (0, "") and odd.err.count("\n") == 1, odd.err
        assert "is not a file" in odd.err or "Is a directory" in odd.err, odd.err


def test_subagent_stop_drops_the_blocks_and_says_so(  # K2, U2
    state_dir: Path, store: Memory
) -> None:
    result = hook(state_dir, "SubagentStop", stdin=payload("SubagentStop"))
    assert (result.code, result.err) == (0, "")
    said = json.loads(result.out)["systemMessage"]
    assert said.startswith(f"memdir: subagent {AGENT}: ") and "read-only" in said
    assert not entry_file(store, "signing").exists()
    agent = store.store.get_session(AGENT)
    assert agent is not None and agent.parent_id == HOST
    plain = payload("SubagentStop", last_assistant_message="nothing to keep")
    assert hook(state_dir, "SubagentStop", stdin=plain).out == ""
    # the host's own helper (the compaction's summarizer: no agent_type) is no subagent
    helper = payload("SubagentStop", agent_id="a515b672c04eafef6", agent_type="")
    assert hook(state_dir, "SubagentStop", stdin=helper).out == ""
    assert store.store.get_session("a515b672c04eafef6") is None


# -- PreCompact / PostCompact: the compaction in today's log ---------------------------------


def test_post_compact_logs_the_hosts_summary_for_the_next_boot(  # K2, E1, E3
    state_dir: Path, store: Memory
) -> None:
    result = hook(state_dir, "PostCompact", stdin=payload("PostCompact"))
    assert (result.code, result.out, result.err) == (0, "", "")
    log = store.daily()
    assert f"Claude Code compacted the context of session {HOST} (manual)." in log
    assert "wheels are cached" in log
    boot = hook(state_dir, "SessionStart", stdin=payload("SessionStart-compact")).context
    assert "wheels are cached" in boot  # re-injected with today's log
    pre = hook(state_dir, "PreCompact", stdin=payload("PreCompact"))
    assert (pre.code, pre.out, pre.err) == (0, "", "")
    assert "is compacting the context" in store.daily() and "keep the ids" in store.daily()
    assert store.store.get_session(HOST).counts == {"daily": 2}  # type: ignore[union-attr]


def test_post_compact_keeps_the_log_short_and_free_of_secrets(  # K2, E1, X2
    state_dir: Path, store: Memory
) -> None:
    long = "\n".join(f"{i}. a step of the work done so far" for i in range(400))
    hook(state_dir, "PostCompact", stdin=payload("PostCompact", compact_summary=long))
    log = store.daily()
    assert "cut: " in log and len(log) < hooks.SUMMARY_MAX + 1000
    leaked = "the deploy key is ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    result = hook(state_dir, "PostCompact", stdin=payload("PostCompact", compact_summary=leaked))
    assert result.code == 0 and result.err.count("\n") == 1 and "secret" in result.err
    assert "ghp_" not in store.daily() and "its summary was not logged" in store.daily()


# -- SessionEnd: the session recorded with what it wrote -----------------------------------


def test_session_end_records_the_session_and_its_counts(  # K2, U3, K3
    state_dir: Path, store: Memory
) -> None:
    hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"))
    host = Memory(session=HOST)
    host.add_fact("Staging runs on port 8080", "learning")
    host.hot_append("The shop opens at nine")
    result = hook(state_dir, "SessionEnd", stdin=payload("SessionEnd"))
    assert (result.code, result.out, result.err) == (0, "", "")
    (listed,) = [s for s in store.sessions() if s.id == HOST]
    assert listed.ended is not None and listed.counts == {"facts": 1, "hot": 1}
    again = hook(state_dir, "SessionEnd", stdin=payload("SessionEnd"))  # the host retried
    assert (again.code, again.out, again.err) == (0, "", "")


def test_session_end_of_a_session_never_seen_records_it(  # K3, U1, U3
    state_dir: Path, store: Memory
) -> None:
    result = hook(state_dir, "SessionEnd", stdin=payload("SessionEnd", session_id="host-77"))
    assert result.code == 0 and result.err == ""
    record = store.store.get_session("host-77")
    assert record is not None and record.ended is not None and record.surface == "claude-code"


# -- never breaking the host ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (("SessionStart",), "{not json", "not JSON"),
        (("SessionStart",), "", "no input on stdin"),
        (("SessionStart",), "[1, 2]", "not a JSON object"),
        (("SubagentStart",), {"session_id": HOST, "hook_event_name": "SubagentStart"}, "agent_id"),
        (("SessionEnd",), {"hook_event_name": "SessionEnd"}, "session_id"),
        (("PreToolUse",), {"agent_id": AGENT, "hook_event_name": "PreToolUse"}, "tool_name"),
        (("Notification",), {"session_id": HOST}, "unknown hook event 'Notification'"),
        ((), {"session_id": HOST}, "unknown hook event None"),
    ],
    ids=["bad-json", "empty", "not-object", "no-agent", "no-session", "no-tool", "unknown", "none"],
)
def test_bad_input_is_one_line_on_stderr_and_exit_0(  # K2, Z
    state_dir: Path, store: Memory, args: tuple[str, ...], stdin: Any, says: str
) -> None:
    result = hook(state_dir, *args, stdin=stdin)
    assert (result.code, result.out) == (0, "")
    assert result.err.count("\n") == 1 and says in result.err and "Traceback" not in result.err


def test_session_start_without_a_session_id_still_boots(  # K2, E3
    state_dir: Path, store: Memory
) -> None:
    data = payload("SessionStart-startup")
    del data["session_id"]
    result = hook(state_dir, "SessionStart", stdin=data)
    assert result.code == 0 and "Deploys go through" in result.context
    assert result.err.count("\n") == 1 and "session_id" in result.err


def test_a_broken_config_is_one_line_and_exit_0(state_dir: Path, store: Memory) -> None:  # K2, Z
    write_config(state_dir, "[hooks]\nstart_budget_chars = 5\n")
    result = hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"))
    assert (result.code, result.out) == (0, "")
    assert result.err.count("\n") == 1 and "hooks.start_budget_chars" in result.err


def test_disabled_memory_injects_and_records_nothing(state_dir: Path, store: Memory) -> None:  # S
    write_config(state_dir, "[memory]\nenabled = false\n")
    for event in ("SessionStart-startup", "SubagentStart", "SessionEnd"):
        result = hook(state_dir, event.split("-")[0], stdin=payload(event))
        assert (result.code, result.out, result.err) == (0, "", "")
    assert store.store.get_session(HOST) is None


def test_a_hook_past_its_time_budget_gives_up(state_dir: Path, store: Memory) -> None:  # K2
    """The store is locked by another writer for as long as the test holds it: the hook
    gives up at [hooks] timeout_ms with one line and exit 0, injecting nothing."""
    write_config(state_dir, "[hooks]\ntimeout_ms = 300\n")
    store.store.get_session("warm")  # the database exists
    with writer_lock_held(store.store):
        result = hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"))
    assert (result.code, result.out) == (0, "")
    assert result.err.count("\n") == 1 and "gave up after 300 ms" in result.err
    assert store.store.get_session(HOST) is None


@pytest.mark.slow  # waits out the default budget: 5 s
def test_a_transcript_that_never_ends_gives_up_at_the_budget(  # K2
    state_dir: Path, store: Memory, tmp_path: Path
) -> None:
    """The watchdog counts from the hook's start, not from the store's opening: a Stop whose
    transcript is a pipe nobody writes gives up at the default budget, one line, exit 0."""
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    data = payload("Stop", transcript_path=str(fifo))
    del data["last_assistant_message"]
    result = hook(state_dir, "Stop", stdin=data)
    assert (result.code, result.out) == (0, "")
    assert result.err.count("\n") == 1 and "gave up after 5,000 ms" in result.err


def test_the_hook_imports_nothing_heavy(state_dir: Path, store: Memory) -> None:  # K2, C
    """Run at every session, tool call and turn: no mcp, yaml or numpy on its way, and a
    write (Stop's entry, PostCompact's log line) loads no embedding model: the host waits
    (an entry's frontmatter is YAML: Stop writing one is the one to import yaml)."""
    code = (
        "import io, json, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "from memdir.cli import main\n"
        "main(['hook', sys.argv[2]])\n"
        "heavy = {'mcp', 'yaml', 'numpy', 'click', 'pydantic', 'onnxruntime', 'tokenizers'}\n"
        "print(json.dumps(sorted(heavy & set(sys.modules))), file=sys.stderr)\n"
    )
    answers = {
        "SessionStart-startup": "hookSpecificOutput",
        "SubagentStart": "hookSpecificOutput",
        "PreToolUse-subagent-memory_update": "hookSpecificOutput",
        "Stop": "systemMessage",
        "SubagentStop": "systemMessage",
        "PostCompact": None,
    }
    for name, key in answers.items():
        data = json.dumps(payload(name))
        proc = subprocess.run(
            [sys.executable, "-c", code, data, name.split("-")[0]],
            capture_output=True,
            text=True,
            env=cli_env(str(state_dir)),
        )
        allowed = ["yaml"] if name == "Stop" else []
        assert json.loads(proc.stderr.strip().splitlines()[-1]) in ([], allowed), proc.stderr
        assert json.loads(proc.stdout)[key] if key else proc.stdout == "", (name, proc.stdout)
    assert "wheels are cached" in store.daily() and store.entry("ci-cache") is not None


# -- the MCP server in the host's session -------------------------------------------------


@pytest.mark.slow  # a real MCP server: a second of SDK imports
@pytest.mark.timeout(60)
def test_mcp_server_writes_carry_the_host_session(state_dir: Path, store: Memory) -> None:  # K3
    """`memdir serve` started by Claude Code (CLAUDE_CODE_SESSION_ID in its environment)
    writes as the host's session; it leaves the end to the SessionEnd hook; with
    MEMDIR_SESSION_ID also set, that one wins."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def write(env: dict[str, str], content: str) -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memdir", "serve"],
            env=cli_env(str(state_dir), env),
        )
        async with Client(params, read_timeout_seconds=20) as client:
            result = await client.call_tool(
                "memory_update", {"category": "learning", "content": content}
            )
            assert not result.is_error, result
            assert result.structured_content is not None
            return result.structured_content

    def written(env: dict[str, str], content: str) -> tuple[str | None, str]:
        fact = store.get_fact(anyio.run(write, env, content)["fact"]["id"])
        return fact.session_id, fact.surface

    hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup"))
    staging = written({"CLAUDE_CODE_SESSION_ID": HOST}, "Staging runs on port 8080")
    assert staging == (HOST, "claude-code")
    adopted = written({"CLAUDE_CODE_SESSION_ID": "never-seen-1"}, "The shop opens at nine")
    assert adopted == ("never-seen-1", "claude-code")
    mine = store.start_session("repl").id
    assert written({"CLAUDE_CODE_SESSION_ID": HOST, "MEMDIR_SESSION_ID": mine}, "Mine") == (
        mine,
        "repl",
    )
    assert store.store.get_session(HOST).ended is None  # type: ignore[union-attr]
    hook(state_dir, "SessionEnd", stdin=payload("SessionEnd"))
    ended = store.store.get_session(HOST)
    assert ended is not None and ended.ended is not None and ended.counts == {"facts": 1}
    assert not any(s.surface == "mcp" for s in store.sessions())  # no session of its own


def test_payload_fixtures_are_what_the_host_sends() -> None:  # K2
    """Every payload carries the fields Claude Code 2.1.332 gives every hook input."""
    for path in sorted(PAYLOADS.glob("*.json")):
        data = json.loads(path.read_text())
        assert {"session_id", "transcript_path", "cwd", "hook_event_name"} <= set(data), path
        assert data["hook_event_name"] == path.stem.split("-")[0], path
    assert os.path.isdir(PAYLOADS)


def test_injected_memory_is_inert(state_dir: Path, store: Memory) -> None:  # R4, K2
    """Booted text is recalled text: a marker keyword in HOT.md reaches the model defanged,
    and the answer stays valid JSON whatever the text holds."""
    Path(store.layout.hot).write_text('Use MEMDIR_MEMORIZE_BEGIN blocks\n\\ "quoted" é\n')
    text = hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup")).context
    assert "MEMDIR_MEMORIZE_BEGIN" not in text and "defanged" in text
    assert '\\ "quoted" é' in text


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("start_budget_chars = 999", "hooks.start_budget_chars"),
        ("timeout_ms = 50", "hooks.timeout_ms"),
        ("timeout_ms = true", "hooks.timeout_ms"),
        ("recall = 1", "hooks.recall"),
        ('off = "Stop"', "hooks.off"),
        ('off = ["Stopp"]', "hooks.off"),
        ("recall_on_prompt = 1", "hooks.recall_on_prompt"),
        ('recall_on_prompt = "yes"', "hooks.recall_on_prompt"),
        ("prompt_budget_chars = 199", "hooks.prompt_budget_chars"),
        ("prompt_budget_chars = 10001", "hooks.prompt_budget_chars"),
        ("prompt_timeout_ms = 49", "hooks.prompt_timeout_ms"),
    ],
)
def test_hooks_settings_are_range_checked(tmp_path: Path, line: str, key: str) -> None:  # S, K2
    from memdir.errors import ConfigError
    from memdir.settings import load_settings

    config = tmp_path / "config.toml"
    config.write_text(f"[hooks]\n{line}\n")
    with pytest.raises(ConfigError, match=key) as caught:
        load_settings(str(config))
    assert caught.value.line == 2
    config.write_text(
        "[hooks]\nstart_budget_chars = 4000\ntimeout_ms = 800\nrecall_on_prompt = true\n"
        'prompt_budget_chars = 800\nprompt_timeout_ms = 250\noff = ["Stop"]\n'
    )
    s = load_settings(str(config))
    assert (s.hooks_start_budget_chars, s.hooks_timeout_ms) == (4000, 800)
    assert (s.hooks_recall_on_prompt, s.hooks_prompt_budget_chars, s.hooks_prompt_timeout_ms) == (
        True,
        800,
        250,
    )
    assert s.hooks_off == ("Stop",)


ANSWERING = {  # a payload of each event that, switched on, answers or writes something
    "SessionStart": "SessionStart-startup",
    "UserPromptSubmit": "UserPromptSubmit",
    "SubagentStart": "SubagentStart",
    "PreToolUse": "PreToolUse-subagent-memory_update",
    "Stop": "Stop",
    "SubagentStop": "SubagentStop",
    "PreCompact": "PreCompact",
    "PostCompact": "PostCompact",
    "SessionEnd": "SessionEnd",
}


def test_each_hook_can_be_switched_off(state_dir: Path, store: Memory) -> None:  # K2, S
    """[hooks] off names the events memdir does nothing at: each answers nothing and writes
    nothing, and the events left on work as before."""
    from memdir.settings import HOOK_EVENTS

    assert set(HOOK_EVENTS) == set(hooks.EVENTS) == set(ANSWERING)
    everything = json.dumps(list(ANSWERING))
    write_config(state_dir, f"[hooks]\nrecall_on_prompt = true\noff = {everything}\n")
    for event, name in ANSWERING.items():
        result = hook(state_dir, event, stdin=payload(name))
        assert (result.code, result.out, result.err) == (0, "", ""), event
    assert store.store.get_session(HOST) is None and store.store.get_session(AGENT) is None
    assert not entry_file(store, "ci-cache").exists() and "compact" not in store.daily()
    write_config(state_dir, '[hooks]\noff = ["SubagentStart"]\n')
    assert hook(state_dir, "SubagentStart", stdin=payload("SubagentStart")).out == ""
    assert (
        "Deploys go through"
        in hook(state_dir, "SessionStart", stdin=payload("SessionStart-startup")).context
    )


# -- UserPromptSubmit: recall on the prompt ------------------------------------------------


PROMPT_PIECES = ['"', "(", ")", "*", "AND", "OR", "NOT", "NEAR", ":", "^", "-", "ci", "takes", "\0"]


# hooks.run in the test's own process arms the watchdog, which would end pytest itself on
# a slow machine: for those tests, a time budget no call reaches.
IN_PROCESS = "prompt_timeout_ms = 600000\n"


def recall_on(state_dir: Path, extra: str = "") -> None:
    write_config(state_dir, f"[hooks]\nrecall_on_prompt = true\n{extra}")


def prompted(state_dir: Path, prompt: str | None = None) -> Hooked:
    data = (
        payload("UserPromptSubmit")
        if prompt is None
        else payload("UserPromptSubmit", prompt=prompt)
    )
    return hook(state_dir, "UserPromptSubmit", stdin=data)


def test_user_prompt_submit_is_off_by_default(state_dir: Path, store: Memory) -> None:  # K2, S
    """The recorded prompt ("How long does the CI pipeline take...") would find the
    ci-duration entry, but nothing is injected until [hooks] recall_on_prompt is on."""
    result = prompted(state_dir)
    assert (result.code, result.out, result.err) == (0, "", "")
    write_config(state_dir, "[hooks]\nrecall_on_prompt = false\n")
    assert (prompted(state_dir).out, prompted(state_dir).err) == ("", "")


def test_user_prompt_submit_injects_the_hits_the_prompt_finds(  # K2, Q1, E4
    state_dir: Path, store: Memory
) -> None:
    """On: each hit on a line of its own, its kind and where to read it (a file's path and
    line for memory_get, a fact's id), then its text."""
    recall_on(state_dir)
    fact = store.add_fact("The CI pipeline caches wheels between runs", "learning")
    result = prompted(state_dir)
    assert (result.code, result.err) == (0, "")
    assert result.answer["hookEventName"] == "UserPromptSubmit"
    text = result.context
    assert text.startswith("# memdir: memory that may bear on this prompt")
    lines = text.splitlines()[1:]
    entry = [line for line in lines if "ci-duration" in line]
    assert entry and entry[0].startswith("- [global global/ci-duration.md line ")
    assert "About 12 minutes" in entry[0]
    assert f"- [fact #{fact.id} (learning)] The CI pipeline caches wheels between runs" in lines
    start = int(entry[0].split(" line ")[1].split("]")[0])  # memory_get reads it from there
    assert any(
        "About 12 minutes" in t
        for _, t in store.get("global/ci-duration.md", from_line=start).lines
    )
    assert len(lines) <= hooks.PROMPT_HITS and len(text) <= 2000


@pytest.mark.parametrize(
    "prompt",
    [
        "what is it that you do?",  # stopwords only
        "yes",
        "ok, thanks, go on please",
        "minutes",  # one word: not enough to call anything relevant
        "How many minutes until lunch?",  # one word in common with the entry
        "",
    ],
)
def test_user_prompt_submit_injects_nothing_irrelevant(  # K2
    state_dir: Path, store: Memory, prompt: str
) -> None:
    """The floor: a hit shares at least two of the prompt's words, or it is not shown."""
    recall_on(state_dir)
    result = prompted(state_dir, prompt)
    assert (result.code, result.out, result.err) == (0, "", "")


def test_user_prompt_submit_skips_what_hot_md_shows(
    state_dir: Path, store: Memory
) -> None:  # K2, E3
    """HOT.md is in the boot context already: a fact it repeats is not injected again."""
    recall_on(state_dir)
    store.add_fact("Deploys go through `make ship`, never by hand.", "convention")
    store.add_fact("Deploys of the docs go through the docs pipeline.", "convention")
    text = prompted(state_dir, "do deploys of the docs go through make ship?").context
    assert "docs pipeline" in text and "make ship" not in text


def test_user_prompt_submit_stays_within_its_budget(state_dir: Path, store: Memory) -> None:  # K2
    """Many long hits: at most PROMPT_HITS, each cut to a snippet, all within
    [hooks] prompt_budget_chars; a hit that does not fit is left out."""
    recall_on(state_dir, "prompt_budget_chars = 500\n")
    with store.bulk():
        for i in range(20):
            store.add_fact(f"Invoice export {i} runs nightly " + "and it is slow " * 60, "learning")
    text = prompted(state_dir, "why is the nightly invoice export slow?").context
    lines = text.splitlines()[1:]
    assert 1 <= len(lines) < hooks.PROMPT_HITS and len(text) <= 500
    assert all(len(line) <= hooks.SNIPPET_CHARS + 40 and line.endswith(" …") for line in lines)
    recall_on(state_dir)
    assert (
        len(prompted(state_dir, "why is the nightly invoice export slow?").context.splitlines())
        == 1 + hooks.PROMPT_HITS
    )


@pytest.mark.parametrize(
    "prompt",
    [
        'fix "ci-duration AND (minutes',
        "NOT ci OR AND minutes*",
        "ci NEAR(minutes takes) content:ci ^ci -- ** () \"\" ''",
        "ci\0minutes long\ttakes \u202e\U0001f600 é ı ﬁ",
        "how long ci takes " * 50_000,  # ~900 KB pasted in
        "x" * 100_000 + " ci minutes",
    ],
    ids=["quote", "operators", "fts-syntax", "control-unicode", "huge", "one-huge-word"],
)
def test_user_prompt_submit_takes_any_prompt(
    store: Memory, state_dir: Path, prompt: str
) -> None:  # K2, F4
    """A prompt is untrusted text, never query syntax: quotes, operators, FTS5 syntax, NUL,
    a huge paste all search as plain words; never a warning."""
    recall_on(state_dir, IN_PROCESS)
    reply = hooks.run("UserPromptSubmit", json.dumps(payload("UserPromptSubmit", prompt=prompt)))
    assert reply.warning is None
    if reply.out:
        assert "ci-duration" in json.loads(reply.out)["hookSpecificOutput"]["additionalContext"]


def test_prompt_words_are_plain_words_from_the_start() -> None:  # K2, F4
    assert hooks.prompt_words('Why "does" the CI (NOT) take* so LONG, ci?') == [
        "ci",
        "take",
        "long",
    ]
    words = hooks.prompt_words(" ".join(f"word{i}" for i in range(100)))
    assert words == [f"word{i}" for i in range(hooks.PROMPT_MAX_WORDS)]
    assert hooks.prompt_words("y" * 10 + " late" * 1000 + " " + "z" * hooks.PROMPT_SCAN_CHARS) == [
        "yyyyyyyyyy",
        "late",
    ]
    assert hooks.covered(["signed", "builds", "key"], "Release builds are signing with it") == 2
    assert hooks.covered(["tests", "testing"], "the tests pass") == 1  # one word, twice


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prompt=st.text(max_size=300) | st.lists(st.sampled_from(PROMPT_PIECES)).map(" ".join))
def test_user_prompt_submit_never_fails_on_any_text(  # K2, F4
    state_dir: Path, store: Memory, prompt: str
) -> None:
    """Any text at all, FTS5 syntax pieces included, is one reply and no warning."""
    recall_on(state_dir, IN_PROCESS)
    reply = hooks.run("UserPromptSubmit", json.dumps(payload("UserPromptSubmit", prompt=prompt)))
    assert reply.warning is None
    if reply.out:
        assert json.loads(reply.out)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"


def test_user_prompt_submit_gives_up_past_its_time_budget(  # K2
    state_dir: Path, store: Memory
) -> None:
    """Another writer holds the store for as long as the test says: the search's index
    sync (a hand-written file to index) waits for the lock, and at [hooks]
    prompt_timeout_ms the hook gives up with one line and exit 0, injecting nothing. (What
    a search found is noted without the lock: test_validity.py.)"""
    recall_on(state_dir, "prompt_timeout_ms = 150\n")
    store.add_fact("The CI pipeline takes longer on Mondays", "learning")
    store.search("CI")  # the index as it stands, so that only the new file needs a write
    entry = Path(store.path) / "global" / "ci-mondays.md"
    entry.write_text("---\ndescription: CI on Mondays\n---\nThe CI pipeline is slow.\n")
    with writer_lock_held(store.store):
        result = prompted(state_dir)
    assert (result.code, result.out) == (0, "")
    assert result.err.count("\n") == 1
    assert "gave up after 150 ms ([hooks] prompt_timeout_ms)" in result.err
