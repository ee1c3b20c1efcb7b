"""Whole headless Claude Code sessions against the scripted Messages API stand-in
(tests/standin.py): the real CLI (pinned in the Makefile, on PATH under `make test`), the
real `memdir serve` it starts from the project's `.mcp.json`, a real store. What the
stand-in logs is what the model would see; the store is read after the run.

Each run is a few processes (claude, memdir serve, hooks): slow-marked, and in the xdist
group "processes" so two runs never fight for the two cores of a loaded machine.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dbrows import rows as db_rows
from memdir import Memory
from standin import ClaudeRun, StandIn, Text, ToolUse, message_text, run_claude, system_text
from storeconfig import team_config

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

MEMDIR = os.path.join(os.path.dirname(sys.executable), "memdir")
HOT_LINE = "- The staging database is reset every Monday at 06:00 (hotline-4417)"
MEMDIR_TOOLS = "mcp__memdir"


@dataclass
class Project:
    """A temp project wired to memdir by hand (.mcp.json), with its own home and store."""

    root: Path
    home: Path
    state: Path
    log: Path

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """The rows of the project's store, memory.db or its PostgreSQL scope (W1)."""
        with Memory(str(self.state)) as memory:
            return db_rows(memory.store, sql, args)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root, home, state = tmp_path / "project", tmp_path / "home", tmp_path / "memdir-state"
    for folder in (root, home, state):
        folder.mkdir()
    team_config(state)  # the host starts `memdir serve` with MEMDIR_STATE_DIR alone
    with Memory(str(state)) as memory:
        memory.hot_set(HOT_LINE + "\n")
        memory.add_fact(
            "Release builds are signed with the team key (fact-ramble-88)", "convention"
        )
    server = {"command": MEMDIR, "args": ["serve"], "env": {"MEMDIR_STATE_DIR": str(state)}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"memdir": server}}, indent=2))
    return Project(root, home, state, tmp_path / "requests.jsonl")


@pytest.fixture
def session(project: Project) -> Iterator[Any]:
    """run(scripts, prompt, allowed) -> (ClaudeRun, StandIn): one headless session."""
    servers: list[StandIn] = []

    def run(
        scripts: dict[str, list[Any]], prompt: str, allowed: list[str]
    ) -> tuple[ClaudeRun, StandIn]:
        api = StandIn(scripts, project.log)
        servers.append(api)
        with api:
            result = run_claude(api, project.root, project.home, prompt, allowed)
        assert result.code == 0, f"claude failed:\n{result.stderr}\n{api.dump()}"
        assert not api.overruns(), f"{api.overruns()}\n{api.dump()}"
        return result, api

    yield run


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last user message (the host may put system
    messages after it)."""
    (last, *_) = [m for m in reversed(body["messages"]) if m["role"] == "user"]
    content = last["content"] if isinstance(last["content"], list) else []
    return [block for block in content if block.get("type") == "tool_result"]


def everything(body: dict[str, Any]) -> str:
    """All the text a request puts in front of the model: system, messages, tools."""
    return "\n".join(
        [system_text(body), *(message_text(m) for m in body["messages"]), json.dumps(body["tools"])]
    )


def test_memdir_instructions_and_hot_memory_reach_the_model(session: Any) -> None:
    """A2, K1: a project's `.mcp.json` server loads in `-p` mode; its instructions, with
    HOT.md, and its tools are in the model's first request."""
    run, api = session({"e2e-boot-31": [Text("Hello.")]}, "e2e-boot-31 say hello", [MEMDIR_TOOLS])
    assert run.result["result"] == "Hello."
    (first,) = api.conversation("e2e-boot-31")
    seen = everything(first)
    assert "memdir is your long-term memory" in seen, api.dump()
    assert HOT_LINE in seen, api.dump()
    for tool in ("memory_search", "memory_update", "memorize"):
        assert f"mcp__memdir__{tool}" in seen, api.dump()


def test_main_session_write_lands_through_mcp_with_the_host_session(
    session: Any, project: Project
) -> None:
    """A2, U1, K3: the model's tool_use of memory_update sets a fact in the store, its
    structured result reaches the model in the next request, and the fact carries the
    host's session id (the server takes CLAUDE_CODE_SESSION_ID from its environment)."""
    fact = "Deploys to production need two approvals (fact-quorum-12)"
    call = {"target": "fact", "action": "set", "category": "decision", "content": fact}
    scripts = {
        "e2e-write-57": [ToolUse("mcp__memdir__memory_update", call), Text("Noted.")],
    }
    run, api = session(scripts, "e2e-write-57 remember the deploy rule", [MEMDIR_TOOLS])
    rows = project.rows("SELECT id, session_id, surface FROM facts WHERE content = ?", fact)
    assert len(rows) == 1, api.dump()
    fact_id, session_id, surface = rows[0]
    first, second = api.conversation("e2e-write-57")
    (result,) = tool_results(second)
    assert not result.get("is_error"), api.dump()
    shown = json.loads(message_text({"content": result["content"]}))
    assert shown["fact"]["id"] == fact_id, shown
    assert shown["fact"]["content"] == fact
    assert (session_id, surface) == (run.session_id, "claude-code"), (rows, run.session_id)


def test_subagent_searches_memory_through_the_agent_tool(session: Any, project: Project) -> None:
    """U2, A2: a subagent launched through the Agent tool has its own conversation; its
    memory_search runs and the hit reaches it, and the main conversation gets the
    subagent's answer."""
    launch = {
        "description": "look up signing",
        "prompt": "e2e-sub-93 find how release builds are signed",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    scripts = {
        "e2e-main-93": [ToolUse("Agent", launch), Text("The subagent answered.")],
        "e2e-sub-93": [
            ToolUse("mcp__memdir__memory_search", {"query": "release builds signed"}),
            Text("They are signed with the team key."),
        ],
    }
    run, api = session(scripts, "e2e-main-93 ask a subagent", ["Agent", MEMDIR_TOOLS])
    sub = api.conversation("e2e-sub-93")
    assert len(sub) == 2, api.dump()
    (hit,) = tool_results(sub[1])
    assert not hit.get("is_error"), api.dump()
    assert "fact-ramble-88" in message_text({"content": hit["content"]}), api.dump()
    main = api.conversation("e2e-main-93")
    assert len(main) == 2, api.dump()
    (answer,) = tool_results(main[1])
    assert "signed with the team key" in message_text({"content": answer["content"]}), api.dump()
    assert run.result["result"] == "The subagent answered."
