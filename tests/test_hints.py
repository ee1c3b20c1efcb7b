"""Every hint memdir gives is a call that works as written (A1, A2, A3, C, F3, G2,
P1, H5, M4, R1, R4): each hint is provoked for real, the call it names is parsed out of the
message, its placeholders ("<new text>") filled, and it is made — through the `mcp` SDK's
client against `memdir serve`, as a `memdir` command line in a shell, and as a method call
on a Memory — and must succeed.

Over MCP a hint names tool calls only (a CLI command appears only as what to ask the user to
run); on the command line, commands; from Python, methods."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import memdir
from memdir import MemdirError, Memory, advice, markers
from memdir.testing import cli_env
from memdir.tools import call_tool

pytestmark = pytest.mark.timeout(120)

CALL_TIMEOUT = 20
TOOL_CALL_RE = re.compile(r"`([a-z_]+) \{")
ASK_USER_RE = re.compile(r"ask the user to run `([^`]+)`")
BLOCK = 'MEMDIR_MEMORIZE_BEGIN\n{"content": "a note the hint asked for"}\nMEMDIR_MEMORIZE_END\n'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Filler:
    """Values for the placeholders a hint leaves to the caller; each new text is unique, so
    that a filled-in write is never a duplicate of another."""

    def __init__(self, **fixed: str) -> None:
        self.count = itertools.count(1)
        self.new_text = "Text number {} written by the hint test"
        self.fixed = {
            "<category>": "learning",
            "<words>": "release",
            "<one-line description>": "filled in by the test",
            "<task id>": "t-hint",
            "<output>": BLOCK,
            **fixed,
        }

    def text(self, value: str) -> str:
        def one(match: re.Match[str]) -> str:
            key = match.group(0)
            if key in self.fixed:
                return self.fixed[key]
            if key in ("<new text>", "<fact>", "<the whole text>"):
                return self.new_text.format(next(self.count))
            raise AssertionError(f"a placeholder the test does not know: {key}")

        return re.sub(r"<[a-z][a-z -]*>", one, value)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value


# -- MCP ---------------------------------------------------------------------------------


def tool_calls(message: str, tools: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a message names, `tool {JSON}` in backticks; and no CLI command but
    as what to ask the user to run."""
    calls = []
    for found in TOOL_CALL_RE.finditer(message):
        assert found.group(1) in tools, f"a hint names a tool the server lacks: {message}"
        arguments, end = json.JSONDecoder().raw_decode(message, found.end() - 1)
        assert message[end] == "`", message
        calls.append((found.group(1), arguments))
    for_the_user = ASK_USER_RE.sub("", message)
    assert "`memdir" not in for_the_user and "`printf" not in for_the_user, message
    return calls


def client_for(state_dir: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir))
    )
    return Client(params, read_timeout_seconds=CALL_TIMEOUT)


class Agent:
    """An MCP client that makes every call a hint names, and checks each succeeds."""

    def __init__(self, client: Client, tools: set[str], fill: Filler) -> None:
        self.client, self.tools, self.fill = client, tools, fill
        self.followed: list[str] = []  # the tools of the hinted calls made
        self.for_user: list[str] = []  # the commands left to the user

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, f"{tool} {arguments}: {text}"
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, tool: str, arguments: dict[str, Any]) -> str:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, result
        return result.content[0].text  # type: ignore[union-attr]

    async def follow(self, message: str | None) -> list[dict[str, Any]]:
        """Make every call `message` names, in order; each must succeed."""
        assert message, "no hint"
        calls = tool_calls(message, self.tools)
        self.for_user += ASK_USER_RE.findall(message)
        assert calls or ASK_USER_RE.search(message), f"the hint names no call: {message}"
        results = []
        for tool, arguments in calls:
            filled = self.fill.value(arguments)
            result = await self.call(tool, filled)
            for warning in result.get("warnings", []):
                raise AssertionError(f"the hinted {tool} call warned: {warning}")
            results.append(result)
            self.followed.append(tool)
        return results


@pytest.mark.anyio
@pytest.mark.slow
async def test_every_hint_over_mcp_is_a_tool_call_that_succeeds(state_dir: Path) -> None:
    """A2: the duplicate hint used to read `memory_update action=supersede id=1`,
    which fails ("needs 'supersedes'")."""
    fill = Filler(**{"<name>": "ci-duration"})
    async with client_for(state_dir) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        agent = Agent(client, tools, fill)

        # an exact duplicate of a fact (F3): supersede it
        first = (
            await agent.call(
                "memory_update",
                {
                    "category": "convention",
                    "content": "Releases are cut from main every second Tuesday",
                },
            )
        )["fact"]
        again = (
            await agent.call(
                "memory_update",
                {
                    "category": "convention",
                    "content": "releases are cut from main every second  Tuesday",
                },
            )
        )["fact"]
        assert again["duplicate"] is True
        [done] = await agent.follow(again["hint"])
        assert done["fact"]["supersedes"] == first["id"]
        newest = done["fact"]["id"]

        # a near duplicate (stored, named): retire the one it replaces
        tea = (
            await agent.call(
                "memory_update",
                {"category": "preference", "content": "The user drinks black tea every morning"},
            )
        )["fact"]
        near = (
            await agent.call(
                "memory_update",
                {
                    "category": "preference",
                    "content": "The user drinks black tea every morning at home",
                },
            )
        )["fact"]
        assert near["duplicate"] is False and tea["id"] in [s["ref"] for s in near["similar"]]
        [done] = await agent.follow(near["hint"])
        assert done["fact"]["id"] == tea["id"] and done["fact"]["status"] == "removed"

        # F3: a fact superseded already forks; the hint's calls settle it (this version
        # given to the other, then removed: both succeed, and nothing holds twice)
        plan = (
            await agent.call(
                "memory_update", {"category": "decision", "content": "Ship on Fridays"}
            )
        )["fact"]
        later = (
            await agent.call(
                "memory_update",
                {"action": "supersede", "supersedes": plan["id"], "content": "Ship on Mondays"},
            )
        )["fact"]
        fork = (
            await agent.call(
                "memory_update",
                {"action": "supersede", "supersedes": plan["id"], "content": "Ship on Tuesdays"},
            )
        )["fact"]
        assert fork["forked"] == [later["id"]]
        kept, gone = await agent.follow(fork["hint"])
        assert kept["fact"]["id"] == fork["id"] and gone["fact"]["status"] == "removed"
        # F3 conflicts: an id superseded already (remove), a text another fact holds, no id
        await agent.follow(
            await agent.error("memory_update", {"action": "remove", "id": first["id"]})
        )
        other = (
            await agent.call(
                "memory_update", {"category": "decision", "content": "The docs live in the wiki"}
            )
        )["fact"]
        conflict = await agent.error(
            "memory_update",
            {
                "action": "supersede",
                "supersedes": other["id"],
                "content": "The user drinks black tea every morning at home",
            },
        )
        [done] = await agent.follow(conflict)
        assert done["fact"]["id"] == other["id"] and done["fact"]["status"] == "removed"
        for arguments in (
            {"action": "supersede", "supersedes": 999, "content": "x y z"},
            {"action": "remove", "id": 999},
        ):
            [found] = await agent.follow(await agent.error("memory_update", arguments))
            assert "hits" in found

        # global entries (G2, M4): the same body under another name, then a near one; what
        # the hints write keeps saying nearly the same
        body = "Main's CI runs 12 minutes; plan merges around it."
        fill.new_text = body + " Merged {}."
        entry = (
            'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "%s", "description": '
            '"%s", "content": "%s"}\nMEMDIR_MEMORIZE_END\n'
        )
        await agent.call("memorize", {"output": entry % ("ci-duration", "CI time", body)})
        for name, text in (
            ("ci-time", body),
            ("ci-length", "Main's CI runs 12 minutes; plan your merges around it."),
        ):
            written = await agent.call("memorize", {"output": entry % (name, "CI", text)})
            [applied] = written["applied"]
            assert applied["action"] == "created"  # X5: a new name is always stored
            hinted = await agent.follow(applied.get("hint"))
            named = applied["similar"][0]["ref"]  # what it resembles most, the hint's target
            assert [a["target"] for r in hinted for a in r["applied"]] == [named]
            assert [a["action"] for r in hinted for a in r["applied"]] == ["updated"]

        fill.new_text = "Text number {} written by the hint test"
        # procedures (P1): the same steps under another name
        steps = "# Deploy\n1. make test\n2. push the tag\n3. watch the canary\n"
        await agent.call("procedure_write", {"name": "deploy", "content": steps})
        copy = await agent.call("procedure_write", {"name": "deploy-copy", "content": steps})
        [done] = await agent.follow(copy["procedure"]["hint"])
        assert done["procedure"]["name"] == "deploy"

        # hot memory (H5): a line that is not there; nearly full
        await agent.call(
            "memory_update", {"target": "hot", "action": "append", "content": "Name: Ada"}
        )
        [shown] = await agent.follow(
            await agent.error(
                "memory_update", {"target": "hot", "action": "remove", "content": "no such line"}
            )
        )
        assert shown["path"] == "HOT.md"
        full = (
            await agent.call(
                "memory_update", {"target": "hot", "action": "append", "content": "x" * 4500}
            )
        )["hot"]
        [done] = await agent.follow(full["warning"])
        assert done["fact"]["category"] == "learning"

        # a task note without the current task (M4)
        noted = await agent.call("memorize", {"output": BLOCK})
        [warning] = noted["warnings"]
        [done] = await agent.follow(warning)
        assert done["applied"] == [{"scope": "task", "target": "t-hint", "action": "noted"}]

        # the recall preamble (R1): how to read a whole entry, in the tool, the prompt and
        # the resource alike
        recalled = (await agent.call("memory_recall", {}))["text"]
        prompt = await client.get_prompt("recall", {})
        [resource] = (await client.read_resource("memdir://recall")).contents
        for text in (
            recalled,
            prompt.messages[0].content.text,  # type: ignore[union-attr]
            resource.text,
        ):  # type: ignore[union-attr]
            preamble = text.split("[Long-term Memory]\n", 1)[1].split("\n", 1)[0]
            [read] = await agent.follow(preamble)
            assert read["path"] == "global/ci-duration.md"

    assert newest != first["id"]
    assert set(agent.followed) == {
        "memory_update",
        "memory_search",
        "memorize",
        "procedure_write",
        "memory_get",
    }
    # what no tool does is left to the user, as a command that works
    for command in agent.for_user:
        done_by_user = subprocess.run(
            fill.text(command),
            shell=True,
            capture_output=True,
            text=True,
            env=_shell_env(state_dir),
            timeout=60,
        )
        assert done_by_user.returncode == 0, (command, done_by_user.stderr)


def test_an_entry_hint_over_mcp_holds_no_live_marker(memory: Memory) -> None:  # R4, M1
    """An entry is written over MCP with the memorize tool's structured blocks: neither the
    hint nor its arguments, decoded, hold a marker, and the hinted call writes the entry."""
    token = advice.use("mcp")
    try:
        hint = advice.entry_write("ci", "CI time", "Twelve minutes")
    finally:
        advice.reset(token)
    assert markers.parse(hint).blocks == 0 and not markers.has_marker(hint)
    [(tool, arguments)] = tool_calls(hint, {"memorize"})
    assert not markers.has_marker(json.dumps(arguments)) and "output" not in arguments
    done = call_tool(memory, tool, arguments)
    assert done["applied"] == [{"scope": "global", "target": "ci", "action": "created"}]
    assert memory.entry("ci").content.strip() == "Twelve minutes"
    command_line = advice.running_as("cli", advice.entry_write, "ci", "CI time", "x")
    assert markers.parse(command_line).blocks == 0


# -- the command line --------------------------------------------------------------------


def _shell_env(state_dir: Path | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = cli_env(str(state_dir) if state_dir else "", extra)
    if state_dir is None:
        del env["MEMDIR_STATE_DIR"]
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def commands(message: str) -> list[str]:
    """The commands a message names, in backticks."""
    found = re.findall(r"`((?:memdir|printf) [^`]*)`", message)
    assert found, f"the hint names no command: {message}"
    assert not TOOL_CALL_RE.search(message), message
    return found


class Shell:
    """Runs `memdir` as a user would, and every command a hint names."""

    def __init__(self, cwd: Path, state_dir: Path | None, fill: Filler) -> None:
        self.cwd, self.state_dir, self.fill = cwd, state_dir, fill
        self.ran = 0

    def run(self, line: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            line,
            shell=True,
            capture_output=True,
            text=True,
            input=input,
            cwd=self.cwd,
            env=_shell_env(self.state_dir),
            timeout=60,
        )

    def ok(self, line: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = self.run(line, input)
        assert done.returncode == 0, (line, done.stderr)
        return done

    def follow(self, message: str, input: str | None = None) -> list[str]:
        outs = []
        for command in commands(message):
            done = self.ok(self.fill.text(command), input)
            outs.append(done.stdout)
            self.ran += 1
        return outs


@pytest.mark.slow
def test_every_hint_on_the_command_line_is_a_command_that_succeeds(tmp_path: Path) -> None:
    """The same on the CLI (C), with --state-dir given (no MEMDIR_STATE_DIR): the hinted
    commands name the same store, so they run as written from where the user is."""
    store = tmp_path / "elsewhere"
    (tmp_path / "steps.md").write_text("# Deploy\n1. make test\n", encoding="utf-8")
    fill = Filler(**{"<file>": "steps.md", "<name>": "ci-duration", "<line>": "Name: Ada"})
    sh = Shell(tmp_path, None, fill)
    memdir_ = f"memdir --state-dir {store}"
    store.mkdir()

    sh.ok(f"{memdir_} fact add 'Releases are cut every second Tuesday' -c convention")
    again = sh.ok(f"{memdir_} fact add 'releases are cut every second  tuesday' -c convention")
    assert again.stdout.startswith("not stored")
    [out] = sh.follow(again.stdout)
    assert "supersedes fact 1" in out

    sh.ok(f"{memdir_} fact add 'The user drinks black tea every morning' -c preference")
    near = sh.ok(
        f"{memdir_} fact add 'The user drinks black tea every morning at home' -c preference"
    )
    assert "resembles fact" in near.stderr
    [out] = sh.follow(near.stderr)
    assert out.endswith("removed\n")

    missing = sh.run(f"{memdir_} fact supersede 999 'no such fact'")
    assert missing.returncode == 1
    sh.follow(missing.stderr)
    superseded = sh.run(f"{memdir_} fact rm 1")
    assert superseded.returncode == 1
    sh.follow(superseded.stderr)

    # what a placeholder is filled with goes into shell quotes and JSON: no quotes in it
    body = "The main CI runs 12 minutes; plan merges around it."
    block = (
        'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "%s", "description": "CI", '
        '"content": "%s"}\nMEMDIR_MEMORIZE_END\n'
    )
    sh.ok(f"{memdir_} memorize", input=block % ("ci-duration", body))
    fill.new_text = body + " Merged {}."
    for name, text in (
        ("ci-time", body),
        ("ci-length", "The main CI runs 12 minutes; plan your merges around it."),
    ):
        written = sh.ok(f"{memdir_} memorize", input=block % (name, text))
        sh.follow(written.stderr)
        assert "filled in by the test" in sh.ok(f"{memdir_} list").stdout
    fill.new_text = "Text number {} written by the hint test"

    steps = tmp_path / "deploy.md"
    steps.write_text("# Deploy\n1. make test\n2. push the tag\n", encoding="utf-8")
    sh.ok(f"{memdir_} procedure write deploy {steps}")
    copy = sh.ok(f"{memdir_} procedure write deploy-copy {steps}")
    sh.follow(copy.stdout + copy.stderr)

    sh.ok(f"{memdir_} hot append 'Name: Ada'")
    gone = sh.run(f"{memdir_} hot rm 'no such line'")
    assert gone.returncode == 1
    [out] = sh.follow(gone.stderr)
    assert out == "Name: Ada\n"

    no_task = sh.ok(f"{memdir_} memorize", input=BLOCK)
    sh.follow(no_task.stderr, input=BLOCK)
    assert "a note the hint asked for" in sh.ok(f"{memdir_} task show t-hint").stdout

    recalled = sh.ok(f"{memdir_} recall").stdout
    [out] = sh.follow(recalled.split("[Long-term Memory]\n", 1)[1].split("\n", 1)[0])
    assert out.startswith("The main CI")

    # doctor's advice (N2) too: an empty procedure is written with the command it names
    (store / "memory" / "procedures" / "todo.md").write_text(
        "---\ndescription: x\n---\n", encoding="utf-8"
    )
    report = json.loads(sh.ok(f"{memdir_} doctor --json").stdout)
    [empty] = [f for f in report["findings"] if f["check"] == "procedures.empty"]
    sh.follow(empty["action"].split(" or delete ")[0])
    assert json.loads(sh.ok(f"{memdir_} procedure show todo --json").stdout)["content"]
    assert sh.ran >= 12


# -- Python --------------------------------------------------------------------------------


def method_calls(message: str) -> list[str]:
    found = re.findall(r"`((?:memory|memdir\.doctor)\.[a-z_.]+\(.*?\))`", message)
    assert found, f"the hint names no method: {message}"
    return found


@pytest.fixture
def python_hints(memory: Memory) -> Iterator[Callable[[str], list[Any]]]:
    fill = Filler(**{"<name>": "ci-duration"})

    def follow(message: str) -> list[Any]:
        return [
            eval(fill.text(call), {"memory": memory, "memdir": memdir})
            for call in method_calls(message)
        ]

    yield follow


def test_every_hint_in_the_library_is_a_method_call_that_succeeds(
    memory: Memory, python_hints: Callable[[str], list[Any]]
) -> None:  # A3, F3, G2, P1
    memory.add_fact("Releases are cut every second Tuesday", "convention")
    again = memory.add_fact("releases are cut every second  tuesday", "convention")
    [done] = python_hints(again.hint or "")
    assert done.supersedes == again.id

    with pytest.raises(MemdirError) as missing:
        memory.remove_fact(999)
    [found] = python_hints(str(missing.value))
    assert isinstance(found, list)

    body = "Main's CI runs 12 minutes; plan merges around it."
    memory.write_entry("ci-duration", "CI time", body)
    twin = memory.write_entry("ci-time", "CI", body)
    results = python_hints(twin.hint or "")
    assert results[0].name == "ci-duration"

    memory.write_procedure("deploy", "# Deploy\n1. make test\n")
    copy = memory.write_procedure("deploy-copy", "# Deploy\n1. make test\n")
    [done] = python_hints(copy.hint or "")
    assert done.name == "deploy"

    with pytest.raises(MemdirError) as no_entry:
        memory.entry("nope")
    [listed] = python_hints(str(no_entry.value))
    assert [e.name for e in listed][:1] == ["ci-duration"]

    preamble = memory.recall().text.split("[Long-term Memory]\n", 1)[1].split("\n", 1)[0]
    [read] = python_hints(preamble)
    assert read.name == "ci-duration"


def test_direct_function_calls_get_tool_call_hints_and_the_library_its_own(
    memory: Memory,
) -> None:  # A3
    """memdir.tools speaks in tool calls wherever it runs; the library around it keeps
    speaking Python."""
    from memdir.tools import call_tool

    call_tool(memory, "memory_update", {"category": "decision", "content": "Use SQLite"})
    again = call_tool(memory, "memory_update", {"category": "decision", "content": "use sqlite"})
    [(tool, arguments)] = tool_calls(again["fact"]["hint"], {"memory_update"})
    assert arguments == {"action": "supersede", "supersedes": 1, "content": "<new text>"}
    assert advice.surface() == "python"
    assert "`memory.supersede_fact(1, " in (memory.add_fact("Use  SQLite", "decision").hint or "")
