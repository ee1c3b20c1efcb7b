"""End-to-end tests of the MCP server (A1, A2, U2, U3, H1) through the official `mcp` SDK
client: `memdir serve` runs as a real child process (stdio, or streamable HTTP on loopback),
and what the tools did is checked afterwards on disk through `memdir.Memory`."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from memdir import Memory
from memdir.testing import FixedClock, cli_command, cli_env, free_port
from memdir.tools import tool_schemas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]  # real server processes

CALL_TIMEOUT = 20  # seconds for any one exchange with a server: a hang fails, never blocks

# U2: a subagent is offered the read-only tools; everyone else all of them (A1)
ALL_TOOLS = [
    "memory_search",
    "memory_get",
    "memory_recall",
    "memory_update",
    "procedure_write",
    "daily_append",
    "memorize",
]
READ_ONLY_TOOLS = ["memory_search", "memory_get", "memory_recall"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stdio_client(
    state_dir: Path, *args: str, env: dict[str, str] | None = None, mode: str = "auto"
) -> Client:
    """The SDK client, starting `memdir serve ARGS` itself over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memdir", "serve", *args],
        env=cli_env(str(state_dir), env),
    )
    return Client(params, mode=mode, read_timeout_seconds=CALL_TIMEOUT)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; its text content is the JSON of its structured content."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    assert json.loads(text) == result.structured_content
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail; return the message the client received."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is True, result
    assert len(result.content) == 1 and result.content[0].type == "text"
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert "Error executing tool" not in text
    assert text.strip() and "\n" not in text.strip() and "Traceback" not in text
    return text


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], why: Callable[[], str], timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode} before listening:\n{why()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(
        f"the server did not accept connections on 127.0.0.1:{port} in {timeout} s:\n{why()}"
    )


# -- stdio: every tool for real ----------------------------------------------------------


@pytest.mark.anyio
async def test_stdio_serves_the_tools_and_their_effects_reach_the_store(  # A1, A2, U3
    state_dir: Path,
) -> None:
    async with stdio_client(state_dir) as client:
        listed = (await client.list_tools()).tools
        assert [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in listed
        ] == tool_schemas()
        assert [t.name for t in listed] == ALL_TOOLS
        assert {t.name: t.annotations.read_only_hint for t in listed if t.annotations} == {
            "memory_search": True,
            "memory_get": True,
            "memory_recall": True,
            "memory_update": False,
            "procedure_write": False,
            "daily_append": False,
            "memorize": False,
        }

        tea = (
            await call(
                client,
                "memory_update",
                {
                    "target": "fact",
                    "action": "set",
                    "category": "preference",
                    "content": "The user drinks black tea in the morning",
                },
            )
        )["fact"]
        rsync = (
            await call(
                client,
                "memory_update",
                {
                    "category": "convention",
                    "content": "Backups are copied with rsync to the nas",
                },
            )
        )["fact"]
        green = (
            await call(
                client,
                "memory_update",
                {
                    "action": "supersede",
                    "supersedes": tea["id"],
                    "content": "The user switched to green tea in the morning",
                },
            )
        )["fact"]
        assert green["supersedes"] == tea["id"] and green["category"] == "preference"
        removed = await call(client, "memory_update", {"action": "remove", "id": rsync["id"]})
        assert removed["fact"]["status"] == "removed"
        hot = (
            await call(
                client,
                "memory_update",
                {
                    "target": "hot",
                    "action": "append",
                    "content": "User: Ada, timezone Europe/Paris",
                },
            )
        )["hot"]
        assert hot["chars"] > 0 and hot["cap"] == 5250
        procedure = (
            await call(
                client,
                "procedure_write",
                {
                    "name": "deploy-staging",
                    "content": (
                        "---\ndescription: ship to staging\n---\n1. make deploy ENV=staging\n"
                    ),
                },
            )
        )["procedure"]
        assert procedure["name"] == "deploy-staging"

        hits = (await call(client, "memory_search", {"query": "tea morning"}))["hits"]
        assert [(h["kind"], h["id"]) for h in hits] == [("fact", green["id"])]  # old one hidden
        assert hits[0]["content"] == "The user switched to green tea in the morning"
        hits = (await call(client, "memory_search", {"query": "staging"}))["hits"]
        assert [h["kind"] for h in hits] == ["procedure"]
        assert "deploy-staging" in hits[0]["path"]
        assert (await call(client, "memory_search", {"query": "rsync"}))["hits"] == []
        only = await call(client, "memory_search", {"query": "tea", "category": "convention"})
        assert only["hits"] == []

    with Memory() as memory:
        old, new = memory.get_fact(tea["id"]), memory.get_fact(green["id"])
        assert (old.status, old.superseded_by) == ("superseded", green["id"])
        assert (new.status, new.content) == (
            "active",
            "The user switched to green tea in the morning",
        )
        assert memory.get_fact(rsync["id"]).status == "removed"
        assert [f.id for f in memory.fact_history(green["id"])] == [tea["id"], green["id"]]
        hot_file = Path(memory.path, "HOT.md")
        assert "User: Ada, timezone Europe/Paris" in hot_file.read_text(encoding="utf-8")
        proc_file = Path(memory.path, "procedures", "deploy-staging.md")
        assert "make deploy ENV=staging" in proc_file.read_text(encoding="utf-8")
        assert memory.procedure("deploy-staging").description == "ship to staging"

        # The server ran as its own top-level session of surface mcp (U3), recorded when the
        # client went away, and the facts carry it as provenance (F5).
        [session] = memory.sessions()
        assert session.surface == "mcp" and session.parent_id is None
        assert session.ended is not None
        assert session.counts == {"facts": 3, "hot": 1, "procedures": 1}
        assert (new.session_id, new.surface) == (session.id, "mcp")


# -- failed calls ------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026 discovery, and the old handshake
async def test_failed_call_is_a_tool_error_with_our_message(  # A2
    state_dir: Path,
    mode: str,
) -> None:
    async with stdio_client(state_dir, mode=mode) as client:
        text = await call_error(
            client,
            "memory_update",
            {
                "category": "gossip",
                "content": "Bob likes cats",
            },
        )
        assert "'category' must be one of preference, convention, decision, learning" in text
        assert "'gossip'" in text

        text = await call_error(client, "procedure_write", {"name": "Bad_Name", "content": "x"})
        assert "bad procedure name 'Bad_Name'" in text and "kebab-case" in text

        text = await call_error(client, "memory_search", {"query": "a AND"})
        assert "AND" in text and "sqlite" not in text.lower() and "fts5" not in text.lower()

        text = await call_error(client, "memory_search", {"query": "tea", "colour": "red"})
        assert "memory_search has no argument 'colour'" in text

        text = await call_error(
            client,
            "memory_update",
            {
                "action": "supersede",
                "supersedes": 999,
                "content": "x",
            },
        )
        assert "no fact with id 999" in text

        text = await call_error(client, "memory_delete_everything", {})
        assert "unknown tool 'memory_delete_everything'" in text

        # The server is still fine after all that, and none of it was stored.
        assert (await call(client, "memory_search", {"query": "cats"}))["hits"] == []

    with Memory() as memory:
        assert memory.procedures() == []
        assert not Path(memory.path, "procedures", "Bad_Name.md").exists()
        [session] = memory.sessions()
        assert session.counts == {}


# -- subagent sessions (U2) --------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("given_by", ["env", "flag"])
async def test_subagent_server_is_read_only(  # U2, U4, A2
    state_dir: Path,
    given_by: str,
) -> None:
    with Memory() as memory:
        parent = memory.start_session()
        child = memory.start_session(parent=parent.id)
        memory.add_fact("The user drinks green tea", "preference")
    if given_by == "env":
        client = stdio_client(state_dir, env={"MEMDIR_SESSION_ID": child.id})
    else:
        client = stdio_client(state_dir, "--session", child.id)

    async with client:
        assert [t.name for t in (await client.list_tools()).tools] == READ_ONLY_TOOLS
        assert [t.input_schema for t in (await client.list_tools()).tools] == [
            s["input_schema"] for s in tool_schemas(read_only=True)
        ]

        text = await call_error(
            client,
            "memory_update",
            {
                "category": "preference",
                "content": "The user drinks coffee",
            },
        )
        assert "read-only subagent session" in text
        text = await call_error(
            client,
            "memory_update",
            {
                "target": "hot",
                "action": "append",
                "content": "User: Ada",
            },
        )
        assert "read-only subagent session" in text
        text = await call_error(client, "procedure_write", {"name": "deploy", "content": "x"})
        assert "read-only subagent session" in text

        hits = (await call(client, "memory_search", {"query": "tea"}))["hits"]  # reading works
        assert [h["content"] for h in hits] == ["The user drinks green tea"]

    with Memory() as memory:  # nothing was written (by meaning, tea is near coffee: Q2)
        assert memory.search("coffee", mode="lexical") == []
        assert memory.hot() == ""
        assert memory.procedures() == []
        # No session of its own (no mcp session), and the child's record untouched.
        assert [(s.id, s.ended, s.counts) for s in memory.sessions()] == [(parent.id, None, {})]
    with Memory(session=child.id) as as_child:
        assert as_child.session == child


# -- streamable HTTP ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_http_server_serves_and_records_its_session_when_stopped(  # A2, U3
    state_dir: Path,
    tmp_path: Path,
    stop: signal.Signals,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    out_path, err_path = tmp_path / "serve.out", tmp_path / "serve.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            cli_command("serve", "--http", f"127.0.0.1:{port}"),
            env=cli_env(str(state_dir)),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )

    def output() -> str:
        return out_path.read_text() + err_path.read_text()

    try:
        wait_for_port(port, proc, output)
        async with Client(url, read_timeout_seconds=CALL_TIMEOUT) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ALL_TOOLS
            fact = (
                await call(
                    client,
                    "memory_update",
                    {
                        "category": "decision",
                        "content": "We host the wiki on the old nas",
                    },
                )
            )["fact"]
            hits = (await call(client, "memory_search", {"query": "wiki nas"}))["hits"]
            assert [(h["kind"], h["id"]) for h in hits] == [("fact", fact["id"])]
            text = await call_error(client, "memory_update", {"category": "rumour", "content": "x"})
            assert "'rumour'" in text

        proc.send_signal(stop)
        code = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    assert code == 128 + stop, output()
    banner = out_path.read_text()
    assert url in banner
    assert f"store: {state_dir}" in banner
    assert "Traceback" not in err_path.read_text()
    with Memory() as memory:
        [session] = memory.sessions()
        assert session.surface == "mcp" and session.parent_id is None
        assert session.ended is not None and session.ended >= session.started
        assert session.counts == {"facts": 1}
        assert memory.get_fact(fact["id"]).session_id == session.id


def test_http_refuses_a_non_loopback_address_without_allow_remote(  # A2, X
    run: Callable[..., Any],
) -> None:
    result = run("serve", "--http", "0.0.0.0:9999")
    assert result.code == 1
    assert result.out == ""  # no banner: no server was started
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("memdir: error: ")
    assert "0.0.0.0:9999" in lines[0] and "--allow-remote" in lines[0]
    with Memory() as memory:
        assert memory.sessions() == []


# -- hot memory as a resource and in the instructions (H1) -------------------------------


@pytest.mark.anyio
async def test_hot_memory_is_a_resource_and_in_the_instructions(  # H1, A2
    state_dir: Path,
) -> None:
    hot_text = "# Hot\nUser: Ada Lovelace, timezone Europe/London\nPrefers short answers\n"
    with Memory() as memory:
        memory.hot_set(hot_text)
        on_disk = Path(memory.path, "HOT.md").read_text(encoding="utf-8")

    async with stdio_client(state_dir) as client:
        assert client.instructions is not None
        assert on_disk.strip() in client.instructions
        assert "memory_update" in client.instructions  # and the guidance on what goes where

        resources = (await client.list_resources()).resources
        assert [(str(r.uri), r.mime_type) for r in resources] == [
            ("memdir://hot", "text/markdown"),
            ("memdir://recall", "text/markdown"),
        ]
        [content] = (await client.read_resource("memdir://hot")).contents
        assert content.text == on_disk  # type: ignore[union-attr]

        await call(
            client,
            "memory_update",
            {
                "target": "hot",
                "action": "append",
                "content": "Active project: memdir",
            },
        )
        [content] = (await client.read_resource("memdir://hot")).contents
        assert content.text.startswith(on_disk.rstrip("\n"))  # type: ignore[union-attr]
        assert "Active project: memdir" in content.text  # type: ignore[union-attr]

        with pytest.raises(MCPError, match="unknown resource memdir://cold") as raised:
            await client.read_resource("memdir://cold")
        assert raised.value.code == INVALID_PARAMS  # "not found", not an internal error


def test_instructions_leave_out_an_empty_hot_memory(state_dir: Path) -> None:  # H1
    async def main() -> str | None:
        async with stdio_client(state_dir) as client:
            return client.instructions

    instructions = anyio.run(main)
    assert instructions is not None and "memory_search" in instructions
    assert "[Hot memory]" not in instructions


@pytest.mark.anyio
async def test_server_start_runs_the_retention_sweep(state_dir: Path) -> None:  # T4
    old = Memory(clock=FixedClock(start=1_000_000_000))  # 2001: far past any retention
    old.start_task("ancient")
    old.add_note("ancient", "from long ago")
    old.end_task("ancient")
    Memory().start_task("current")
    Memory().add_note("current", "still running")
    notes = Path(Memory().path) / "tasks"
    async with stdio_client(state_dir) as client:
        await client.list_tools()
        for _ in range(100):  # the sweep runs on its own thread as the server starts
            if not (notes / "ancient.md").exists():
                break
            await anyio.sleep(0.05)
    assert not (notes / "ancient.md").exists()
    assert (notes / "current.md").exists()


@pytest.mark.anyio
async def test_memorize_tool_and_recall_prompt(state_dir: Path) -> None:  # M1, R1, A1
    Memory().start_task("t1")
    async with stdio_client(state_dir) as client:
        result = await call(
            client,
            "memorize",
            {
                "task": "t1",
                "output": (
                    "done\nMEMDIR_MEMORIZE_BEGIN\n"
                    '{"scope": "global", "name": "ci", "description": "CI takes 12 min", '
                    '"content": "x"}\nMEMDIR_MEMORIZE_END\n'
                ),
            },
        )
        assert result["output"] == "done\n" and result["applied"][0]["action"] == "created"
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["recall", "boot"]
        prompt = await client.get_prompt("recall", {"task": "t1"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "[Long-term Memory]" in text and "- ci — CI takes 12 min" in text


@pytest.mark.anyio
async def test_the_server_guards_duplicates_and_answers_as_of(state_dir: Path) -> None:
    """N1 and F3 through a real MCP client: an exact duplicate answers with the
    fact it repeats; with the model loaded (the server warms it), a paraphrase is compared
    by meaning after its answer and named as a semantic near duplicate in `later` of an
    answer to come, once; memory_search(as_of=...) answers what held then."""
    async with stdio_client(state_dir) as client:
        await call(client, "memory_search", {"query": "warm up", "mode": "hybrid"})
        react = (
            await call(
                client,
                "memory_update",
                {
                    "category": "decision",
                    "content": "The team decided to use React",
                    "valid_from": "2024-01-01",
                },
            )
        )["fact"]
        again = (
            await call(
                client,
                "memory_update",
                {"category": "decision", "content": "the team  decided to use REACT"},
            )
        )["fact"]
        assert again["duplicate"] is True and again["id"] == react["id"]
        # A2: the hint is the tool call that does it
        hinted = {"action": "supersede", "supersedes": react["id"], "content": "<new text>"}
        assert f"`memory_update {json.dumps(hinted)}`" in again["hint"]
        near = (
            await call(
                client,
                "memory_update",
                {"category": "decision", "content": "The team chose React for the frontend"},
            )
        )["fact"]
        assert near["duplicate"] is False and near["similar"] == []
        # by meaning after the answer: the finding comes with an answer to come, once
        found, answers = [], 0
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a time
        while not found and time.monotonic() < deadline:
            answer = await call(client, "memory_search", {"query": "frontend"})
            found, answers = answer.get("later", []), answers + 1
        assert [(f["fact"], [(s["ref"], s["how"]) for s in f["similar"]]) for f in found] == [
            (near["id"], [(react["id"], "semantic")])
        ]
        assert f'"id": {react["id"]}' in found[0]["hint"]  # retire it: a tool call
        assert "later" not in await call(client, "memory_search", {"query": "frontend"})
        await call(
            client,
            "memory_update",
            {
                "action": "supersede",
                "supersedes": react["id"],
                "valid_from": "2025-06-01",
                "content": "The team moved from React to Svelte",
            },
        )
        then = await call(client, "memory_search", {"query": "React", "as_of": "2024-12-31"})
        assert [h["id"] for h in then["hits"]] == [react["id"]]
        assert then["hits"][0]["valid_to"] == "2025-06-01T00:00:00Z"


@pytest.mark.anyio
async def test_an_unexpected_error_is_a_tool_error_and_the_server_goes_on(  # A2
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A bug of ours (here planted in the search) reaches the agent as a tool error that
    names the tool and the error, secrets masked, not the SDK's bare "Internal server
    error"; the traceback goes to the server's stderr; the next call is served."""
    from memdir.mcp_server import build_server

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("index out of step, key=AKIAIOSFODNN7EXAMPLE")

    with Memory(str(state_dir)) as memory:
        memory.add_fact("Bob likes cats", "preference")
        async with Client(build_server(memory)) as client:
            with monkeypatch.context() as planted:
                planted.setattr(Memory, "search", broken)
                text = await call_error(client, "memory_search", {"query": "cats"})
            assert "tool memory_search failed unexpectedly" in text
            assert "RuntimeError: index out of step" in text and "AKIAIOSFODNN7EXAMPLE" not in text
            assert "\n" not in text
            hits = (await call(client, "memory_search", {"query": "cats"}))["hits"]
            assert [hit["content"] for hit in hits] == ["Bob likes cats"]
    logged = capfd.readouterr().err
    assert "Traceback" in logged and "RuntimeError" in logged
    assert "AKIAIOSFODNN7EXAMPLE" not in logged
