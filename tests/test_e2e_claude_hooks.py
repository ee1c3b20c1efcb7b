"""Whole headless Claude Code sessions in a project wired the way a new user wires one:
`memdir init`, then `memdir setup claude-code`, then `claude -p` against the scripted
stand-in (tests/standin.py). The hooks (SessionStart, UserPromptSubmit, SubagentStart,
PreToolUse, Stop, SubagentStop, PostCompact, SessionEnd) and the MCP server are the ones
setup registered, run by the real CLI.

Slow-marked, and in the xdist group "processes": each run is claude, memdir serve and a
memdir process per hook event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dbrows import rows as db_rows
from memdir import Memory
from standin import (
    ClaudeRun,
    StandIn,
    Text,
    ToolUse,
    host_env,
    message_text,
    run_claude,
)
from storeconfig import team_config

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

MEMDIR = os.path.join(os.path.dirname(sys.executable), "memdir")
HOT_LINE = "- The on-call rotation changes every Wednesday (hotline-7730)"
ENTRY = ("payments-runbook", "How refunds over 500 EUR are approved (index-6123)")
SEARCHABLE = "Release builds are signed with the team key (fact-ramble-88)"


@dataclass
class Wired:
    """A temp project after `memdir init` and `memdir setup claude-code`."""

    root: Path
    home: Path
    log: Path

    @property
    def state(self) -> Path:
        return self.root / ".memdir"

    def memdir(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The memdir CLI as the user runs it in the project."""
        return subprocess.run(
            [MEMDIR, *args],
            cwd=self.root,
            env=host_env(self.home),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def run(
        self,
        scripts: dict[str, list[Any]],
        prompt: str | Sequence[str],
        allowed: Sequence[str] = (),
        args: Sequence[str] = (),
    ) -> tuple[ClaudeRun, StandIn]:
        api = StandIn(scripts, self.log)
        with api:
            result = run_claude(api, self.root, self.home, prompt, list(allowed), args=args)
        assert result.code == 0, f"claude failed:\n{result.stderr}\n{api.dump()}"
        assert not api.overruns(), f"{api.overruns()}\n{api.dump()}"
        return result, api


def make_project(tmp_path: Path) -> Wired:
    """An empty project the user has opened in Claude Code once and trusted: what the
    trust dialog writes. Until then Claude Code ignores the permission rules of a
    project's .claude/settings.json (its hooks still run): `claude -p` in a folder never
    trusted asks before every memdir tool."""
    root, home = tmp_path / "project", tmp_path / "home"
    root.mkdir()
    (home / ".claude").mkdir(parents=True)
    trusted = {"projects": {str(root): {"hasTrustDialogAccepted": True}}}
    (home / ".claude" / ".claude.json").write_text(json.dumps(trusted))
    return Wired(root, home, tmp_path / "requests.jsonl")


def seed(wired: Wired) -> None:
    """`memdir init` in the project, then HOT.md, one global entry (a line of the
    MEMORY.md index), one fact to search for."""
    done = wired.memdir("init")
    assert done.returncode == 0, done.stderr
    team_config(wired.state)  # the URL where a team's user puts it: every memdir reaches it
    with Memory(str(wired.state)) as memory:
        memory.hot_set(HOT_LINE + "\n")
        memory.write_entry(ENTRY[0], ENTRY[1], "Two approvers, one from finance.")
        memory.add_fact(SEARCHABLE, "convention")


def store_rows(wired: Wired, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """The rows of the project's store, memory.db or its PostgreSQL scope (W1)."""
    with Memory(str(wired.state)) as memory:
        return db_rows(memory.store, sql, args)


def setup(wired: Wired, *args: str) -> subprocess.CompletedProcess[str]:
    done = wired.memdir("setup", "claude-code", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def wired(tmp_path: Path) -> Wired:
    project = make_project(tmp_path)
    seed(project)
    setup(project)
    return project


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last user message."""
    (last, *_) = [m for m in reversed(body["messages"]) if m["role"] == "user"]
    content = last["content"] if isinstance(last["content"], list) else []
    return [block for block in content if block.get("type") == "tool_result"]


def messages_text(body: dict[str, Any]) -> str:
    """What the conversation holds (hook output lands there), less the MCP server's
    instructions' copy of HOT.md (they carry it too, A2): what is left of HOT.md came
    from a hook."""
    text = "\n".join(message_text(m) for m in body["messages"])
    return text.replace(f"[Hot memory]\n{HOT_LINE}", "[Hot memory, from the MCP instructions]")


def test_session_start_boot_context_reaches_the_first_request(wired: Wired) -> None:
    """K2, E3, K1: after `memdir setup claude-code`, SessionStart's boot context (HOT.md
    first, the MEMORY.md index in a main session) is in the model's first request."""
    run, api = wired.run({"e2e-boot-44": [Text("Hi.")]}, "e2e-boot-44 say hi")
    (first,) = api.conversation("e2e-boot-44")
    seen = messages_text(first)
    assert f"## HOT.md\n{HOT_LINE}" in seen, api.dump()
    assert f"## MEMORY.md\n- {ENTRY[0]} — {ENTRY[1]}" in seen, api.dump()
    assert seen.index(HOT_LINE) < seen.index(ENTRY[1]), api.dump()


def test_subagent_write_is_refused_and_its_search_works(wired: Wired) -> None:
    """U2, K2: inside a subagent, memory_search runs and its hit reaches the subagent;
    memory_update is denied by the PreToolUse hook, the one-line reason reaches the
    subagent's model, and nothing is written; SubagentStart gives it the read-only slice."""
    launch = {
        "description": "check signing",
        "prompt": "e2e-sub-81 look up signing and note it",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    write = {
        "target": "fact",
        "action": "set",
        "category": "learning",
        "content": "Subagents may not write this (fact-denied-81)",
    }
    scripts = {
        "e2e-main-81": [ToolUse("Agent", launch), Text("Back from the subagent.")],
        "e2e-sub-81": [
            ToolUse("mcp__memdir__memory_search", {"query": "release builds signed"}),
            ToolUse("mcp__memdir__memory_update", write),
            Text("Searched; the write was refused."),
        ],
    }
    run, api = wired.run(scripts, "e2e-main-81 delegate", ["Agent"])
    first, after_search, after_write = api.conversation("e2e-sub-81")
    slice_ = messages_text(first)
    assert f"## HOT.md\n{HOT_LINE}" in slice_, api.dump()
    assert "memory is read-only in this subagent" in slice_, api.dump()
    assert ENTRY[1] not in slice_, api.dump()  # the slice, not the main session's boot
    (hit,) = tool_results(after_search)
    assert not hit.get("is_error"), api.dump()
    assert "fact-ramble-88" in message_text({"content": hit["content"]}), api.dump()
    (refused,) = tool_results(after_write)
    reason = message_text({"content": refused["content"]})
    assert refused.get("is_error"), api.dump()
    assert "memory_update was not run: memory is read-only in a subagent" in reason, reason
    assert "\n" not in reason.strip(), reason  # the one line the hook gave
    written = store_rows(
        wired, "SELECT count(*) FROM facts WHERE content LIKE ?", "%fact-denied-81%"
    )
    assert written == [(0,)]
    sessions = store_rows(wired, "SELECT surface, parent_id FROM sessions")
    # U1: the subagent's session is recorded under the host's session, its parent
    assert len(sessions) == 2 and set(sessions) == {
        ("claude-code", None),
        ("claude-code", run.session_id),
    }, sessions
    assert run.result["result"] == "Back from the subagent."


def test_session_end_records_the_host_session_with_counts(wired: Wired) -> None:
    """U3, K3, K2: a main-session write through MCP carries the host's session id, and
    SessionEnd records that session (surface claude-code) with what it wrote."""
    fact = "Hotfixes go through the release branch (fact-hotfix-29)"
    call = {"target": "fact", "action": "set", "category": "convention", "content": fact}
    scripts = {"e2e-end-29": [ToolUse("mcp__memdir__memory_update", call), Text("Noted.")]}
    run, api = wired.run(scripts, "e2e-end-29 remember the hotfix rule")
    listed = wired.memdir("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    sessions = {s["id"]: s for s in json.loads(listed.stdout)}
    # one session: the host's; the MCP server adopted it rather than starting its own
    assert list(sessions) == [run.session_id], (listed.stdout, api.dump())
    recorded = sessions[run.session_id]
    assert recorded["surface"] == "claude-code", recorded
    assert recorded["ended"], recorded
    assert recorded["counts"] == {"facts": 1}, recorded


USER_SETTINGS = {
    "env": {"USER_OWN_KEY": "kept"},
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo user-own-hook-5521"}]}]
    },
}
USER_MCP = {"mcpServers": {"other": {"command": "true", "args": []}}}


def test_setup_keeps_the_users_own_settings_and_remove_restores_them(tmp_path: Path) -> None:
    """K1: setup merges into the user's .claude/settings.json and .mcp.json: their own
    hook still runs beside memdir's (both reach the model), their keys and server stay; a
    second setup changes no byte; --remove gives back what they had."""
    project = make_project(tmp_path)
    seed(project)
    settings, mcp = project.root / ".claude" / "settings.json", project.root / ".mcp.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    mcp.write_text(json.dumps(USER_MCP, indent=2) + "\n")
    setup(project)
    merged = json.loads(settings.read_text())
    assert merged["env"] == USER_SETTINGS["env"]
    assert "Bash(ls:*)" in merged["permissions"]["allow"]
    assert json.loads(mcp.read_text())["mcpServers"]["other"] == USER_MCP["mcpServers"]["other"]
    before = settings.read_bytes(), mcp.read_bytes()
    setup(project)
    assert (settings.read_bytes(), mcp.read_bytes()) == before

    run, api = project.run({"e2e-keep-55": [Text("Hi.")]}, "e2e-keep-55 say hi")
    (first,) = api.conversation("e2e-keep-55")
    seen = messages_text(first)
    assert "user-own-hook-5521" in seen, api.dump()
    assert HOT_LINE in seen, api.dump()

    setup(project, "--remove")
    assert settings.read_text() == json.dumps(USER_SETTINGS, indent=2) + "\n"
    assert mcp.read_text() == json.dumps(USER_MCP, indent=2) + "\n"


def test_session_start_stays_within_the_hosts_cap_on_a_full_store(tmp_path: Path) -> None:
    """K2, E3: on a store whose boot context is over the budget (a full HOT.md, a long
    daily log, a long MEMORY.md index), what reaches the model from SessionStart is
    HOT.md whole and first, under Claude Code's 10,000-char cap on a hook's context (a
    longer one reaches the model as a 2 KB preview), and ends with the line naming what was
    left out, intact."""
    project = make_project(tmp_path)
    seed(project)
    hot = [
        f"- Standing rule {n:03}: keep the staging fixtures in sync (hot-bulk)" for n in range(70)
    ]
    with Memory(str(project.state)) as memory:
        memory.hot_set("\n".join([HOT_LINE, *hot]) + "\n")
        memory.daily_append("Spent the morning on the payments migration. " * 80)
        for n in range(120):
            memory.write_entry(
                f"runbook-{n:03}",
                f"Runbook {n:03}: how the nightly export of region {n} is checked and re-run",
                "Check the export log, then re-run the job.",
            )
    setup(project)
    run, api = project.run({"e2e-full-63": [Text("Hi.")]}, "e2e-full-63 say hi")
    (first,) = api.conversation("e2e-full-63")
    seen = messages_text(first)
    start = seen.index("SessionStart hook additional context: ")
    trailer = seen.index("memdir: left out to stay within the budget:", start)
    end = seen.index("\n", trailer)
    assert end - start <= 10_000, seen[start:end]
    shown = seen[start:end]
    assert shown.index(HOT_LINE) < shown.index(hot[-1]), shown[:2000]
    assert "## MEMORY.md" not in shown[: shown.index(hot[-1])], shown[:2000]
    left_out = seen[trailer:end]  # the index, last of the boot parts, did not fit: named
    assert "MEMORY.md" in left_out and "memory_get" in left_out, left_out


def test_user_scope_setup_wires_every_project(tmp_path: Path) -> None:
    """K1, K2: `memdir setup claude-code --scope user` writes only the user's Claude Code
    config; a session in a project never set up (and never trusted) gets the boot context
    from the user's hooks and writes through the user's server, allowed by the user's rule."""
    project = make_project(tmp_path)
    (project.home / ".claude" / ".claude.json").unlink()  # no trust: user rules need none
    seed(project)
    setup(project, "--scope", "user")
    assert not (project.root / ".claude").exists() and not (project.root / ".mcp.json").exists()
    fact = "Load tests run against the perf cluster (fact-user-scope-40)"
    call = {"target": "fact", "action": "set", "category": "convention", "content": fact}
    scripts = {"e2e-user-40": [ToolUse("mcp__memdir__memory_update", call), Text("Noted.")]}
    run, api = project.run(scripts, "e2e-user-40 remember the load-test rule")
    first, second = api.conversation("e2e-user-40")
    assert f"## HOT.md\n{HOT_LINE}" in messages_text(first), api.dump()
    (written,) = tool_results(second)
    assert not written.get("is_error"), message_text({"content": written["content"]})
    rows = store_rows(project, "SELECT session_id FROM facts WHERE content = ?", fact)
    assert rows == [(run.session_id,)], rows


def test_a_resumed_session_is_the_same_session_counted_once(wired: Wired) -> None:
    """U1, U3, K3: `claude -p --resume ID` continues the host's session: SessionStart
    (resume) opens the recorded session again, its new write carries the same id, and
    SessionEnd records one session with both writes counted."""
    facts = [
        "Backups are kept for 35 days (fact-resume-1)",
        "Restores are tested monthly (fact-resume-2)",
    ]
    calls = [
        {"target": "fact", "action": "set", "category": "convention", "content": f} for f in facts
    ]
    script = {
        "e2e-resume-17": [
            ToolUse("mcp__memdir__memory_update", calls[0]),
            Text("Noted the first."),
            ToolUse("mcp__memdir__memory_update", calls[1]),
            Text("Noted the second."),
        ]
    }
    first, _ = wired.run(script, "e2e-resume-17 remember the backup rule")
    second, api = wired.run(script, "and the restore rule", args=["--resume", first.session_id])
    assert second.session_id == first.session_id, api.dump()
    assert second.result["result"] == "Noted the second.", api.dump()
    # what the resumed run's write answered is the store's to say (below): Claude Code
    # 2.1.332 resends a resumed tool call as "[Tool use interrupted]", without its result
    owners = store_rows(
        wired, "SELECT content, session_id FROM facts WHERE content IN (?, ?) ORDER BY id", *facts
    )
    assert owners == [(fact, first.session_id) for fact in facts], owners
    listed = json.loads(wired.memdir("sessions", "--json").stdout)
    assert [(s["id"], s["counts"]) for s in listed] == [(first.session_id, {"facts": 2})], listed


def block(name: str, description: str, content: str) -> str:
    request = {"scope": "global", "name": name, "description": description, "content": content}
    return f"MEMDIR_MEMORIZE_BEGIN\n{json.dumps(request)}\nMEMDIR_MEMORIZE_END"


def test_a_marker_block_in_the_final_answer_becomes_an_entry_once(wired: Wired) -> None:
    """M1, M3, K2, U2: the main session's final answer carries a memorize block: the Stop
    hook writes the entry once, as the host's session, and says so to the user; the block a
    subagent put in its own last answer is dropped (read-only), and the main session's
    resumed run, which ends on the same answer again, writes nothing twice."""
    launch = {
        "description": "check caching",
        "prompt": "e2e-sub-63 look at the cache",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    kept = block("ci-cache", "CI caches pip wheels", "Keyed on requirements.txt (entry-cache-63).")
    main = f"CI now caches wheels.\n\n{kept}"
    dropped = block("sub-note", "from the subagent", "must not be written (entry-sub-63)")
    sub = f"Looked.\n{dropped}"
    scripts = {
        "e2e-main-63": [ToolUse("Agent", launch), Text(main)],
        "e2e-sub-63": [Text(sub)],
    }
    run, api = wired.run(scripts, "e2e-main-63 speed up CI", ["Agent"])
    entry = wired.state / "memory" / "global" / "ci-cache.md"
    assert "entry-cache-63" in entry.read_text(), api.dump()
    assert not (wired.state / "memory" / "global" / "sub-note.md").exists()
    said = [e for e in run.events if "memorized global ci-cache (created)" in json.dumps(e)]
    assert said, run.events  # the Stop hook's line reached the user's stream
    listed = json.loads(wired.memdir("sessions", "--json").stdout)
    main_session = [s for s in listed if s["id"] == run.session_id]
    assert [s["counts"] for s in main_session] == [{"entries": 1}], listed
    parents = store_rows(wired, "SELECT parent_id FROM sessions WHERE parent_id IS NOT NULL")
    assert parents == [(run.session_id,)]  # the subagent, under the host


def test_a_compaction_is_logged_and_reinjected(wired: Wired) -> None:
    """K2, E1, E3: `/compact` in a session: PostCompact logs the host's summary in today's
    log, and the next start of the session (resume) has it in front of the model."""
    summary = "<summary>The user wants faster CI (summary-compact-58).</summary>"
    script = {"e2e-compact-58": [Text("Sure."), Text(summary), Text("Back again.")]}
    first, _ = wired.run(script, "e2e-compact-58 hello")
    wired.run(script, "/compact", args=["--resume", first.session_id])
    log = wired.memdir("daily", "show")
    assert "summary-compact-58" in log.stdout, log.stdout + log.stderr
    assert f"compacted the context of session {first.session_id} (manual)" in log.stdout
    _, api = wired.run(script, "e2e-compact-58 again", args=["--resume", first.session_id])
    seen = "\n".join(messages_text(body) for body in api.conversation("e2e-compact-58"))
    assert "summary-compact-58" in seen, api.dump()


def test_writes_after_clear_carry_the_new_session(wired: Wired) -> None:
    """K3, U1, U3: `/clear` ends the host's session and starts another in the same process,
    whose MCP server lives on: its writes after the clear carry the new session (the
    SessionStart hook names it for the host process), not the ended one's id."""
    facts = ["Before the clear (fact-clear-1)", "After the clear (fact-clear-2)"]
    calls = [
        {"target": "fact", "action": "set", "category": "learning", "content": f} for f in facts
    ]
    scripts = {
        "e2e-clear-a": [ToolUse("mcp__memdir__memory_update", calls[0]), Text("Noted one.")],
        "e2e-clear-b": [ToolUse("mcp__memdir__memory_update", calls[1]), Text("Noted two.")],
    }
    run, api = wired.run(scripts, ["e2e-clear-a one", "/clear", "e2e-clear-b two"])
    (after,) = tool_results(api.conversation("e2e-clear-b")[1])
    assert not after.get("is_error"), api.dump()
    owners = store_rows(
        wired, "SELECT content, session_id FROM facts WHERE content IN (?, ?) ORDER BY id", *facts
    )
    first, second = (session for _, session in owners)
    assert [c for c, _ in owners] == facts and first != second, owners
    listed = {s["id"]: s for s in json.loads(wired.memdir("sessions", "--json").stdout)}
    assert listed[first]["counts"] == {"facts": 1} and listed[first]["ended"], listed
    assert listed[second]["counts"] == {"facts": 1} and listed[second]["ended"], listed
    inits = [e["session_id"] for e in run.events if e.get("subtype") == "init"]
    assert (inits[0], inits[-1]) == (first, second), inits


def test_prompt_recall_reaches_the_model_when_on_and_nothing_when_off(wired: Wired) -> None:
    """K2: UserPromptSubmit, registered by setup, is off by default: the model's first
    request holds nothing the prompt would recall. With `recall_on_prompt = true` in the
    project's config.toml (no second setup), the fact the prompt's words find reaches the
    model's first request as the hook's context: its kind, its id, its text."""
    prompt = "e2e-recall-{} how are the release builds signed?"
    run, api = wired.run({"e2e-recall-off": [Text("Hi.")]}, prompt.format("off"))
    (first,) = api.conversation("e2e-recall-off")
    seen = messages_text(first)
    assert HOT_LINE in seen, api.dump()  # the boot context came; the recall did not
    assert "fact-ramble-88" not in seen and "memory that may bear" not in seen, api.dump()

    config = wired.state / "config.toml"
    text = config.read_text()
    assert "# recall_on_prompt = false" in text  # the template `memdir init` wrote
    config.write_text(text.replace("# recall_on_prompt = false", "recall_on_prompt = true"))
    run, api = wired.run(
        {"e2e-recall-on": [Text("Signed with the team key.")]}, prompt.format("on")
    )
    (first,) = api.conversation("e2e-recall-on")
    seen = messages_text(first)
    with Memory(str(wired.state)) as memory:
        (fact,) = [h.id for h in memory.search("fact-ramble-88", kinds=["fact"])]
    recalled = (
        "UserPromptSubmit hook additional context: # memdir: memory that may bear on this "
        f"prompt (read more with memory_get PATH from LINE, find more with memory_search)\n"
        f"- [fact #{fact} (convention)] {SEARCHABLE}\n"
    )
    assert recalled in seen, api.dump()
    assert seen.count(SEARCHABLE) == 1 and HOT_LINE in seen, api.dump()
