"""The memory browser (V): `memdir ui` serves it on loopback, and `memdir serve --http
... --ui` mounts it at /ui beside the MCP endpoint.

A Starlette app (the MCP SDK brings Starlette and uvicorn) rendering Jinja2 templates
with autoescape, its stylesheet and one small script shipped in memdir/data/ui (no CDN:
it works offline). guard.py holds who may use it (V6), app.py the pages (V1-V5).
Nothing here is imported by any other command.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..http_access import Access, ASGIApp
    from ..memory import Memory
    from ..stopping import Stop

PREFIX = "/ui"  # where `memdir serve --http --ui` mounts it
GRACE = 3  # seconds open requests get to finish once the server is stopped


def opener(memory: Memory) -> Callable[[], Memory]:
    """A new Memory on the same store, acting as `memory`'s session, for each request."""
    from ..memory import Memory

    state, session, env = memory.state.path, memory.session_id, memory.child_env()

    def open_memory() -> Memory:
        return Memory(state, session=session, surface="ui", env=env, agent=memory.agent)

    return open_memory


def build_app(memory: Memory, token: str, port: int, prefix: str = "") -> ASGIApp:
    """The browser behind its token gate (guard.Gate), for `prefix` ("" or PREFIX)."""
    from . import app as pages
    from .guard import Gate

    browser = pages.Browser(opener(memory), prefix, memory.session_id)
    return Gate(pages.build(browser), token, pages.cookie_name(port), prefix or "/")


def beside(app: ASGIApp, browser: ASGIApp, prefix: str = PREFIX) -> ASGIApp:
    """`app` with the browser at `prefix` (`serve --http --ui`): a request under it goes
    to the browser (its path kept whole, `root_path` set, as Starlette mounts do), every
    other request and the lifespan events to `app`."""

    async def dispatch(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == prefix:
            await _redirect(send, prefix + "/" + _query(scope))
        elif path.startswith(prefix + "/"):
            inner = {**scope, "root_path": scope.get("root_path", "") + prefix}
            await browser(inner, receive, send)
        else:
            await app(scope, receive, send)

    return dispatch


def _query(scope: Any) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    return "?" + query if query else ""


async def _redirect(send: Any, where: str) -> None:
    headers = [(b"location", where.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 307, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def url(access: Access, token: str, prefix: str = "") -> str:
    base = access.url.removesuffix("/mcp")
    return f"{base}{prefix}/?token={token}"


def new_token() -> str:
    return secrets.token_urlsafe(32)


@contextlib.contextmanager
def ui_session(memory: Memory) -> Iterator[None]:
    """The browser's writes are a session of surface `ui` (U1), recorded when it stops;
    unless the caller named one (--session), or memory is disabled (nothing is written)."""
    own = None
    if memory.session_id is None and memory.settings.enabled:
        own = memory.start_session("ui")
        memory.bind_session(own.id)
    try:
        yield
    finally:
        if own is not None:
            with contextlib.suppress(Exception):
                memory.end_session(own.id)


def serve(memory: Memory, access: Access, stop: Stop, open_browser: bool = False) -> int:
    """Serve the browser at access's address until stopped; prints its URL (with the
    token) on stdout. Returns the exit code."""
    import uvicorn

    from ..http_access import Guard

    token = new_token()
    with ui_session(memory):
        address = url(access, token)
        asgi = Guard(build_app(memory, token, access.port), access)

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # stopping.py owns SIGTERM and SIGINT

            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started:
                    _announce(memory, address)
                    if open_browser:
                        import webbrowser

                        webbrowser.open(address)

        config = uvicorn.Config(
            asgi,
            host=access.host,
            port=access.port,
            log_level="warning",
            timeout_graceful_shutdown=GRACE,
            lifespan="off",
        )
        server = Server(config)
        stop.when_asked(lambda: setattr(server, "should_exit", True))
        code = 0
        try:
            server.run()
        except SystemExit as exc:  # uvicorn's exit when it cannot start (port in use)
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            stop.when_asked(None)
    stop.settle()
    return stop.code if stop.asked else code


def _announce(memory: Memory, address: str) -> None:
    print(
        f"memdir ui: the memory browser of {memory.state.path}\n"
        f"open: {address}\n"
        "(the address carries this run's access token: keep it to yourself)\n"
        "Press Ctrl+C to stop.",
        flush=True,
    )
    sys.stdout.flush()
