"""K3, U1, U2 in `memdir serve` for Codex: Codex starts its MCP servers with no session in
their environment and names the session in each tools/call's `_meta` instead; these are
the `_meta` Codex 0.171.0 sent (tests/host_payloads/codex-0.171.0/), on a real server
process, through the SDK's client; what happened is read from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbrows import rows as db_rows
from memdir import Memory
from test_mcp import call, stdio_client

PAYLOADS = Path(__file__).parent / "host_payloads" / "codex-0.171.0"
FACT = {"target": "fact", "action": "set", "category": "decision"}


def facts(state_dir: Path) -> dict[str, tuple[str, str]]:
    """Every fact's content, with the session and surface it was written as."""
    with Memory(str(state_dir)) as mem:
        rows = db_rows(mem.store, "SELECT content, session_id, surface FROM facts")
    return {content: (session, surface) for content, session, surface in rows}


def meta(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"tools-call-meta-{name}.json").read_text())
    return data


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_call_naming_codexs_session_is_written_as_that_session(state_dir: Path) -> None:
    """The server's own session ends at the first call that names Codex's; from then on
    every write carries Codex's session id with surface codex (U1: adopted, not refused)."""
    given = meta("main")
    host = given["x-codex-turn-metadata"]["session_id"]
    async with stdio_client(state_dir) as client:
        first = await client.call_tool(
            "memory_update", {**FACT, "content": "Deploys need two approvals"}, meta=given
        )
        assert not first.is_error, first
        later = await client.call_tool(
            "memory_update", {**FACT, "content": "Releases are cut on Tuesdays"}, meta=given
        )
        assert not later.is_error, later
    assert facts(state_dir) == {
        "Deploys need two approvals": (host, "codex"),
        "Releases are cut on Tuesdays": (host, "codex"),
    }
    with Memory() as memory:
        sessions = {s.surface: s for s in memory.sessions()}
    assert set(sessions) == {"codex", "mcp"}
    assert sessions["codex"].id == host and sessions["codex"].ended is None  # SessionEnd's job
    assert sessions["mcp"].ended is not None and not any(sessions["mcp"].counts.values())


@pytest.mark.anyio
async def test_a_subagents_server_is_read_only_under_its_parent(state_dir: Path) -> None:
    """U2: in a subagent Codex spawned, _meta names the subagent's thread and its parent:
    the server acts as that subagent, so a write is refused and a search works."""
    given = meta("subagent")
    turn = given["x-codex-turn-metadata"]
    with Memory() as memory:
        memory.add_fact("Release builds are signed with the team key", "decision")
    async with stdio_client(state_dir) as client:
        hits = await client.call_tool("memory_search", {"query": "signed"}, meta=given)
        assert not hits.is_error and "team key" in hits.content[0].text  # type: ignore[union-attr]
        result = await client.call_tool(
            "memory_update", {**FACT, "content": "Subagents may write"}, meta=given
        )
        assert result.is_error is True
        assert "read-only" in result.content[0].text  # type: ignore[union-attr]
    assert list(facts(state_dir)) == ["Release builds are signed with the team key"]
    with Memory() as memory:
        child = memory.store.get_session(turn["thread_id"])
    assert child is not None
    assert (child.surface, child.parent_id) == ("codex", turn["parent_thread_id"])


@pytest.mark.anyio
async def test_a_session_given_to_the_server_is_kept_whatever_meta_says(state_dir: Path) -> None:
    """K3: --session (or MEMDIR_SESSION_ID) wins; Codex's _meta changes nothing then."""
    with Memory() as memory:
        mine = memory.start_session("cli")
    async with stdio_client(state_dir, "--session", mine.id) as client:
        await call(client, "memory_update", {**FACT, "content": "Ours"})
        done = await client.call_tool(
            "memory_update", {**FACT, "content": "Still ours"}, meta=meta("main")
        )
        assert not done.is_error, done
    assert {session for session, _ in facts(state_dir).values()} == {mine.id}
    with Memory() as memory:
        assert [s.id for s in memory.sessions()] == [mine.id]
