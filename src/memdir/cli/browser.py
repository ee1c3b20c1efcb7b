"""`memdir ui`: the memory browser (V), a local web page."""

from __future__ import annotations

import argparse
import os

from ..errors import ValidationError
from .common import Builder, memory_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_PORT = 8767


def add_ui(b: Builder) -> None:
    ui = b.command(
        b.commands,
        "ui",
        _ui,
        "serve the memory browser on loopback and print its address (with its access token)",
    )
    ui.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"the port to serve on (default {DEFAULT_PORT}; 0: any free one)",
    )
    ui.add_argument("--open", action="store_true", help="open the address in a web browser")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to serve on (default 127.0.0.1; another needs --allow-remote)",
    )
    ui.add_argument(
        "--allow-remote",
        action="store_true",
        help="serve on an address other than loopback (the access token still gates it)",
    )
    ui.add_argument(
        "--host-name",
        action="append",
        metavar="NAME",
        help="a name clients use to reach it (their Host header); repeat for more",
    )


def _ui(args: argparse.Namespace) -> Any:
    from .. import stopping

    stop = stopping.install()
    from .. import http_access, ui

    if not 0 <= args.port < 65536:
        raise ValidationError(f"bad --port {args.port}: give a port from 1 to 65535 (0: any)")
    if not args.allow_remote and not _loopback(args.host):
        raise ValidationError(
            f"--host {args.host} is not a loopback address: memory would be open to the "
            "network; add --allow-remote if that is what you want (the access token still "
            "gates every request)"
        )
    port = args.port or _any_port(args.host)
    _check_free(args.host, port)
    saved = os.environ.pop(http_access.TOKEN_ENV, None)  # the browser has its own token
    try:
        access = http_access.plan(
            f"{_bracketed(args.host)}:{port}",
            allow_remote=args.allow_remote,
            host_names=args.host_name,
            environ={},
        )
    finally:
        if saved is not None:
            os.environ[http_access.TOKEN_ENV] = saved
    access = http_access.Access(access.host, access.port, access.remote, access.names)
    memory = memory_for(args, surface="ui")
    code = ui.serve(memory, access, stop, open_browser=args.open)
    if code:
        raise SystemExit(code)
    return None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _loopback(host: str) -> bool:
    import ipaddress

    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _check_free(host: str, port: int) -> None:
    """One clear line for a port in use, before the server tries it (uvicorn's own
    refusal is a log line and exit 3)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ValidationError(
                    f"port {port} is in use on {host}: give another with --port N "
                    "(--port 0: any free one)"
                ) from None
            raise ValidationError(f"cannot serve on {host}:{port}: {exc.strerror}") from None


def _any_port(host: str) -> int:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host.strip("[]"), 0))
        return int(probe.getsockname()[1])


COMMANDS = {"ui": add_ui}
