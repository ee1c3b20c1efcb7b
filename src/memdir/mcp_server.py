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
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from . import __version__, advice, sessions, stopping
from .errors import MemdirError
from .markers import defang, inert
from .memory import Memory
from .tools import TOOLS, call_tool, tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .http_access import Access, ASGIApp
    from .stopping import Stop

Host = tuple[str, str]  # a host process (sessions.host_process) and its sessions' surface
Later = Callable[[], list[dict[str, Any]]]  # N1: the comparisons found since the last take

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


def build_server(
    memory: Memory,
    host: Host | None = None,
    on_meta: Callable[[dict[str, Any]], object] | None = None,
    later: Later | None = None,
) -> Server[Any]:
    """A server bound to one Memory; a subagent session sees only read-only tools (U2).
    With a host (its process and surface: a server a host started, as the host's session),
    each call acts as the session that host process runs now (K3: /clear starts another).
    `on_meta` sees the `_meta` of the first call that names a Codex session, under the write
    lock (Codex names its session there, K3). `later`: what the background embedder found
    since the last answer (N1), given with the next one as `later`."""
    read_only = memory.read_only
    offered = tools(read_only=read_only)
    names = {tool.name for tool in offered}
    lock = anyio.Lock()  # one Memory, one SQLite connection: writes take turns
    # A2: the read-only tools run on a companion Memory (its own connection) under
    # their own lock, so a search never waits for a long write (an 868 KB memorize) to end.
    read_lock = anyio.Lock()
    reading: list[Memory] = []
    meta_seen: list[bool] = []  # a call's _meta has named the host's session

    def reader() -> Memory:
        if not reading:
            companion = memory.companion()
            companion.embed_later = memory.embed_later  # the server's background embedder
            reading.append(companion)
        return reading[0]

    def run_tool(on: Memory, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        if host is not None and on is memory:  # writes carry the session: reads need none
            on.follow_host(*host)
        return call_tool(on, name, dict(arguments or {}))

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
        meta = dict(params.meta or {})
        if on_meta is not None and not meta_seen and codex_session(meta) is not None:
            # once, at the first call naming the host's session: a read never waits for
            # the write lock after that (A2)
            meta_seen.append(True)
            try:
                async with lock:
                    await anyio.to_thread.run_sync(on_meta, meta)
            except Exception as exc:  # a bug of ours: logged; the call runs as before
                _unexpected(exc, "reading the call's _meta")
            if reading and reading[0].session_id != memory.session_id:
                reading[0].bind_session(memory.session_id)
        try:
            async with read_lock if read else lock:
                result = await anyio.to_thread.run_sync(
                    run_tool, reader() if read else memory, params.name, params.arguments
                )
        except MemdirError as exc:
            return _error(str(exc))
        except Exception as exc:  # a bug of ours: the agent gets one line, the log the rest
            return _error(_unexpected(exc, f"tool {params.name}"))
        found = later() if later is not None else []
        if found:
            result = {**result, "later": found}
        # R4, at the edge. The ignore below: inert() keeps the dict's shape, typed object
        shown: dict[str, Any] = inert(result)  # type: ignore[assignment]
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
        except Exception as exc:
            message = _unexpected(exc, f"reading {params.uri}")
            raise MCPError(types.INTERNAL_ERROR, defang(message)) from exc
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
        except Exception as exc:
            message = _unexpected(exc, f"prompt {params.name}")
            raise MCPError(types.INTERNAL_ERROR, defang(message)) from exc
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


def _unexpected(exc: Exception, doing: str) -> str:
    """What a caller is told of an error memdir did not expect (a bug), after its traceback
    went to the server's stderr: the SDK would answer only "Internal server error", which
    says neither what failed nor that nothing else is wrong with the server."""
    import sys
    import traceback

    from .secret_scan import redact

    trace = redact("".join(traceback.format_exception(exc)))
    print(f"memdir: error: {doing} failed unexpectedly:\n{trace}", file=sys.stderr, end="")
    return (
        f"{doing} failed unexpectedly ({type(exc).__name__}: {redact(str(exc))}); this is a "
        "bug in memdir, the server's log has the traceback; the server goes on serving"
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=defang(message))], is_error=True
    )


def serve_stdio(
    memory: Memory,
    stop: Stop,
    host: Host | None = None,
    on_meta: Callable[[dict[str, Any]], object] | None = None,
    later: Later | None = None,
) -> None:
    """Until the client closes stdin, or the first stop signal cancels the session."""
    import asyncio

    from mcp.server.stdio import stdio_server

    server = build_server(memory, host, on_meta, later)

    async def main() -> None:
        with anyio.CancelScope() as scope:
            loop = asyncio.get_running_loop()
            stop.when_asked(lambda: loop.call_soon_threadsafe(scope.cancel))
            with stopping.waking(loop, stop), _claimed_stdin() as stdin:
                async with stdio_server(stdin=stdin) as (read_stream, write_stream):
                    options = server.create_initialization_options()
                    await server.run(read_stream, write_stream, options)

    try:
        anyio.run(main)
    finally:
        stop.when_asked(None)


class _StdinLines(anyio.AsyncFile[str]):
    """The wire's lines, each read on a worker thread that a cancel abandons: the SDK's own
    reader cannot be cancelled while it waits, so a stop with the client's stdin still open
    waited for the client's next line for ever (A2, U3)."""

    async def readline(self) -> str:
        return await anyio.to_thread.run_sync(self.wrapped.readline, abandon_on_cancel=True)


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[anyio.AsyncFile[str] | None]:
    """The wire, read from a private copy of fd 0, while fd 0 itself reads the null device
    (as the SDK's own claim does: a handler or child process reading stdin must not eat
    the client's messages). fd 0 is put back at the end."""
    import io
    import os

    try:
        wire = os.dup(0)
    except OSError:  # no fd 0 to read: the SDK's own fallback serves what there is
        yield None
        return
    os.set_inheritable(wire, False)
    saved = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # closefd=False: an abandoned reader may still be blocked on it; it is never reused
    text = io.TextIOWrapper(
        os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    try:
        yield _StdinLines(text)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


GRACE = 5  # seconds open requests and streams get to finish once the server is stopped
# How long an idle keep-alive connection stays open. Longer than what HTTP clients keep an
# idle connection for (httpx, which the MCP SDK uses: 5 s; browsers and Node: 5-60 s), so
# it is the client that drops it first: uvicorn's 5 s default equals httpx's, and a call
# sent just as the server closed the connection failed with a ReadError, nothing logged.
KEEP_ALIVE = 75


def serve_http(
    memory: Memory,
    access: Access,
    stop: Stop,
    host: Host | None = None,
    ui: bool = False,
    later: Later | None = None,
) -> None:
    """Streamable HTTP behind the Host, Origin and token checks of http_access.py; the
    first stop signal ends it through uvicorn's graceful shutdown, bounded by GRACE.
    `ui`: the memory browser too, at /ui/ behind its own token (V6)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from .http_access import Guard

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=access.allowed_hosts(),
        allowed_origins=access.allowed_origins(),
    )
    app = build_server(memory, host, later=later).streamable_http_app(
        host=access.host, transport_security=security
    )

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # stopping.py owns SIGTERM and SIGINT: uvicorn's handlers would force an exit
            # on a second Ctrl+C (skipping the lifespan's shutdown) and re-raise the signal
            # once done.
            yield

    served: ASGIApp = app
    own_token: tuple[str, ...] = ()
    if ui:
        from . import ui as browser

        token = browser.new_token()
        served = browser.beside(app, browser.build_app(memory, token, access.port, browser.PREFIX))
        own_token = (browser.PREFIX,)
        print(f"memory browser: {browser.url(access, token, browser.PREFIX)}", flush=True)
    config = uvicorn.Config(
        Guard(served, access, own_token),
        host=access.host,
        port=access.port,
        log_level="warning",
        timeout_graceful_shutdown=GRACE,
        timeout_keep_alive=KEEP_ALIVE,
    )
    server = Server(config)
    stop.when_asked(lambda: setattr(server, "should_exit", True))
    try:
        server.run()
    finally:
        stop.when_asked(None)


def serve(
    memory: Memory, http: Access | None = None, stop: Stop | None = None, ui: bool = False
) -> int:
    """Serve until the client goes away or the process is stopped; returns the exit code
    (0, or 128 + the signal that stopped it).

    Processes started from here reach the same memory (L5). The session is the one given
    (--session, MEMDIR_SESSION_ID), else the host's (CLAUDE_CODE_SESSION_ID: surface
    claude-code, adopted if new, U1, K3), else the server's own top-level session of
    surface `mcp`, recorded when it ends (U3) -- until a call's _meta names Codex's
    session (surface codex), which the server acts as from then on.

    Shutdown (stdin closed, SIGTERM, SIGINT, at any instant: stopping.py) is one path:
    stop the background threads at their next boundary and join them, record the session,
    then exit. A thread left inside onnxruntime while the interpreter finalises aborts the
    process (exit 134); none is. Nor does the exit wait for a transport's thread still
    blocked on the client's pipe (the SDK reads stdin on a thread that only a line or EOF
    ends: a signal with stdin held open hung the process for good).
    """
    import os
    import sys

    stop = stop or stopping.install()
    if stop.asked:  # stopped during start-up: nothing to serve, nothing to record
        stop.settle()
        return stop.code
    own = host = None
    stop_sweeping: Callable[[], object] = lambda: None  # noqa: E731
    stop_embedding: Callable[[], bool] = lambda: True  # noqa: E731
    code = 1  # an error on the way out (uvicorn's own exits set theirs)
    stopped = True
    try:
        if memory.session_id is None and memory.settings.enabled:
            host = _bind_host_session(memory)
        if memory.session_id is None and memory.settings.enabled:
            own = memory.start_session("mcp")
            memory.bind_session(own.id)

        codex_asked = False

        def adopt_codex(meta: dict[str, Any]) -> None:
            """K3: Codex names its session in each call's _meta, not in the server's
            environment. At the first call that does, the host's session is adopted as
            the hooks adopt it (by no session: the server's own may start none under
            another), the server's own session ends (having written nothing, or what the
            calls before wrote), and the server acts as Codex's -- or, in a subagent's
            server, as that subagent (read-only, U2) -- from then on."""
            nonlocal own, codex_asked
            named = codex_session(meta)
            if own is None or named is None or codex_asked:
                return
            codex_asked = True
            mine = own.id
            memory.bind_session(None)
            try:
                adopted = memory.adopt_session(named[0], "codex", parent=named[1])
            except MemdirError as exc:
                memory.bind_session(mine)  # the server goes on as its own session
                print(f"memdir: warning: Codex's session is not used: {exc}", file=sys.stderr)
                return
            memory.bind_session(mine)
            memory.end_session(mine)
            memory.bind_session(adopted.id)
            os.environ.update(memory.child_env())
            own = None

        os.environ.update(memory.child_env())
        stop_sweeping = _start_sweeper(memory)
        stop_embedding, later = _start_embedder(memory)
        if not stop.asked:
            if http is None:
                serve_stdio(memory, stop, host, adopt_codex, later)
            else:
                serve_http(memory, http, stop, host, ui, later)
        code = stop.code
    except SystemExit as exc:  # uvicorn's exit when it cannot start (port in use: 3)
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        stopped = stop_embedding()
        stop_sweeping()
        memory.flush_hits()
        if own is not None:
            memory.end_session(own.id)
    stop.settle()
    if stop.asked:
        code = stop.code
    if not stopped or _blocked_threads():
        memory.close()
        _exit_now(code)  # never finalise with a thread in the model, nor wait for a pipe
    return code


def codex_session(meta: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """The session a Codex tool call is made in, from its _meta (x-codex-turn-metadata):
    (Codex's session id, None), or, in a subagent Codex spawned (which gets a server of
    its own), (the subagent's thread id, its parent's)."""
    turn = meta.get("x-codex-turn-metadata")
    if not isinstance(turn, dict):
        return None
    session, thread = turn.get("session_id"), turn.get("thread_id")
    parent = turn.get("parent_thread_id")
    if turn.get("thread_source") == "subagent" and thread and parent and thread != parent:
        return str(thread), str(parent)
    return (session, None) if isinstance(session, str) and session else None


def _bind_host_session(memory: Memory) -> tuple[str, str] | None:
    """K3: act as the host's session (CLAUDE_CODE_SESSION_ID), so every write carries its
    id; the host's SessionEnd hook, not this server, records its end (U3). A host id
    memdir cannot use is said on stderr, and the server runs as its own session. Returns
    the host process and surface to follow (the host's session changes at /clear)."""
    import os
    import sys

    try:
        host = sessions.host_session(os.environ)
        if host is not None:
            memory.bind_session(memory.adopt_session(*host).id)
    except MemdirError as exc:
        print(f"memdir: warning: the host's session is not used: {exc}", file=sys.stderr)
        return None
    if host is None:
        return None
    follow = sessions.host_process(os.environ), host[1]
    memory.follow_host(*follow)  # the host's session now: later changes are followed
    return follow


def _blocked_threads() -> list[str]:
    """Threads that would keep the interpreter from exiting: the transports' workers still
    inside a read or write of the client's pipe (ours have all been joined)."""
    import threading

    return [
        t.name
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]


JOIN_TIMEOUT = 30.0  # seconds a background thread has to reach its next boundary


def _start_embedder(memory: Memory) -> tuple[Callable[[], bool], Later | None]:
    """Q2: the background embedder (embed_worker.EmbedWorker) when searches use vectors.
    It loads the model (the first hybrid search does not wait ~0.35 s for it), then embeds
    what has no vector: at start, after every write, after a search that met such items;
    and it compares each new fact with the others by meaning (N1), which the next answer
    reports. A read-only session only loads the model. Returns the stop (True once the
    thread has ended) and what the comparisons found (None: nothing compares)."""
    import sys

    from .embed_worker import EmbedWorker

    if not memory.settings.enabled:
        return lambda: True, None
    try:
        if memory.search_mode() == "lexical":
            return lambda: True, None
    except MemdirError:
        # semantic configured without the extra: the first search says so
        return lambda: True, None

    def warn(message: str) -> None:
        print(f"memdir: warning: {message}", file=sys.stderr)

    worker = EmbedWorker(memory, embed=not memory.read_only, warn=warn)
    if worker.embed:
        memory.embed_later = worker.poke
        memory.compare_later = worker.compare
    worker.start()

    def stop() -> bool:
        memory.embed_later = memory.compare_later = None
        return worker.stop(JOIN_TIMEOUT)

    return stop, worker.take if worker.embed else None


def _exit_now(code: int) -> None:
    """Leave without finalising the interpreter: no thread is waited for."""
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
