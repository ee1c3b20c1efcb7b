"""What an MCP client sees of `memdir serve` (A1, A2, U2): tool annotations that
are complete and true to each tool, an output schema for every structured result (checked
by the SDK's client on every call), the standard list methods and ping answered, no spec
codes in what a client shows, and a README that lists what the server offers."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

from memdir import Memory
from memdir.cli import MODULES
from memdir.testing import cli_env
from memdir.tools import TOOLS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]  # real server processes

README = Path(__file__).resolve().parent.parent / "README.md"
SPEC_CODE_RE = re.compile(r"\b[A-Z]{1,2}\d{1,2}\b")  # R1, E3, H6... as docs/spec.md numbers them
CLI_COMMAND_RE = re.compile(rf"\bmemdir (?:{'|'.join(MODULES)})\b")

# what each tool does to memory: (read-only, destructive, idempotent)
EXPECTED = {
    "memory_search": (True, False, True),
    "memory_get": (True, False, True),
    "memory_recall": (True, False, True),
    # supersede, remove and a hot `set` replace what was there; a repeated append adds again
    "memory_update": (False, True, False),
    # the same name and content again leave the same file
    "procedure_write": (False, True, True),
    # every call appends an entry
    "daily_append": (False, False, False),
    # a global block overwrites an entry; repeating it, or a task note (T2), changes nothing
    "memorize": (False, True, True),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def client_for(state_dir: Path, mode: str = "auto", **env: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir), env)
    )
    return Client(params, mode=mode, read_timeout_seconds=20)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_tool_annotations_are_complete_and_true_to_each_tool(state_dir: Path) -> None:
    async with client_for(state_dir) as client:
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == list(EXPECTED)
    for tool in listed:
        notes = tool.annotations
        assert notes is not None, tool.name
        assert tool.title and notes.title == tool.title, tool.name
        assert (notes.read_only_hint, notes.destructive_hint, notes.idempotent_hint) == (
            EXPECTED[tool.name]
        ), tool.name
        assert notes.open_world_hint is False, tool.name  # memory only: no web, no network


@pytest.mark.anyio
async def test_subagent_tools_are_the_read_only_ones_by_their_annotations(  # U2
    state_dir: Path,
) -> None:
    with Memory() as memory:
        parent = memory.start_session("cli")
        child = memory.start_session("cli", parent=parent.id)
    async with client_for(state_dir, MEMDIR_SESSION_ID=child.id) as client:
        listed = (await client.list_tools()).tools
    assert listed and all(t.annotations and t.annotations.read_only_hint for t in listed)
    assert [t.name for t in listed] == [name for name, (ro, *_) in EXPECTED.items() if ro]


def undeclared(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Keys of `value` its schema does not declare (the SDK checks types and required keys;
    this checks that nothing a tool returns goes undeclared)."""
    found = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key not in properties:
                found.append(f"{where}.{key}")
            else:
                found += undeclared(item, properties[key], f"{where}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            found += undeclared(item, schema["items"], f"{where}[]")
    return found


@pytest.mark.anyio
async def test_every_structured_result_matches_its_output_schema(state_dir: Path) -> None:
    """A2: each tool declares an outputSchema and returns structuredContent that the SDK's
    client validates against it (a mismatch raises), with nothing undeclared in it."""
    block = (
        'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "ci", "description": "CI", '
        '"content": "CI runs twelve minutes"}\nMEMDIR_MEMORIZE_END\n'
        'MEMDIR_MEMORIZE_BEGIN\n{"content": "a note"}\nMEMDIR_MEMORIZE_END\n'
    )
    twin = (
        'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "ci-copy", "description": "C", '
        '"content": "CI runs twelve minutes"}\nMEMDIR_MEMORIZE_END\n'
    )  # similar: exact
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_update", {"category": "decision", "content": "We deploy on Tuesdays"}),
        ("memory_update", {"category": "decision", "content": "we deploy on tuesdays"}),
        ("memory_update", {"category": "decision", "content": "We deploy on Tuesdays, early"}),
        ("memory_update", {"action": "supersede", "supersedes": 1, "content": "Thursdays"}),
        ("memory_update", {"target": "hot", "action": "append", "content": "Name: Ada"}),
        ("memory_update", {"target": "hot", "action": "append", "content": "y" * 4300}),
        ("procedure_write", {"name": "deploy", "content": "# Deploy\n1. make test\n"}),
        ("procedure_write", {"name": "deploy-again", "content": "# Deploy\n1. make test\n"}),
        ("daily_append", {"text": "Shipped", "section": "Decisions"}),
        ("memorize", {"output": "done\n" + block, "task": "t1"}),
        ("memorize", {"output": block}),  # the entry again: unchanged
        ("memorize", {"output": twin}),
        ("memory_search", {"query": "deploy"}),
        ("memory_search", {"query": "Tuesdays", "as_of": "2999-01-01", "kinds": ["fact"]}),
        ("memory_get", {"path": "global/ci.md", "from_line": 2, "lines": 3}),
        ("memory_recall", {"task": "t1"}),
        ("memory_update", {"action": "remove", "id": 2}),
    ]
    async with client_for(state_dir) as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        assert set(schemas) == set(TOOLS) and all(schemas.values())
        assert {name: s["type"] for name, s in schemas.items()} == dict.fromkeys(TOOLS, "object")
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments)  # validated by the client
            assert not result.is_error, result.content
            assert result.structured_content is not None
            assert undeclared(result.structured_content, schemas[tool]) == [], tool
    assert {tool for tool, _ in calls} == set(TOOLS)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_standard_list_methods_and_ping_answer(state_dir: Path, mode: str) -> None:
    """A2: resources/templates/list answers (an empty list) instead of -32601, which made
    the MCP Inspector give up; so do the other lists, and ping where the protocol version
    the client speaks (legacy: up to 2025-11-25, as the Inspector does) still has it."""
    async with client_for(state_dir, mode) as client:
        if mode == "legacy":
            with pytest.warns(MCPDeprecationWarning, match="ping"):  # the SDK's, not ours
                await client.send_ping()
        assert (await client.list_resource_templates()).resource_templates == []
        assert (await client.list_tools()).tools
        assert [str(r.uri) for r in (await client.list_resources()).resources] == [
            "memdir://hot",
            "memdir://recall",
        ]
        assert [p.name for p in (await client.list_prompts()).prompts] == ["recall", "boot"]


def _shown(
    tools: list[Any], prompts: list[Any], resources: list[Any], instructions: str
) -> dict[str, str]:
    """Every text a client may show a person or a model, by where it is."""
    shown = {"instructions": instructions}
    for tool in tools:
        shown[f"tool {tool.name}"] = f"{tool.title}\n{tool.description}"
        for name, spec in tool.input_schema["properties"].items():
            shown[f"tool {tool.name} argument {name}"] = spec.get("description", "")
    for prompt in prompts:
        shown[f"prompt {prompt.name}"] = prompt.description or ""
        for argument in prompt.arguments or []:
            shown[f"prompt {prompt.name} argument {argument.name}"] = argument.description or ""
    for resource in resources:
        shown[f"resource {resource.uri}"] = f"{resource.name}\n{resource.description or ''}"
    return shown


@pytest.mark.anyio
async def test_what_a_client_shows_holds_no_spec_codes_nor_cli_commands(
    state_dir: Path,
) -> None:
    """Descriptions and instructions are for the agent and its user, not for readers of
    docs/spec.md ("(R1)"), and they point at tools, not at the command line."""
    async with client_for(state_dir) as client:
        shown = _shown(
            (await client.list_tools()).tools,
            (await client.list_prompts()).prompts,
            (await client.list_resources()).resources,
            client.instructions or "",
        )
    assert len(shown) > 20
    for where, text in shown.items():
        assert not SPEC_CODE_RE.search(text), f"{where}: {text}"
        assert not CLI_COMMAND_RE.search(text), f"{where}: {text}"


def readme_offers() -> list[tuple[str, str]]:
    """(kind, name) of each row of the README's table of what the server offers."""
    section = README.read_text(encoding="utf-8").split("## Quick start: an MCP client", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = re.findall(r"^\| (tool|prompt|resource) +\| `([^`]+)` +\|", section, re.MULTILINE)
    assert rows, "the README's MCP quick start has no table of what the server offers"
    return rows


@pytest.mark.anyio
async def test_the_readme_lists_what_the_server_offers(state_dir: Path) -> None:
    async with client_for(state_dir) as client:
        tools = (await client.list_tools()).tools
        offered = [("tool", t.name) for t in tools]
        offered += [("prompt", p.name) for p in (await client.list_prompts()).prompts]
        offered += [("resource", str(r.uri)) for r in (await client.list_resources()).resources]
    assert readme_offers() == offered
    # and which tools it calls read-only
    text = README.read_text(encoding="utf-8")
    for tool in tools:
        [row] = [line for line in text.splitlines() if f"| `{tool.name}` " in line]
        assert ("(read-only)" in row) == bool(tool.annotations and tool.annotations.read_only_hint)
