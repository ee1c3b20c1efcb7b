"""Limits and odd numbers (X3): every whole number from outside is
range-checked at the boundary (CLI options, tool arguments over a real MCP client, the
library, config.toml, the heartbeat state file), so none reaches SQLite or the time
functions: one clear line, never an internal error or a raw exception text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memdir import ConfigError, Memory, StorageError, ValidationError
from memdir.testing import cli_env
from memdir.tools import call_tool
from storeconfig import write_config

HUGE = [2**63, 2**64 + 1, 10**30]
BAD_COUNTS = [0, -1, *HUGE]


def _one_clear_line(result: Any) -> None:
    assert result.code in (1, 2), result.err
    assert result.err.count("\n") == 1, result.err
    assert "internal error" not in result.err and "Traceback" not in result.err
    assert "SQLite" not in result.err and "Overflow" not in result.err


# CLI commands taking a whole number, with {} where it goes
_CLI = [
    ("fact", "show", "{}"),
    ("fact", "rm", "{}"),
    ("fact", "history", "{}"),
    ("fact", "supersede", "{}", "new text"),
    ("search", "x", "-n", "{}"),
    ("get", "HOT.md", "--from", "{}"),
    ("get", "HOT.md", "--lines", "{}"),
    ("recall", "--max-chars", "{}"),
    ("distill", "--max-chars", "{}"),
    ("doctor", "--stale-days", "{}"),
]


@pytest.mark.parametrize("value", [*BAD_COUNTS, "１２", "1_0", "٣", " 1e3"])
@pytest.mark.parametrize("command", _CLI, ids=lambda c: " ".join(c[:2]))
@pytest.mark.slow
def test_every_cli_number_is_range_checked(
    run: Any, command: tuple[str, ...], value: object
) -> None:
    """X3 / F1, E4, R1, D1: each number an option or argument takes is refused out of
    range with one line naming it (recall's budget may be 0: nothing injected)."""
    if command[0] == "recall" and value == 0:
        return
    result = run(*(str(value) if part == "{}" else part for part in command))
    _one_clear_line(result)


def test_huge_fact_id_in_the_library_is_a_validation_error(memory: Memory) -> None:
    """F1: one validator for fact ids: every fact operation refuses 2**63 and friends."""
    memory.add_fact("one fact", "learning")
    operations = [
        memory.get_fact,
        memory.remove_fact,
        memory.fact_history,
        lambda v: memory.supersede_fact(v, "other text"),
    ]
    for operation in operations:
        for value in [*BAD_COUNTS, True, 1.0, "1.0", "١", "1_0", None]:
            with pytest.raises(ValidationError, match="fact id"):
                operation(value)  # type: ignore[operator]
    assert memory.get_fact("1").id == 1 and memory.get_fact(" 1 ").id == 1


# tool, arguments with {} where the number goes
_TOOLS = [
    ("memory_search", {"query": "x", "limit": "{}"}),
    ("memory_get", {"path": "HOT.md", "from_line": "{}"}),
    ("memory_get", {"path": "HOT.md", "lines": "{}"}),
    ("memory_recall", {"max_chars": "{}"}),
    ("memory_update", {"action": "remove", "id": "{}"}),
    ("memory_update", {"action": "supersede", "supersedes": "{}", "content": "x"}),
]
_BAD_JSON: list[object] = [-1, *HUGE, 1.5, 2.0, True, False, "3", [], {}]


def _args(arguments: dict[str, Any], value: object) -> dict[str, Any]:
    return {k: value if v == "{}" else v for k, v in arguments.items()}


@pytest.mark.parametrize("value", _BAD_JSON, ids=repr)
@pytest.mark.parametrize(("tool", "arguments"), _TOOLS, ids=lambda t: str(t)[:40])
def test_every_tool_number_is_range_checked(
    memory: Memory, tool: str, arguments: dict[str, Any], value: object
) -> None:
    """A2 / X3: JSON numbers (ints out of range, floats, bools, strings) where a tool
    wants a whole number are refused by the schema check, before any tool runs."""
    with pytest.raises(ValidationError) as caught:
        call_tool(memory, tool, _args(arguments, value))
    assert "\n" not in str(caught.value) and "SQLite" not in str(caught.value)


@pytest.mark.slow
def test_tool_numbers_over_a_real_mcp_client(state_dir: Path) -> None:
    """A2 / X3: the same, over stdio through the SDK client: each bad number is a tool
    error with our one-line message, never a raw exception text, and the server lives on."""

    async def main() -> list[str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir))
        )
        texts = []
        async with Client(params, read_timeout_seconds=20) as client:
            for tool, arguments in _TOOLS:
                for value in (2**63, -1, 1.5, True, "7"):
                    result = await client.call_tool(tool, _args(arguments, value))
                    assert result.is_error is True, (tool, value)
                    texts.append(result.content[0].text)  # type: ignore[union-attr]
            ok = await client.call_tool("memory_search", {"query": "x", "limit": 1000})
            assert not ok.is_error
        return texts

    for text in anyio.run(main):
        assert text.strip() and "\n" not in text.strip(), text
        assert "Overflow" not in text and "SQLite" not in text and "Traceback" not in text


@pytest.mark.parametrize(
    "line",
    [
        "[memory]\nmax_inject_chars = 9223372036854775808",
        "[memory]\nmax_inject_chars = 0",
        "[memory]\nmax_entry_bytes = 99999999999999",
        "[memory]\nhot_cap_chars = 99999999999999",
        "[memory]\nbusy_timeout_ms = 9223372036854775807",
        "[memory]\nbusy_timeout_ms = -1",
        '[memory]\ntask_retention = "99999999999999d"',
        "[distill]\nmax_chars = 99999999999999",
        "[search]\nrrf_k = 9223372036854775807",
        "[search]\nlexical_weight = inf",
        "[search]\nmin_score = nan",
        "[heartbeat]\nemail = inf",
        "[heartbeat]\nemail = nan",
        "[heartbeat]\nemail = 1e300",
        "[heartbeat]\nemail = -4",
        "[duplicates]\nlexical = nan",
    ],
)
def test_config_numbers_are_range_checked(state_dir: Path, line: str) -> None:
    """S / X3: config ints and floats out of range (huge, negative, inf, nan)
    are a ConfigError naming the key, not a crash later."""
    write_config(state_dir, line + "\n")
    key = line.split("\n")[1].split(" =")[0]
    with pytest.raises(ConfigError, match=key):
        Memory()


@pytest.mark.parametrize("last", ["1e300", "-5", "NaN", "Infinity", str(10**30), "true"])
def test_heartbeat_state_numbers_are_range_checked(memory: Memory, last: str) -> None:
    """B1 / X3: a hand-written heartbeat-state.json with a time no date can show is a
    clear error naming the file, left as it is."""
    path = Path(memory.path, "heartbeat-state.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = '{"lastChecks": {"email": ' + last + "}}"
    path.write_text(raw)
    with pytest.raises(StorageError, match="heartbeat-state.json"):
        memory.heartbeat_due()
    with pytest.raises(StorageError):
        memory.heartbeat_mark("email")
    assert path.read_text() == raw
