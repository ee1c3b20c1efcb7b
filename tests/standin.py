"""A scripted stand-in for the model APIs the agent hosts speak, on loopback, for
end-to-end tests that run a real host headless against it (K1-K3): the Anthropic Messages
API (Claude Code, /v1/messages) and the OpenAI Responses API (Codex, /v1/responses), both
streamed as SSE, answered from the same scripts.

What it receives is exactly what the model would see: every request body is logged, one
JSON line each, to a file the test reads. It answers from a script, stateless: each
conversation has its own list of turns, keyed by a marker string the conversation's first
user message contains (the prompt of `claude -p`, the prompt a scripted Agent call gives
a subagent), and the turn answered is the one after the assistant turns the request
already carries. So the host's side requests (titles, summaries: no tools, or a first
message with no marker) never consume a scripted turn, and a request the host repeats
gets the same answer. A request that matches no conversation gets a plain short text.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memdir.testing import free_port

MODEL = "claude-standin"


@dataclass(frozen=True)
class Text:
    """An assistant turn that answers in text and ends the turn."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """An assistant turn that calls one tool (the host runs it and asks again). The input
    may be a function of the request, for a call that names what an earlier one returned
    (Responses API only: the agent id Codex's spawn_agent gave)."""

    name: str
    input: Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]
    text: str = ""  # an optional text block before the call


Turn = Text | ToolUse


def message_text(message: Mapping[str, Any]) -> str:
    """All the text of one message: its string, or its text and tool_result blocks."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            if isinstance(inner, str):
                parts.append(inner)
            else:
                parts.extend(b.get("text", "") for b in inner or [] if b.get("type") == "text")
    return "\n".join(parts)


def system_text(body: Mapping[str, Any]) -> str:
    """The system prompt of a request, as one string."""
    system = body.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(block.get("text", "") for block in system or [])


@dataclass
class StandIn:
    """The server; `with StandIn(scripts, log) as api:` serves on api.url until the end."""

    scripts: Mapping[str, Sequence[Turn]]
    log_path: Path

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._errors: list[str] = []
        self._serials = itertools.count(1)  # ids of the answers, unique in the run
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the JSONL log is the record

            def do_HEAD(self) -> None:
                self._send(200, b"", "text/plain")

            def do_GET(self) -> None:
                standin._record("GET " + self.path.split("?")[0], {})
                self._send(200, b"{}", "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                path = self.path.split("?")[0]
                if path == "/v1/messages":
                    self._messages(body)
                elif path == "/v1/responses":
                    self._responses(body)
                elif path == "/v1/messages/count_tokens":
                    standin._record(path, body)
                    tokens = len(json.dumps(body)) // 4
                    self._send(200, json.dumps({"input_tokens": tokens}).encode())
                else:  # telemetry, event logging: acknowledged, logged
                    standin._record(path, body)
                    self._send(200, b"{}", "application/json")

            def _messages(self, body: dict[str, Any]) -> None:
                turn = standin._answer(body)
                with standin._lock:
                    serial = next(standin._serials)
                if body.get("stream"):
                    events = list(sse_events(turn, body, serial))
                    payload = "".join(
                        f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events
                    ).encode()
                    self._send(200, payload, "text/event-stream")
                else:
                    self._send(200, json.dumps(message_json(turn, body, serial)).encode())

            def _responses(self, body: dict[str, Any]) -> None:
                turn = standin._answer(body, "/v1/responses")
                with standin._lock:
                    serial = next(standin._serials)
                payload = "".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n"
                    for name, data in response_events(turn, body, serial)
                ).encode()
                self._send(200, payload, "text/event-stream")

            def _send(self, status: int, payload: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def __enter__(self) -> StandIn:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _record(
        self,
        path: str,
        body: dict[str, Any],
        conversation: str | None = None,
        turn: int | None = None,
    ) -> None:
        """Every request, one JSON line: the log is the record the tests read."""
        record = {"path": path, "conversation": conversation, "turn": turn, "body": body}
        with self._lock, self.log_path.open("a") as log:
            log.write(json.dumps(record) + "\n")

    def _answer(self, body: dict[str, Any], path: str = "/v1/messages") -> Turn:
        """The scripted turn for this request, or a short text for a side request; the
        request is logged with the conversation and turn that answered it."""
        key = self.conversation_of(body)
        if key is None:
            self._record(path, body)
            return Text("ok")
        if "input" in body:
            done = responses_turns(body["input"])
        else:
            done = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        self._record(path, body, key, done)
        script = self.scripts[key]
        if done < len(script):
            return script[done]
        with self._lock:
            self._errors.append(f"{key}: turn {done} asked, the script has {len(script)}")
        return Text("(the script has no more turns)")

    def conversation_of(self, body: Mapping[str, Any]) -> str | None:
        """The script a request belongs to: a request with tools whose first user message
        holds the script's marker (the longest marker, if several are held)."""
        if "input" in body:  # Responses: the prompt follows Codex's environment_context
            users = [i for i in body.get("input") or [] if i.get("role") == "user"]
            first = "\n".join(item_text(i) for i in users)
        else:
            messages = body.get("messages") or []
            first = message_text(messages[0]) if messages else ""
        if not body.get("tools") or not first:
            return None
        held = [key for key in self.scripts if key in first]
        return max(held, key=len) if held else None

    # what the tests read

    def log(self) -> list[dict[str, Any]]:
        """Every request logged so far: path, conversation, turn, body."""
        with self._lock:
            text = self.log_path.read_text()
        return [json.loads(line) for line in text.splitlines()]

    def conversation(self, key: str) -> list[dict[str, Any]]:
        """The bodies of the requests of one conversation, in the order they came."""
        return [r["body"] for r in self.log() if r["conversation"] == key]

    def overruns(self) -> list[str]:
        """Conversations that asked for more turns than their script has."""
        with self._lock:
            return list(self._errors)

    def dump(self) -> str:
        """The request log, shortened, for a failing test's message."""
        lines = [f"requests logged in {self.log_path}:"]
        for r in self.log():
            body = r["body"]
            if "input" in body:
                last = item_text((body.get("input") or [{}])[-1])
            else:
                last = message_text((body.get("messages") or [{}])[-1])
            lines.append(
                f"{r['path']} conv={r['conversation']} turn={r['turn']} "
                f"tools={[t.get('name') for t in body.get('tools') or []][:60]} "
                f"system={system_text(body)[:300]!r} "
                f"last={last[:1500]!r}"
            )
        return "\n".join(lines)


def usage(body: Mapping[str, Any]) -> dict[str, int]:
    return {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": 10}


def blocks_of(turn: Turn, serial: int) -> list[dict[str, Any]]:
    """The content blocks of one assistant turn, as a non-streamed message has them."""
    if isinstance(turn, Text):
        return [{"type": "text", "text": turn.text}]
    out: list[dict[str, Any]] = []
    if turn.text:
        out.append({"type": "text", "text": turn.text})
    out.append(
        {
            "type": "tool_use",
            "id": f"toolu_standin_{serial}",
            "name": turn.name,
            "input": turn.input,
        }
    )
    return out


def message_json(turn: Turn, body: Mapping[str, Any], serial: int) -> dict[str, Any]:
    """A non-streamed Messages API response; `serial` makes its ids unique in the run
    (a subagent's tool_use never shares an id with its parent's)."""
    return {
        "id": f"msg_standin_{serial}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", MODEL),
        "content": blocks_of(turn, serial),
        "stop_reason": "tool_use" if isinstance(turn, ToolUse) else "end_turn",
        "stop_sequence": None,
        "usage": usage(body),
    }


def sse_events(
    turn: Turn, body: Mapping[str, Any], serial: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A streamed response, event by event, as the Messages API sends it."""
    start = message_json(turn, body, serial)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = {**usage(body), "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(blocks_of(turn, serial)):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {**block, "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            shell = {**block, "input": {}}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": shell},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if isinstance(turn, ToolUse) else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": 10},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# The Responses API (Codex): the same turns as output items


def item_text(item: Mapping[str, Any]) -> str:
    """All the text of one Responses input item: a message's text parts, a tool call's
    arguments, a tool result's output (a string or text parts)."""
    if item.get("type") == "function_call":
        return str(item.get("arguments", ""))
    if item.get("type") == "function_call_output":
        output = item.get("output")
        if isinstance(output, str):
            return output
        return "\n".join(part.get("text", "") for part in output or [])
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [])


def responses_turns(items: Sequence[Mapping[str, Any]]) -> int:
    """The assistant turns a Responses input already carries: each tool call, and each
    assistant message not followed by its own turn's call."""
    done = 0
    for i, item in enumerate(items):
        following = items[i + 1] if i + 1 < len(items) else {}
        if item.get("type") == "function_call":
            done += 1
        elif item.get("role") == "assistant" and following.get("type") != "function_call":
            done += 1
    return done


def response_items(turn: Turn, body: Mapping[str, Any], serial: int) -> list[dict[str, Any]]:
    """One turn as Responses output items. A call to `mcp__<server>__<tool>` is sent the
    way Codex offers MCP tools: `tool` inside the namespace `mcp__<server>`."""
    items: list[dict[str, Any]] = []
    text = turn.text
    if text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_standin_{serial}",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    if isinstance(turn, ToolUse):
        call: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_standin_{serial}",
            "call_id": f"call_standin_{serial}",
            "name": turn.name,
            "arguments": json.dumps(turn.input(body) if callable(turn.input) else turn.input),
        }
        for tool in body.get("tools") or []:
            space = tool.get("name", "")
            if tool.get("type") == "namespace" and turn.name.startswith(space + "__"):
                call.update(name=turn.name[len(space) + 2 :], namespace=space)
        items.append(call)
    return items


def response_events(
    turn: Turn, body: Mapping[str, Any], serial: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A streamed Responses API answer, event by event: created, each output item done,
    completed with its usage."""
    response_id = f"resp_standin_{serial}"
    yield "response.created", {"type": "response.created", "response": {"id": response_id}}
    for index, item in enumerate(response_items(turn, body, serial)):
        yield (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": index, "item": item},
        )
    tokens = usage(body)
    yield (
        "response.completed",
        {
            "type": "response.completed",
            "response": {
                "id": response_id,
                "usage": {
                    "input_tokens": tokens["input_tokens"],
                    "output_tokens": tokens["output_tokens"],
                    "total_tokens": tokens["input_tokens"] + tokens["output_tokens"],
                },
            },
        },
    )


# The harness: the real Claude Code CLI, headless, against a stand-in


@dataclass
class HostRun:
    """One headless run of an agent host: its exit code, its JSON events, its stderr."""

    code: int
    events: list[dict[str, Any]]
    stderr: str


class ClaudeRun(HostRun):
    """One `claude -p` run (stream-json events)."""

    @property
    def session_id(self) -> str:
        """The host's session id, as its init event gives it."""
        (init,) = [
            e for e in self.events if e.get("type") == "system" and e.get("subtype") == "init"
        ]
        return str(init["session_id"])

    @property
    def result(self) -> dict[str, Any]:
        (result,) = [e for e in self.events if e.get("type") == "result"]
        return result


def host_env(home: Path) -> dict[str, str]:
    """The environment of a user of an agent host: a home and a Claude Code config dir of
    their own (a developer's real config is never read nor written), nothing of memdir's
    or of a host's from the caller's shell."""
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMDIR_", "ANTHROPIC_", "CLAUDE_", "OTEL_"))
    }
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"))
    env.pop("XDG_CONFIG_HOME", None)
    return env


def claude_env(api: StandIn, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """host_env for a Claude Code run that reaches only the stand-in: no telemetry, no
    update checks, no error reports."""
    env = host_env(home)
    env.update(
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_ENABLE_TELEMETRY="0",
        # By default `claude -p` sends its first request without waiting for the MCP
        # servers to connect: on a loaded machine memdir's instructions and tools were then
        # missing from it. Waiting makes what the model sees the same on every run.
        MCP_CONNECTION_NONBLOCKING="false",
    )
    env.update(extra or {})
    return env


def run_claude(
    api: StandIn,
    project: Path,
    home: Path,
    prompt: str | Sequence[str],
    allowed: Sequence[str],
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 60,
    args: Sequence[str] = (),
) -> ClaudeRun:
    """`claude -p PROMPT [ARGS]` in `project`, stream-json out, the given tools allowed
    (root refuses --dangerously-skip-permissions). A list of prompts is one process given
    them one at a time (stream-json input: the next once the last turn's result is out),
    as a user typing them, slash commands included."""
    import shutil

    claude = shutil.which("claude")
    if claude is None:
        raise RuntimeError("the Claude Code CLI is not on PATH: run the suite with `make test`")
    turns = None if isinstance(prompt, str) else list(prompt)
    argv = [claude, "-p", *(["--input-format", "stream-json"] if turns else [prompt])]
    argv += ["--output-format", "stream-json", "--verbose"]
    argv += ["--allowedTools", ",".join(allowed), *args]
    env = claude_env(api, home, extra_env)
    if turns:
        return _run_turns(argv, turns, project, env, timeout, api)
    code, lines, stderr = run_host(argv, project, env, timeout, api)
    return ClaudeRun(code, _events(lines), stderr)


def run_host(
    argv: list[str], project: Path, env: Mapping[str, str], timeout: float, api: StandIn
) -> tuple[int, list[str], str]:
    """One headless host run, stdin closed (a host waits to read more of a prompt there):
    its exit code, stdout lines and stderr; past `timeout`, a failure naming what the
    stand-in was asked."""
    import subprocess

    try:
        proc = subprocess.run(
            argv,
            cwd=project,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        name = os.path.basename(argv[0])
        raise AssertionError(
            f"{name} ran over {timeout} s; stderr:\n{exc.stderr!r}\n{api.dump()}"
        ) from None
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def _events(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (raw.strip() for raw in lines) if line.startswith("{")]


def _run_turns(
    argv: list[str],
    turns: list[str],
    project: Path,
    env: Mapping[str, str],
    timeout: float,
    api: StandIn,
) -> ClaudeRun:
    """One claude process, the prompts given one by one: each after the result of the last."""
    import subprocess
    import tempfile
    import time

    with (
        tempfile.TemporaryFile("w+") as err,
        subprocess.Popen(
            argv,
            cwd=project,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as proc,
    ):
        assert proc.stdin is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        try:
            for turn in turns:
                message = {"type": "user", "message": {"role": "user", "content": turn}}
                proc.stdin.write(json.dumps(message) + "\n")
                proc.stdin.flush()
                while time.monotonic() < deadline:
                    line = proc.stdout.readline()
                    if not line:
                        break
                    lines.append(line)
                    if line.startswith("{") and json.loads(line).get("type") == "result":
                        break
            proc.stdin.close()
            lines += proc.stdout.readlines()
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"claude ran over {timeout} s\n{api.dump()}") from None
        err.seek(0)
        return ClaudeRun(proc.returncode, _events(lines), err.read())


# The harness: the real Codex CLI, headless (`codex exec`), against a stand-in

CODEX_MODEL = "codex-standin"


class CodexRun(HostRun):
    """One `codex exec --json` run (JSONL events)."""

    @property
    def session_id(self) -> str:
        """The host's session (thread) id, as its thread.started event gives it."""
        (started,) = [e for e in self.events if e.get("type") == "thread.started"]
        return str(started["thread_id"])

    def items(self, kind: str) -> list[dict[str, Any]]:
        """The completed items of one type (agent_message, mcp_tool_call, ...)."""
        return [
            e["item"]
            for e in self.events
            if e.get("type") == "item.completed" and e["item"].get("type") == kind
        ]


def codex_provider(url: str) -> str:
    """config.toml lines that send every model request to the stand-in: a provider of its
    own (Responses API, streamed), no update check, no analytics. Codex sends its first
    request once its MCP servers are up or after a grace of 1 s: on a loaded machine
    memdir's tools then missed it; a longer grace makes what the model sees the same on
    every run (as MCP_CONNECTION_NONBLOCKING=false does for Claude Code)."""
    return (
        f'model = "{CODEX_MODEL}"\n'
        'model_provider = "standin"\n'
        "check_for_update_on_startup = false\n"
        "mcp_optional_startup_grace_ms = 30000\n\n"
        "[analytics]\nenabled = false\n\n"
        "[model_providers.standin]\n"
        'name = "standin"\n'
        f'base_url = "{url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "STANDIN_API_KEY"\n'
    )


def codex_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """host_env for a Codex run: its own CODEX_HOME under the test's home, none of the
    caller's OPENAI_/CODEX_ variables."""
    env = {k: v for k, v in host_env(home).items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(CODEX_HOME=str(home / ".codex"), STANDIN_API_KEY="test")
    env.update(extra or {})
    return env


def run_codex(
    api: StandIn,
    project: Path,
    home: Path,
    prompt: str,
    args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CodexRun:
    """`codex exec --json [ARGS] PROMPT` in `project`, stdin closed (else it waits to read
    more of the prompt there)."""
    import shutil

    codex = shutil.which("codex")
    if codex is None:
        raise RuntimeError("the Codex CLI is not on PATH: run the suite with `make test`")
    argv = [codex, "exec", "--json", "--skip-git-repo-check", *args, prompt]
    code, lines, stderr = run_host(argv, project, codex_env(home, extra_env), timeout, api)
    return CodexRun(code, _events(lines), stderr)
