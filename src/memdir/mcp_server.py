"""The MCP server (A2) over the official `mcp` SDK: the tools of tools.py, unchanged.

It uses the SDK's low-level Server so that the schemas clients see are exactly the ones
tools.py exports for direct function calling (A3), and so that a failed call comes back as a
tool error carrying our one-line message (the high-level server would turn a plain exception
into a generic "Error executing tool").

Imported only by `memdir serve`: the SDK costs about a second of import time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from . import __version__, advice
from .errors import MemdirError
from .markers import defang, inert
from .memory import Memory
from .tools import TOOLS, call_tool, tools

HOT_URI = "memdir://hot"
RECALL_URI = "memdir://recall"
RECALL_PROMPT = types.Prompt(
    name="recall",
    description="The memory to start a step with: hot memory, the long-term index and, with "
    "a task, its notes and its ancestors', within the recall budget.",
    arguments=[
        types.PromptArgument(name="task", description="The current task id.", required=False)
    ],
)
BOOT_PROMPT = types.Prompt(
    name="boot",
    description="The context a new session starts with: hot memory, identity files, "
    "today's and yesterday's logs and, for a main session, the long-term index.",
    arguments=[],
)
SWEEP_EVERY = 6 * 3600  # T4: the retention sweep, at start and then this often

INSTRUCTIONS = """memdir is your long-term memory; it outlasts this session.
- Hot memory (HOT.md, below) is shown at the start of every session. Keep it to what every
  turn needs: who the user is, two or three durable preferences, the active project.
- Everything else goes to the fact archive (memory_update, target 'fact', with a category)
  or, for how-to knowledge, to a procedure (procedure_write).
- Search before you ask the user something they may have told you (memory_search).
"""


def build_server(memory: Memory) -> Server[Any]:
    """A server bound to one Memory; a subagent session sees only read-only tools (U2)."""
    read_only = memory.read_only
    offered = tools(read_only=read_only)
    names = {tool.name for tool in offered}
    lock = anyio.Lock()  # one Memory, one SQLite connection: writes take turns
    # Issue 12: the read-only tools run on a companion Memory (its own connection) under
    # their own lock, so a search never waits for a long write (an 868 KB memorize) to end.
    read_lock = anyio.Lock()
    reading: list[Memory] = []

    def reader() -> Memory:
        if not reading:
            companion = memory.companion()
            companion.embed_later = memory.embed_later  # the server's background embedder
            reading.append(companion)
        return reading[0]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        # R4: every text the server sends an agent is inert: tool list, tool results and
        # errors, resources, prompts, instructions (markers.py)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    title=tool.title,
                    description=defang(tool.description),
                    input_schema=tool.input_schema,
                    output_schema=tool.output_schema,
                    annotations=types.ToolAnnotations(
                        title=tool.title,
                        read_only_hint=tool.read_only,
                        destructive_hint=tool.destructive,
                        idempotent_hint=tool.idempotent,
                        open_world_hint=False,
                    ),
                )
                for tool in offered
            ]
        )

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            why = " (this is a read-only subagent session)" if read_only else ""
            return _error(f"unknown tool {params.name!r}{why}: the tools are {', '.join(names)}")
        read = TOOLS[params.name].read_only
        try:
            async with read_lock if read else lock:
                result = await anyio.to_thread.run_sync(
                    call_tool,
                    reader() if read else memory,
                    params.name,
                    dict(params.arguments or {}),
                )
        except MemdirError as exc:
            return _error(str(exc))
        shown: dict[str, Any] = inert(result)  # type: ignore[assignment]  # R4, at the edge
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(shown, ensure_ascii=False))],
            structured_content=shown,
        )

    readers = {HOT_URI: memory.hot_injected, RECALL_URI: lambda: memory.recall().text}

    async def run_as_mcp(run: Callable[..., Any], *args: Any) -> Any:
        """run(*args) on a worker thread, its advice in tool calls (advice.py)."""
        async with lock:
            return await anyio.to_thread.run_sync(advice.running_as, "mcp", run, *args)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="hot-memory",
                    uri=HOT_URI,
                    mime_type="text/markdown",
                    description="HOT.md: what every turn needs to know.",
                ),
                types.Resource(
                    name="recall",
                    uri=RECALL_URI,
                    mime_type="text/markdown",
                    description="Hot memory and the long-term index, within the recall budget.",
                ),
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        reader = readers.get(str(params.uri))
        if reader is None:
            # An MCPError reaches the client as is; a plain exception becomes "Internal server
            # error" plus a traceback in the server log. -32602 is "not found" (SEP-2164).
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown resource {params.uri}: the resources are {', '.join(readers)}",
            )
        try:
            text = defang(await run_as_mcp(reader))
        except MemdirError as exc:  # our one-line message (a HOT.md linked out, X1), as prompts
            raise MCPError(types.INVALID_PARAMS, defang(str(exc))) from exc
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=str(params.uri), mime_type="text/markdown", text=text
                )
            ]
        )

    def recall_text(arguments: dict[str, str]) -> str:
        return memory.recall(task=arguments.get("task") or None).text

    def boot_text(arguments: dict[str, str]) -> str:
        return "\n".join(f"## {p.name}\n{p.text.rstrip()}\n" for p in memory.boot().parts)

    prompts = {RECALL_PROMPT.name: recall_text, BOOT_PROMPT.name: boot_text}

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        # none: every resource has a fixed URI. Answered, not -32601, which clients such as
        # the MCP Inspector treat as a failed connection.
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[RECALL_PROMPT, BOOT_PROMPT])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        render = prompts.get(params.name)
        if render is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown prompt {params.name!r}: the prompts are {', '.join(prompts)}",
            )
        arguments = dict(params.arguments or {})
        try:
            text = defang(await run_as_mcp(render, arguments))
        except MemdirError as exc:
            raise MCPError(types.INVALID_PARAMS, defang(str(exc))) from exc
        return types.GetPromptResult(
            description=f"memdir {params.name}",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    try:
        hot_now = memory.hot_injected() if memory.settings.enabled else ""
    except MemdirError as exc:  # a HOT.md that may not be read (X1): say why, serve the rest
        hot_now = f"(hot memory is not shown: {exc})"
    return Server(
        "memdir",
        version=__version__,
        instructions=defang(
            INSTRUCTIONS + (f"\n[Hot memory]\n{hot_now}" if hot_now.strip() else "")
        ),
        on_list_tools=list_tools,
        on_call_tool=call,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=defang(message))], is_error=True
    )


def serve_stdio(memory: Memory) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(memory)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def serve_http(memory: Memory, host: str, port: int) -> None:
    import uvicorn

    app = build_server(memory).streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    uvicorn.Server(config).run()


def serve(memory: Memory, http: tuple[str, int] | None = None) -> None:
    """Serve until the client goes away or the process is stopped.

    Processes started from here reach the same memory (L5). Without a session given, the
    server runs as its own top-level session of surface `mcp`, recorded when it ends (U3).

    Shutdown (stdin closed, SIGTERM, SIGINT) is the same path every time (issue 11): stop
    the background threads at their next boundary and join them, record the session, then
    let the interpreter exit. A thread left inside onnxruntime while the interpreter
    finalises aborts the process (exit 134); none is.
    """
    import os

    restore = _exit_on_sigterm()
    own = None
    stop_sweeping: Callable[[], object] = lambda: None  # noqa: E731
    stop_embedding: Callable[[], bool] = lambda: True  # noqa: E731
    try:
        if memory.session_id is None and memory.settings.enabled:
            own = memory.start_session("mcp")
            memory.bind_session(own.id)
        os.environ.update(memory.child_env())
        stop_sweeping = _start_sweeper(memory)
        stop_embedding = _start_embedder(memory)
        if http is None:
            serve_stdio(memory)
        else:
            serve_http(memory, *http)
    finally:
        with _signals_held():
            stopped = stop_embedding()
            stop_sweeping()
            memory.flush_hits()
            if own is not None:
                memory.end_session(own.id)
        restore()
        if not stopped:  # still inside the model after JOIN_TIMEOUT: never finalise
            _exit_now()


JOIN_TIMEOUT = 30.0  # seconds a background thread has to reach its next boundary


def _start_embedder(memory: Memory) -> Callable[[], bool]:
    """Issue 11: the background embedder (vectors.EmbedWorker) when searches use vectors.
    It loads the model (the first hybrid search does not wait ~0.35 s for it, and the
    duplicate guard compares meaning from the first write on), then embeds what has no
    vector: at start, after every write, after a search that met such items. A read-only
    session only loads the model. Returns the stop: True once the thread has ended."""
    import sys

    from . import vectors

    if not memory.settings.enabled:
        return lambda: True
    try:
        if memory.search_mode() == "lexical":
            return lambda: True
    except MemdirError:
        return lambda: True  # semantic configured without the extra: the first search says so

    def warn(message: str) -> None:
        print(f"memdir: warning: {message}", file=sys.stderr)

    worker = vectors.EmbedWorker(memory, embed=not memory.read_only, warn=warn)
    if worker.embed:
        memory.embed_later = worker.poke
    worker.start()

    def stop() -> bool:
        memory.embed_later = None
        return worker.stop(JOIN_TIMEOUT)

    return stop


def _signals_held() -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM wait while the server cleans up: a second Ctrl+C must not cut
    the join of a thread short (that is the abort), nor leave the session unrecorded."""
    import signal
    import threading

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {
            sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return held()


def _exit_now() -> None:
    """Leave without finalising the interpreter, with the code the exit in hand means."""
    import os
    import sys

    error = sys.exc_info()[1]
    code = 0
    if isinstance(error, SystemExit):
        code = error.code if isinstance(error.code, int) else 1
    elif isinstance(error, KeyboardInterrupt):
        code = 130
    elif error is not None:
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_on_sigterm() -> Callable[[], object]:
    """SIGTERM (how service managers and MCP clients stop a server) must end the session
    like Ctrl+C does (U3): by default it kills the process before `finally` runs. uvicorn
    re-raises the signal it caught once it has shut down, which lands here too."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _start_sweeper(memory: Memory) -> Callable[[], object]:
    """T4: prune expired task notes now and every six hours while serving, on a thread of
    its own with its own connection. A failed sweep is reported on stderr, never fatal."""
    import sys
    import threading

    if not memory.settings.enabled or memory.read_only:
        return lambda: None
    stop = threading.Event()

    def sweep() -> None:
        try:
            with Memory(memory.state.path, session=memory.session_id) as own:
                own.prune()
        except MemdirError as exc:
            print(f"memdir: warning: task-note sweep failed: {exc}", file=sys.stderr)

    def loop() -> None:
        while True:
            sweep()
            if stop.wait(SWEEP_EVERY):
                return

    thread = threading.Thread(target=loop, name="memdir-sweep", daemon=True)
    thread.start()

    def stop_and_join() -> None:
        stop.set()
        thread.join(JOIN_TIMEOUT)  # a sweep under way ends its transaction first

    return stop_and_join
