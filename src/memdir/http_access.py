"""Who may talk to `memdir serve --http` (A2, X), checked on every request.

1. Host: the name the client used must be one this server answers to — the loopback
   names, the bind address, and each `--host-name`; else 421. This is what defeats DNS
   rebinding: a page on evil.example that rebinds its name to 127.0.0.1 still sends
   `Host: evil.example`.
2. Origin: a browser always names the page that makes a cross-site request; one that is
   not this server itself (or an `--allow-origin`) gets 403, so no web page can drive the
   server from a user's browser, whichever address it reaches it at. A request with no
   Origin is not from a web page (MCP clients send none).
3. Bearer token, in remote mode (`--allow-remote`) always, on loopback when one is given:
   `Authorization: Bearer <token>`, compared in constant time; else 401 with a
   WWW-Authenticate header. Never logged, never in an error message.

`serve --http --ui` mounts the memory browser at /ui/: there 1 and 2 hold, and 3 is the
browser's own token and session cookie (ui/guard.py, V6), since a browser cannot send the
bearer header; every other path keeps the bearer token.

On loopback with no token given, 1 and 2 are the whole check: whatever else reaches
127.0.0.1 runs on this machine, and a process of the same user can read and write the
store's files directly. On a machine shared with other users, give a token.

The token comes from `MEMDIR_TOKEN`, or a file (`--token-file`, outside the repository),
or is generated at start and printed once on stderr. Never from config.toml: that file may
be committed, and a repository the user clones could then choose the server's token.

The checks run in front of the MCP SDK's app, before it sees a request; the SDK's own Host
and Origin checks are given the same lists.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::")
TOKEN_ENV = "MEMDIR_TOKEN"
TOKEN_MIN, TOKEN_MAX = 16, 512
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
REALM = 'Bearer realm="memdir"'
REPORTED_MAX = 100  # distinct refusals told on stderr; a flood of them is not echoed


@dataclass(frozen=True)
class Access:
    """What the server answers to: its address, the names and origins it accepts, and
    the token a request must carry (None: no token on loopback)."""

    host: str
    port: int
    remote: bool
    names: tuple[str, ...]
    origins: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)  # repr: never in a traceback
    token_source: str = ""  # "generated", "MEMDIR_TOKEN" or the token file's path

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in WILDCARDS else self.host
        return f"http://{_authority(host, self.port)}/mcp"

    def allowed_hosts(self) -> list[str]:
        """Host header values: each name with the port, and alone on port 80."""
        hosts = [_authority(name, self.port) for name in self.names]
        if self.port == 80:
            hosts += [_authority(name, None) for name in self.names]
        return hosts

    def allowed_origins(self) -> list[str]:
        own = [
            f"{scheme}://{_authority(name, self.port)}"
            for name in self.names
            for scheme in ("http", "https")
        ]
        return own + list(self.origins)


def plan(
    bind: str,
    allow_remote: bool = False,
    host_names: list[str] | None = None,
    origins: list[str] | None = None,
    token_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Access:
    """Check `--http HOST:PORT` and the options that go with it; find or make the token.
    Every mistake is one ValidationError that says what to do."""
    environ = os.environ if environ is None else environ
    host, port = _host_port(bind)
    loopback = _is_loopback(host)
    if not loopback and not allow_remote:
        raise ValidationError(
            f"--http {bind} is not a loopback address: memory would be open to the network; "
            "add --allow-remote if that is what you want (it then needs a bearer token)"
        )
    names = [_host_name(name) for name in host_names or []]
    if host in WILDCARDS and not names:
        raise ValidationError(
            f"--http {bind} listens on every address, and clients' Host headers are checked: "
            "name the host or address clients use to reach it with --host-name NAME "
            "(repeat for more)"
        )
    known = [*LOOPBACK_NAMES, *([] if host in WILDCARDS else [host]), *names]
    remote = allow_remote or not loopback
    token, source = _token(environ, token_file, required=remote)
    return Access(
        host=host,
        port=port,
        remote=remote,
        names=tuple(dict.fromkeys(name.lower() for name in known)),
        origins=tuple(dict.fromkeys(_origin(o) for o in origins or [])),
        token=token,
        token_source=source,
    )


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValidationError(f"bad --http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    if "[" in host or "]" in host or (":" in host and not _is_ip(host)):
        raise ValidationError(
            f"bad --http {value!r}: give HOST:PORT, an IPv6 address in brackets ([::1]:8765)"
        )
    return _host_name(host, option="--http"), int(port)


def _host_name(value: str, option: str = "--host-name") -> str:
    """A host name or an IP address, as it appears in a Host header (without the port)."""
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if _is_ip(name):
        return str(ipaddress.ip_address(name))
    labels = name.rstrip(".").split(".")
    ok = 0 < len(name) <= 253 and all(
        0 < len(label) <= 63
        and label[0] != "-"
        and label[-1] != "-"
        and all(c.isascii() and (c.isalnum() or c == "-") for c in label)
        for label in labels
    )
    if not ok:
        raise ValidationError(
            f"bad {option} {value!r}: give a host name (e.g. mybox.lan) or an IP address"
        )
    return name.rstrip(".")


def _origin(value: str) -> str:
    scheme, sep, rest = value.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or "/" in rest:
        raise ValidationError(
            f"bad --allow-origin {value!r}: give SCHEME://HOST[:PORT], "
            "e.g. http://localhost:6274, as a browser sends it"
        )
    return f"{scheme.lower()}://{rest.lower()}"


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    return host == "localhost" or (_is_ip(host) and ipaddress.ip_address(host).is_loopback)


def _authority(name: str, port: int | None) -> str:
    host = f"[{name}]" if ":" in name else name
    return host if port is None else f"{host}:{port}"


def _token(
    environ: Mapping[str, str], token_file: str | None, required: bool
) -> tuple[str | None, str]:
    """The token given (MEMDIR_TOKEN, else --token-file), or a new one when remote
    serving needs one. A given token is always required, on loopback too."""
    given = environ.get(TOKEN_ENV, "")
    if given:
        return _checked(given, TOKEN_ENV), TOKEN_ENV
    if token_file:
        return _checked(_read_token_file(token_file), f"the token in {token_file}"), token_file
    if required:
        return secrets.token_urlsafe(32), "generated"
    return None, ""


def _read_token_file(path: str) -> str:
    path = os.path.expanduser(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(TOKEN_MAX * 4)
    except FileNotFoundError:
        raise NotFoundError(
            f"no token file {path}: write a token into it first, e.g. {MAKE_TOKEN} > {path}",
            kind="token file",
            path=path,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValidationError(f"cannot read the token file {path}: {why}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValidationError(
            f"the token file {path} must hold the token on one line, and nothing else"
        )
    if hasattr(os, "getuid") and os.stat(path).st_mode & 0o077:
        print(
            f"memdir: warning: the token file {path} is readable by other users; chmod 600 {path}",
            file=sys.stderr,
        )
    return lines[0]


def _checked(token: str, where: str) -> str:
    token = token.strip()
    if not (TOKEN_MIN <= len(token) <= TOKEN_MAX) or not all(
        c.isascii() and c.isprintable() and not c.isspace() for c in token
    ):
        raise ValidationError(
            f"{where} is not a usable bearer token: it needs {TOKEN_MIN} to {TOKEN_MAX} "
            f"printable ASCII characters without spaces; make one with {MAKE_TOKEN}"
        )
    return token


# -- the check in front of the app --------------------------------------------------------


class Guard:
    """ASGI middleware: Host (421), then Origin (403), then the bearer token (401), for
    every HTTP request whatever its path; lifespan events pass through."""

    def __init__(self, app: ASGIApp, access: Access, own_token: tuple[str, ...] = ()) -> None:
        """`own_token`: path prefixes whose app checks a token of its own (the memory
        browser's, V6: a browser cannot send the bearer header); Host and Origin are
        checked there too."""
        self.app = app
        self.own_token = own_token
        self.hosts = frozenset(access.allowed_hosts())
        self.origins = frozenset(access.allowed_origins())
        # Digests of equal length: compare_digest then takes the same time whatever the
        # length of what a client sent.
        self.digest = None if access.token is None else _digest(access.token.encode())
        self.answers_to = ", ".join(access.allowed_hosts())
        self.reported: set[tuple[str, str]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route speaks it: refused before the app
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan: start-up and shutdown of the app
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            self._report(
                "Host",
                host,
                f"this server answers to {self.answers_to}; "
                "add --host-name NAME to serve another name",
            )
            await _refuse(send, 421, "Invalid Host header: this server does not answer to it")
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            self._report("Origin", origin, "add --allow-origin ORIGIN to let that page in")
            await _refuse(send, 403, "Invalid Origin header: no web page may use this server")
            return
        if self.digest is not None and not self._own_token(scope.get("path", "")):
            problem = self._token_problem(headers.get("authorization"))
            if problem is not None:
                await _refuse(send, 401, problem[0], {"www-authenticate": problem[1]})
                return
        await self.app(scope, receive, send)

    def _own_token(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.own_token)

    def _token_problem(self, authorization: str | None) -> tuple[str, str] | None:
        """None if the request carries the token, else (body, WWW-Authenticate)."""
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return (
                "Missing bearer token: send the header Authorization: Bearer <token> "
                "(memdir serve printed the token at start, or uses $MEMDIR_TOKEN)",
                REALM,
            )
        if not hmac.compare_digest(_digest(given.strip().encode("latin-1")), self.digest or b""):
            return (
                "Invalid bearer token",
                f'{REALM}, error="invalid_token", error_description="the token is wrong"',
            )
        return None

    def _report(self, what: str, value: str, hint: str) -> None:
        """Tell the user once per distinct value: a name they forgot shows up at once."""
        if (what, value) in self.reported or len(self.reported) >= REPORTED_MAX:
            return
        self.reported.add((what, value))
        shown = ascii(value[:200])
        print(f"memdir: refused a request with {what} {shown}: {hint}", file=sys.stderr)


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; a repeated Host or Origin is refused by
    keeping a value no list holds."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        out[name] = "\0repeated" if name in out and name in ("host", "origin") else value
    return out


async def _refuse(send: Send, status: int, text: str, extra: dict[str, str] | None = None) -> None:
    body = (text + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in (extra or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
