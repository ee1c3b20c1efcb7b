"""Whole headless Codex sessions (`codex exec`) against the scripted Responses API
stand-in (tests/standin.py): the real Codex CLI (pinned in the Makefile, on PATH under
`make test`), wired by the real `memdir setup codex`, the real `memdir serve` and
`memdir hook` processes it starts, a real store. What the stand-in logs is what the model
would see; the store is read after the run.

Codex runs a project's .codex/config.toml only in a trusted project, and hooks only once
reviewed: the runs pass `--trust` (what a user answers once) and
`--dangerously-bypass-hook-trust` (the review, which needs Codex's interactive UI).

Each run is a few processes (codex, memdir serve, hooks): slow-marked, and in the xdist
group "processes", as the Claude Code runs are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dbrows import rows as db_rows
from memdir import Memory
from memdir.hooks import READ_ONLY_LINE
from standin import CodexRun, StandIn, Text, ToolUse, codex_provider, item_text, run_codex
from storeconfig import team_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

MEMDIR = os.path.join(os.path.dirname(sys.executable), "memdir")
HOT_LINE = "- The staging database is reset every Monday at 06:00 (hotline-5521)"
TRUSTED = ["--trust", "--dangerously-bypass-hook-trust"]


@dataclass
class Project:
    """A temp git project with its own home (and CODEX_HOME) and store."""

    root: Path
    home: Path
    state: Path
    log: Path

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """The rows of the project's store, memory.db or its PostgreSQL scope (W1)."""
        with Memory(str(self.state)) as memory:
            return db_rows(memory.store, sql, args)

    def setup(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`memdir setup codex ARGS` as a user runs it, in the project."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMDIR_", "CODEX_"))}
        env.update(HOME=str(self.home), MEMDIR_STATE_DIR=str(self.state))
        return subprocess.run(
            [MEMDIR, "setup", "codex", *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root, home, state = tmp_path / "project", tmp_path / "home", tmp_path / "memdir-state"
    for folder in (root / ".git", home / ".codex", state):
        folder.mkdir(parents=True)
    team_config(state)  # Codex starts memdir with MEMDIR_STATE_DIR alone: the URL is here
    with Memory(str(state)) as memory:
        memory.hot_set(HOT_LINE + "\n")
        memory.add_fact("Release builds are signed with the team key (fact-ramble-61)", "decision")
    return Project(root, home, state, tmp_path / "requests.jsonl")


@pytest.fixture
def session(project: Project) -> Iterator[Any]:
    """run(scripts, prompt) -> (CodexRun, StandIn): one `codex exec` in the project, the
    user's config.toml sending the model's requests to the stand-in."""

    def run(
        scripts: dict[str, list[Any]], prompt: str, args: Sequence[str] = ()
    ) -> tuple[CodexRun, StandIn]:
        api = StandIn(scripts, project.log)
        user_config = project.codex_home / "config.toml"
        if not user_config.exists():
            user_config.write_text(codex_provider(api.url))
        else:  # a second run: the same provider, on this stand-in's port
            text = user_config.read_text()
            start = text.index('base_url = "') + len('base_url = "')
            end = text.index('"', start)
            user_config.write_text(text[:start] + f"{api.url}/v1" + text[end:])
        with api:
            result = run_codex(
                api,
                project.root,
                project.home,
                prompt,
                [*TRUSTED, *args],
                extra_env={"MEMDIR_STATE_DIR": str(project.state)},
            )
        assert result.code == 0, f"codex failed:\n{result.stderr}\n{api.dump()}"
        assert not api.overruns(), f"{api.overruns()}\n{api.dump()}"
        return result, api

    yield run


def seen(body: dict[str, Any]) -> str:
    """All the text a request puts in front of the model: every input item and the tools."""
    return "\n".join(
        [*(item_text(i) for i in body["input"]), body.get("instructions") or ""]
        + [json.dumps(body.get("tools"))]
    )


def injected(body: dict[str, Any]) -> list[str]:
    """The boot contexts the SessionStart hook put in a request (a message of its own)."""
    texts = [item_text(i) for i in body["input"] if i.get("type") == "message"]
    return [t for t in texts if t.startswith("# memdir: memory from earlier sessions")]


def test_setup_wires_memdir_and_the_boot_context_reaches_the_model(
    session: Any, project: Project
) -> None:
    """K1, K2, E3, U1, U3: after `memdir setup codex`, a Codex session's first request
    carries HOT.md (SessionStart hook), AGENTS.md's memdir section and memdir's tools; the
    session is recorded with Codex's id and surface, and its end (SessionEnd hook)."""
    done = project.setup()
    assert done.returncode == 0, done.stderr
    run, api = session({"cx-boot-31": [Text("Hello.")]}, "cx-boot-31 say hello")
    assert [m["text"] for m in run.items("agent_message")] == ["Hello."]
    (first,) = api.conversation("cx-boot-31")
    (boot,) = injected(first)
    assert HOT_LINE in boot, api.dump()
    assert "## Memory (memdir)" in seen(first), api.dump()  # AGENTS.md
    names = [t.get("name") for t in first["tools"]]
    assert "mcp__memdir" in names, names
    (space,) = [t for t in first["tools"] if t.get("name") == "mcp__memdir"]
    tools = {t["name"] for t in space["tools"]}
    assert {"memory_search", "memory_update", "memorize"} <= tools, tools
    rows = project.rows("SELECT surface, ended FROM sessions WHERE id = ?", run.session_id)
    assert len(rows) == 1, project.rows("SELECT * FROM sessions")
    surface, ended = rows[0]
    assert surface == "codex"
    assert ended is not None  # SessionEnd recorded it


def test_a_write_through_mcp_lands_with_the_codex_session(session: Any, project: Project) -> None:
    """A2, U1, K3: the model's call of memory_update (in Codex's mcp__memdir namespace)
    sets a fact in the store; its result reaches the model in the next request; the fact
    carries Codex's session id (the server takes it from the call's _meta)."""
    assert project.setup().returncode == 0
    fact = "Deploys to production need two approvals (fact-quorum-44)"
    call = {"target": "fact", "action": "set", "category": "decision", "content": fact}
    scripts = {"cx-write-57": [ToolUse("mcp__memdir__memory_update", call), Text("Noted.")]}
    run, api = session(scripts, "cx-write-57 remember the deploy rule")
    rows = project.rows("SELECT id, session_id, surface FROM facts WHERE content = ?", fact)
    assert len(rows) == 1, api.dump()
    fact_id, session_id, surface = rows[0]
    assert (session_id, surface) == (run.session_id, "codex"), (rows, run.session_id)
    first, second = api.conversation("cx-write-57")
    (output,) = [i for i in second["input"] if i.get("type") == "function_call_output"]
    shown = item_text(output)
    assert f'"id":{fact_id}' in shown.replace(" ", ""), shown
    assert fact in shown
    (called,) = run.items("mcp_tool_call")
    assert (called["server"], called["tool"], called["status"]) == (
        "memdir",
        "memory_update",
        "completed",
    )


def test_user_scope_setup_and_remove_keep_the_users_config(session: Any, project: Project) -> None:
    """K1: `--scope user` adds memdir to $CODEX_HOME/config.toml beside the user's own
    provider, server and comments, and its section to $CODEX_HOME/AGENTS.md; the session
    gets both; `--remove` gives the file back byte for byte."""
    own = (
        "# my Codex config\n"
        + codex_provider("http://127.0.0.1:9")  # the session points it at its stand-in
        + '\n[mcp_servers.docs]  # the docs server\ncommand = "docs-mcp"\nargs = ["--port", "0"]\n'
    )
    user_config = project.codex_home / "config.toml"
    user_config.write_text(own)
    done = project.setup("--scope", "user")
    assert done.returncode == 0, done.stderr
    assert f"{user_config}: updated" in done.stdout
    assert user_config.read_text().startswith(own)
    run, api = session({"cx-user-12": [Text("Hi.")]}, "cx-user-12 hello")
    (first,) = api.conversation("cx-user-12")
    (boot,) = injected(first)
    assert HOT_LINE in boot, api.dump()
    assert "## Memory (memdir)" in seen(first), api.dump()  # $CODEX_HOME/AGENTS.md
    removed = project.setup("--scope", "user", "--remove")
    assert removed.returncode == 0, removed.stderr
    after = user_config.read_text()
    start = after.index('base_url = "') + len('base_url = "')
    assert after[:start] == own[:start]
    assert after[after.index('"', start) :] == own[own.index('"', start) :]
    assert not (project.codex_home / "AGENTS.md").exists()


def spawned(body: Mapping[str, Any]) -> dict[str, Any]:
    """wait_agent's input: the agent spawn_agent started, as its output named it."""
    outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
    return {"targets": [json.loads(item_text(outputs[-1]))["agent_id"]], "timeout_ms": 60000}


def test_a_subagent_reads_memory_and_its_write_is_refused(session: Any, project: Project) -> None:
    """U2, K2, K3: a subagent Codex spawns gets the read-only slice at its start
    (SubagentStart), is recorded under its parent, its memory_update is denied before it
    runs (PreToolUse) with the reason in front of it, and its memory_search works."""
    assert project.setup().returncode == 0
    fact = "Subagents may write memory (fact-rogue-93)"
    write = {"target": "fact", "action": "set", "category": "decision", "content": fact}
    scripts = {
        "cx-main-93": [
            ToolUse("multi_agent_v1__spawn_agent", {"message": "cx-sub-93 how are builds signed"}),
            ToolUse("multi_agent_v1__wait_agent", spawned),
            Text("The subagent answered."),
        ],
        "cx-sub-93": [
            ToolUse("mcp__memdir__memory_update", write),
            ToolUse("mcp__memdir__memory_search", {"query": "release builds signed"}),
            Text("They are signed with the team key."),
        ],
    }
    run, api = session(scripts, "cx-main-93 ask a subagent")
    sub = api.conversation("cx-sub-93")
    assert len(sub) == 3, api.dump()
    start = seen(sub[0])
    assert READ_ONLY_LINE in start and HOT_LINE in start, api.dump()
    assert injected(sub[0]) == []  # not the whole boot
    denied, found = (
        [item_text(i) for i in body["input"] if i.get("type") == "function_call_output"][-1]
        for body in sub[1:]
    )
    assert "memory_update was not run: memory is read-only in a subagent" in denied, denied
    assert "fact-ramble-61" in found, found
    assert project.rows("SELECT id FROM facts WHERE content = ?", fact) == []
    children = project.rows("SELECT id, surface FROM sessions WHERE parent_id = ?", run.session_id)
    assert [surface for _, surface in children] == ["codex"], project.rows("SELECT * FROM sessions")
    main = api.conversation("cx-main-93")
    assert len(main) == 3, api.dump()
    assert "signed with the team key" in item_text(main[2]["input"][-1]), api.dump()


def test_a_resumed_session_is_opened_again_and_gets_memory_again(
    session: Any, project: Project
) -> None:
    """K2, K3, U3: `codex exec resume` is the same session: SessionStart (resume) opens
    its record again and injects the boot context again (what changed since included);
    what the resumed run writes carries the session's id, and SessionEnd ends it again
    with the counts of what it wrote."""
    assert project.setup().returncode == 0
    fact = "Resumed sessions keep their id (fact-again-77)"
    write = {"target": "fact", "action": "set", "category": "decision", "content": fact}
    script = {
        "cx-resume-77": [Text("First."), ToolUse("mcp__memdir__memory_update", write), Text("2")]
    }
    first, _ = session(script, "cx-resume-77 one")
    with Memory(str(project.state)) as memory:
        before = memory.store.get_session(first.session_id)
        memory.hot_set(HOT_LINE + "\n- Added between the two runs (hotline-7788)\n")
    assert before is not None and before.ended is not None and not any(before.counts.values())
    again, api = session(script, "cx-resume-77 two", ["resume", first.session_id])
    assert again.session_id == first.session_id
    assert [m["text"] for m in again.items("agent_message")] == ["2"]
    first_request = api.conversation("cx-resume-77")[0]
    assert "hotline-7788" in injected(first_request)[-1], api.dump()
    rows = project.rows("SELECT session_id FROM facts WHERE content = ?", fact)
    assert rows == [(first.session_id,)]
    with Memory(str(project.state)) as memory:
        after = memory.store.get_session(first.session_id)
    assert after is not None and after.ended is not None
    assert after.counts.get("facts") == 1, after.counts


def test_a_marker_block_in_the_final_answer_becomes_an_entry_once(
    session: Any, project: Project
) -> None:
    """M1, M3, K2, U2: the Stop hook applies the memorize block of Codex's final answer as
    Codex's session; a subagent's block is dropped (SubagentStop); prompt recall, once
    turned on, puts the matching fact in front of the model (UserPromptSubmit)."""
    assert project.setup().returncode == 0
    write_config(project.state, "[hooks]\nrecall_on_prompt = true\n")
    request = {
        "scope": "global",
        "name": "signing-keys",
        "description": "Who holds the release signing key",
        "content": "The team key lives in the release vault (entry-vault-38).",
    }
    kept = f"Done.\nMEMDIR_MEMORIZE_BEGIN\n{json.dumps(request)}\nMEMDIR_MEMORIZE_END\n"
    dropped = kept.replace("signing-keys", "sub-signing").replace("entry-vault", "entry-sub")
    scripts = {
        "cx-mark-38": [
            ToolUse("multi_agent_v1__spawn_agent", {"message": "cx-subm-38 check the keys"}),
            ToolUse("multi_agent_v1__wait_agent", spawned),
            Text(kept),
        ],
        "cx-subm-38": [Text(dropped)],
    }
    run, api = session(scripts, "cx-mark-38 how are release builds signed")
    (first,) = api.conversation("cx-mark-38")[:1]
    assert "fact-ramble-61" in seen(first), api.dump()  # recalled for the prompt
    entry = project.state / "memory" / "global" / "signing-keys.md"
    assert "entry-vault-38" in entry.read_text(), api.dump()
    assert not (project.state / "memory" / "global" / "sub-signing.md").exists()
    with Memory(str(project.state)) as memory:
        (recorded,) = [s for s in memory.sessions() if s.id == run.session_id]
    assert (recorded.surface, recorded.counts) == ("codex", {"entries": 1}), recorded
