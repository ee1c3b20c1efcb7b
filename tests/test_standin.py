"""The scripted Messages API stand-in the end-to-end tests run Claude Code against
(tests/standin.py) speaks the wire format the host parses: SSE events in order, tool_use
input as JSON deltas, the non-streamed message, count_tokens; and it picks each
conversation's turn from the request alone, so side requests consume nothing."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from standin import StandIn, Text, ToolUse


def post(api: StandIn, path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["content-type"], response.read()


def events(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in payload.decode().split("\n\n"):
        if not chunk.strip():
            continue
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line[len("data: ") :])
        assert data["type"] == name_line[len("event: ") :]
        out.append((data["type"], data))
    return out


TOOLS = [{"name": "memory_search", "input_schema": {"type": "object"}}]
CALL = ToolUse("memory_search", {"query": "release signing"}, text="Looking.")
SCRIPTS = {"conv-a": [CALL, Text("Done.")], "conv-b": [Text("Other.")]}


def request(first: str, *later: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": stream,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": first}]}, *later],
    }


def test_stream_is_the_messages_api_event_sequence(tmp_path: Path) -> None:
    """K1 (test support): a tool_use turn streams as message_start, a text block, a
    tool_use block whose input arrives as input_json_delta, message_delta with stop_reason
    tool_use and usage, message_stop."""
    with StandIn(SCRIPTS, tmp_path / "log.jsonl") as api:
        kind, payload = post(api, "/v1/messages", request("conv-a: go"))
    assert kind == "text/event-stream"
    got = events(payload)
    assert [name for name, _ in got] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert got[2][1]["delta"] == {"type": "text_delta", "text": "Looking."}
    assert got[4][1]["content_block"]["type"] == "tool_use"
    assert got[4][1]["content_block"]["name"] == "memory_search"
    assert json.loads(got[5][1]["delta"]["partial_json"]) == {"query": "release signing"}
    assert got[7][1]["delta"]["stop_reason"] == "tool_use"
    assert got[7][1]["usage"]["output_tokens"] > 0


def test_turns_follow_each_conversation_and_side_requests_consume_none(tmp_path: Path) -> None:
    """K1 (test support): the turn answered is the one after the assistant turns the
    request carries, per conversation marker; a request without tools or without a marker
    gets a plain text and moves no script; every request is logged."""
    log = tmp_path / "log.jsonl"
    with StandIn(SCRIPTS, log) as api:
        side = request("conv-a: make a title", stream=False)
        side["tools"] = []
        _, title = post(api, "/v1/messages", side)
        _, first = post(api, "/v1/messages", request("conv-a: go", stream=False))
        _, other = post(api, "/v1/messages", request("conv-b: go", stream=False))
        answered = {"role": "assistant", "content": json.loads(first)["content"]}
        result = {"role": "user", "content": [{"type": "tool_result", "content": "hit"}]}
        _, second = post(api, "/v1/messages", request("conv-a: go", answered, result, stream=False))
        _, counted = post(api, "/v1/messages/count_tokens", request("conv-a: go"))
    assert json.loads(title)["content"] == [{"type": "text", "text": "ok"}]
    first_message = json.loads(first)
    assert first_message["stop_reason"] == "tool_use"
    assert first_message["content"][1]["input"] == {"query": "release signing"}
    assert json.loads(other)["content"][0]["text"] == "Other."
    assert json.loads(second)["content"] == [{"type": "text", "text": "Done."}]
    assert json.loads(second)["stop_reason"] == "end_turn"
    assert json.loads(counted)["input_tokens"] > 0
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["path"], r["conversation"], r["turn"]) for r in logged] == [
        ("/v1/messages", None, None),
        ("/v1/messages", "conv-a", 0),
        ("/v1/messages", "conv-b", 0),
        ("/v1/messages", "conv-a", 1),
        ("/v1/messages/count_tokens", None, None),
    ]
    assert logged[1]["body"]["messages"][0]["content"][0]["text"] == "conv-a: go"
    assert not api.overruns()
    assert len(api.conversation("conv-a")) == 2


# -- the Responses API (Codex) -----------------------------------------------------------

NAMESPACE = [{"type": "namespace", "name": "mcp__memdir", "tools": [{"name": "memory_search"}]}]
CODEX_SCRIPTS = {
    "conv-c": [
        ToolUse("mcp__memdir__memory_search", {"query": "signing"}, text="Looking."),
        ToolUse("exec_command", lambda body: {"cmd": f"echo {len(body['input'])}"}),
        Text("Done."),
    ]
}


def responses(*items: dict[str, Any]) -> dict[str, Any]:
    """A Codex request: its environment context first, then the prompt and what followed."""
    context = {"type": "message", "role": "user", "content": [{"type": "input_text"}]}
    context["content"][0]["text"] = "<environment_context>...</environment_context>"
    prompt = {"type": "message", "role": "user", "content": [{"type": "input_text"}]}
    prompt["content"][0]["text"] = "conv-c: go"
    return {"model": "m", "stream": True, "tools": NAMESPACE, "input": [context, prompt, *items]}


def test_responses_stream_turns_and_mcp_namespaces(tmp_path: Path) -> None:
    """K1 (test support): a turn streams as response.created, one output_item.done per
    item (the text, then the call), response.completed with usage; a call of
    mcp__<server>__<tool> goes out as Codex offers it (the tool inside the namespace); the
    turn is the one after the calls and answers the input carries, whatever comes before
    the prompt; an input may be computed from the request."""
    with StandIn(CODEX_SCRIPTS, tmp_path / "log.jsonl") as api:
        kind, payload = post(api, "/v1/responses", responses())
        got = events(payload)
        text, call = got[1][1]["item"], got[2][1]["item"]
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "hit"}
        _, second = post(api, "/v1/responses", responses(text, call, output))
        (later,) = [e[1]["item"] for e in events(second) if e[0] == "response.output_item.done"]
        shell_output = {"type": "function_call_output", "call_id": later["call_id"], "output": ""}
        _, third = post(api, "/v1/responses", responses(text, call, output, later, shell_output))
    assert kind == "text/event-stream"
    assert [name for name, _ in got] == [
        "response.created",
        "response.output_item.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert text["content"][0] == {"type": "output_text", "text": "Looking.", "annotations": []}
    assert (call["type"], call["name"], call["namespace"]) == (
        "function_call",
        "memory_search",
        "mcp__memdir",
    )
    assert json.loads(call["arguments"]) == {"query": "signing"}
    assert got[3][1]["response"]["usage"]["output_tokens"] > 0
    assert later["name"] == "exec_command" and "namespace" not in later
    assert json.loads(later["arguments"]) == {"cmd": "echo 5"}  # computed from the request
    (done,) = [e[1]["item"] for e in events(third) if e[0] == "response.output_item.done"]
    assert done["content"][0]["text"] == "Done."
    assert [r["turn"] for r in api.log()] == [0, 1, 2]
    assert {r["path"] for r in api.log()} == {"/v1/responses"}
    assert not api.overruns()
