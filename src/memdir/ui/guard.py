"""V6: who may use the memory browser, checked in front of every request.

- Host and Origin: http_access.Guard, as for `memdir serve --http` (a DNS-rebinding page
  or another site's form is refused before anything here runs).
- The token: made at start and printed in the URL (the Jupyter way). A request carrying
  it (`?token=`) gets a browser session: a random id in an HttpOnly, SameSite=Strict
  cookie, and is sent on to the same address without the token (so it stays out of the
  history and of Referer headers). Every other request needs that cookie: else 403.
- Writes (POST) need the session's CSRF token, a second random value that only pages of
  this server carry in their forms: else 403, and nothing is written.
- Every answer carries a Content-Security-Policy that lets a page run only this server's
  own script and style (no inline script, nothing from elsewhere), so stored text that
  slipped past escaping still could not run.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

if TYPE_CHECKING:
    from ..http_access import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin: a form post then names its origin (no-referrer makes it "null", which
    # the Origin check refuses); other sites never see an address of this server
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
MAX_SESSIONS = 256  # browser sessions kept; the oldest goes first
FORBIDDEN = (
    "403 Forbidden: open the address `memdir ui` printed (it carries the access token); "
    "this browser has no session with this server\n"
)
CSRF_REFUSED = (
    "403 Forbidden: this write did not carry the page's CSRF token, so nothing was "
    "changed; reload the page and submit the form again\n"
)


class Gate:
    """ASGI middleware: the token, then the session cookie, then (for a POST) the CSRF
    token; sets `scope["state"]["csrf"]` for the pages' forms and the security headers on
    every answer."""

    def __init__(self, app: ASGIApp, token: str, cookie: str, path: str = "/") -> None:
        self.app = app
        self.token = token
        self.cookie = cookie  # the cookie's name: one per server (port), so two servers coexist
        self.path = path
        self.sessions: dict[str, str] = {}  # browser session id -> its CSRF token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.pop("token", None)
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            await self._start_session(scope, query, secured)
            return
        sid = _cookies(scope).get(self.cookie)
        csrf = self.sessions.get(sid or "")
        if csrf is None:
            await _plain(secured, 403, FORBIDDEN)
            return
        scope.setdefault("state", {})["csrf"] = csrf
        if scope["method"] not in ("GET", "HEAD"):
            # the CSRF token travels as a header (the page's script) or a form field,
            # read here from the body, which is then handed on to the app unchanged
            body = await _read_body(receive)
            sent = _headers(scope).get("x-csrf-token") or _form_field(body, "csrf")
            if not sent or not hmac.compare_digest(sent.encode(), csrf.encode()):
                await _plain(secured, 403, CSRF_REFUSED)
                return
            receive = _replay(body)
        await self.app(scope, receive, secured)

    async def _start_session(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        sid = secrets.token_urlsafe(24)
        while len(self.sessions) >= MAX_SESSIONS:
            self.sessions.pop(next(iter(self.sessions)))
        self.sessions[sid] = secrets.token_urlsafe(24)
        where = scope["path"]  # the whole path (Starlette keeps a mount's prefix in it)
        if query:
            where += "?" + urlencode(query)
        cookie = f"{self.cookie}={sid}; Path={self.path}; HttpOnly; SameSite=Strict"
        headers = [
            (b"location", where.encode()),
            (b"set-cookie", cookie.encode()),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name.lower() == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key, _, val = part.strip().partition("=")
                out.setdefault(key, val)
    return out


MAX_BODY = 8 * 2**20  # a form larger than this is refused (an entry is capped well below)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            break
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _form_field(body: bytes, name: str) -> str | None:
    for key, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        if key == name:
            return value
    return None


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
