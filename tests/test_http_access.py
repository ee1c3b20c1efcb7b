"""Who may use `memdir serve --http` (A2, X): real server processes, real HTTP
requests (httpx2, as the mcp SDK uses) and the SDK's streamable HTTP client.

On loopback the Host and Origin checks hold (DNS rebinding, a web page's cross-site
POST); with --allow-remote they hold too, to the names given, and every request needs the
bearer token. Before, --allow-remote answered 200 to any Host and any Origin, with no
token at all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memdir.testing import MCP_INITIALIZE, cli_command, cli_env, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]  # real server processes

TOKEN = "test-token-0123456789abcdefXYZ"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    address: str
    port: int
    out: Path
    err: Path

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/mcp"

    def logs(self) -> str:
        return self.out.read_text() + self.err.read_text()

    def post(self, host: str | None = None, **headers: str) -> httpx2.Response:
        """An initialize request, with the headers given (host: the Host header)."""
        sent = dict(MCP_HEADERS, **headers)
        if host is not None:
            sent["host"] = host
        return httpx2.post(self.url, content=json.dumps(MCP_INITIALIZE), headers=sent, timeout=20)


@pytest.fixture
def serve(state_dir: Path, tmp_path: Path) -> Iterator[object]:
    """Start `memdir serve --http ADDRESS:PORT ARGS` and wait until it listens."""
    started: list[Served] = []

    def start(address: str, *args: str, env: dict[str, str] | None = None) -> Served:
        port = free_port(address)
        n = len(started)
        out, err = tmp_path / f"out{n}", tmp_path / f"err{n}"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(
                cli_command("serve", "--http", f"{address}:{port}", *args),
                env=cli_env(str(state_dir), env),
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
            )
        served = Served(proc, address, port, out, err)
        started.append(served)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, served.logs()
            try:
                socket.create_connection((address, port), timeout=0.5).close()
                return served
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"no server on {address}:{port}:\n{served.logs()}")

    yield start
    for served in started:
        if served.proc.poll() is None:
            served.proc.send_signal(signal.SIGTERM)
            try:
                served.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                served.proc.kill()
                served.proc.wait()


FOREIGN_HOSTS = ["evil.example:{port}", "127.0.0.1.evil.example:{port}", "localhost:1", ""]
FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example:{port}",
    "http://127.0.0.1:{port}.evil.example",
    "http://localhost:1",
    "null",
]


def test_loopback_refuses_a_foreign_host_or_origin(serve: object) -> None:  # A2 X
    """DNS rebinding: a page whose name now points at 127.0.0.1 still names itself in
    Host (421). A web page on another site POSTing to 127.0.0.1: the right Host, a
    foreign Origin (403)."""
    served = serve("127.0.0.1")  # type: ignore[operator]
    for host in FOREIGN_HOSTS:
        answer = served.post(host=host.format(port=served.port))
        assert answer.status_code == 421, (host, answer.text)
    for origin in FOREIGN_ORIGINS:
        answer = served.post(origin=origin.format(port=served.port))
        assert answer.status_code == 403, (origin, answer.text)


def test_loopback_answers_its_own_names_without_a_token(serve: object) -> None:  # A2
    served = serve("127.0.0.1")  # type: ignore[operator]
    for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}"):
        assert served.post(host=host).status_code == 200
    assert served.post(origin=f"http://localhost:{served.port}").status_code == 200


def test_remote_refuses_a_foreign_host_or_origin_even_with_the_token(serve: object) -> None:  # X
    served = serve("127.0.0.2", "--allow-remote", env={"MEMDIR_TOKEN": TOKEN})  # type: ignore[operator]
    bearer = f"Bearer {TOKEN}"
    for host in FOREIGN_HOSTS:
        answer = served.post(host=host.format(port=served.port), authorization=bearer)
        assert answer.status_code == 421, (host, answer.text)
    for origin in FOREIGN_ORIGINS:
        answer = served.post(origin=origin.format(port=served.port), authorization=bearer)
        assert answer.status_code == 403, (origin, answer.text)


WRONG = [None, "", "Bearer", f"Basic {TOKEN}", "Bearer wrong-token-0123456789", f"Bearer {TOKEN}x"]


def test_remote_needs_the_bearer_token(serve: object) -> None:  # X
    """The right Host and Origin are not enough: no token or a wrong one is 401, with
    the WWW-Authenticate header that tells a client to send one."""
    served = serve("127.0.0.2", "--allow-remote", env={"MEMDIR_TOKEN": TOKEN})  # type: ignore[operator]
    for authorization in WRONG:
        headers = {"origin": f"http://127.0.0.2:{served.port}"}
        if authorization is not None:
            headers["authorization"] = authorization
        answer = served.post(host=f"127.0.0.2:{served.port}", **headers)
        assert answer.status_code == 401, (authorization, answer.text)
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in answer.text


@pytest.mark.anyio
async def test_remote_with_the_token_serves_an_mcp_session(serve: object) -> None:  # A2 X
    """The SDK's own streamable HTTP client, sending the header, gets a whole session; the
    token is in no log, the banner says how to send it."""
    served = serve("127.0.0.2", "--allow-remote", env={"MEMDIR_TOKEN": TOKEN})  # type: ignore[operator]
    assert (
        served.post(host=f"127.0.0.2:{served.port}", authorization=f"Bearer {TOKEN}").status_code
        == 200
    )
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http, Client(streamable_http_client(served.url, http_client=http)) as client:
        stored = await client.call_tool(
            "memory_update", {"category": "decision", "content": "The wiki lives on the old nas"}
        )
        assert not stored.is_error, stored
        hits = await client.call_tool("memory_search", {"query": "wiki nas"})
        assert [h["kind"] for h in (hits.structured_content or {})["hits"]] == ["fact"]
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=20) == 128 + signal.SIGTERM
    logs = served.logs()
    assert TOKEN not in logs
    assert "Authorization: Bearer" in logs


def test_a_generated_token_is_printed_once_on_stderr_and_works(serve: object) -> None:  # X
    served = serve("127.0.0.2", "--allow-remote")  # type: ignore[operator]
    deadline = time.monotonic() + 10
    while "Authorization: Bearer" not in served.err.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    err = served.err.read_text()
    [token] = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert len(token) >= 32 and token not in served.out.read_text()
    assert served.post(authorization=f"Bearer {token}").status_code == 200
    assert served.post(authorization=f"Bearer {token[:-1]}").status_code == 401
    assert served.post().status_code == 401
    assert served.err.read_text().count(token) == 1  # never again: not in any request log


def test_a_token_given_is_required_on_loopback_too(serve: object, tmp_path: Path) -> None:  # X
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    served = serve("127.0.0.1", "--token-file", str(token_file))  # type: ignore[operator]
    assert served.post().status_code == 401
    assert served.post(authorization=f"Bearer {TOKEN}").status_code == 200
    assert TOKEN not in served.logs()


def test_host_name_adds_a_name_clients_may_use(serve: object) -> None:  # X
    served = serve(  # type: ignore[operator]
        "127.0.0.2", "--allow-remote", "--host-name", "mybox.lan", env={"MEMDIR_TOKEN": TOKEN}
    )
    bearer = f"Bearer {TOKEN}"
    assert served.post(host=f"mybox.lan:{served.port}", authorization=bearer).status_code == 200
    answer = served.post(
        host=f"mybox.lan:{served.port}",
        origin=f"http://mybox.lan:{served.port}",
        authorization=bearer,
    )
    assert answer.status_code == 200
    assert served.post(host=f"other.lan:{served.port}", authorization=bearer).status_code == 421


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--http", "0.0.0.0:9999"], {}, "--allow-remote"),
        (["--http", "0.0.0.0:9999", "--allow-remote"], {}, "--host-name"),
        (["--http", "127.0.0.2:9999", "--allow-remote"], {"MEMDIR_TOKEN": "short"}, "MEMDIR_TOKEN"),
        (["--http", "127.0.0.1:9999", "--token-file", "/nonexistent/token"], {}, "token file"),
        (["--http", "127.0.0.1:9999", "--host-name", "bad name!"], {}, "--host-name"),
        (["--http", "127.0.0.1:9999", "--allow-origin", "evil.example"], {}, "--allow-origin"),
        (["--allow-remote"], {}, "--http"),
    ],
)
def test_bad_serve_options_are_one_line_errors(
    run: object, args: list[str], env: dict[str, str], says: str
) -> None:  # X C
    result = run("serve", *args, env=env)  # type: ignore[operator]
    assert result.code == 1 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memdir: error: "), result.err
    assert says in lines[0]
    assert "short" not in lines[0]  # a token is never echoed, not even a bad one


def test_an_idle_keep_alive_connection_outlives_the_clients_expiry(serve: object) -> None:  # A2
    """A client keeps an idle connection for 5 s (httpx, under the MCP SDK) and then sends
    its next call on it: the server must not have closed it at that moment (uvicorn's
    default is the same 5 s, and a call racing the close failed with a ReadError). One
    connection, two requests 6 s apart: both answered on it."""
    import http.client

    served = serve("127.0.0.1")  # type: ignore[operator]
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=20)
    answers = []
    for pause in (0, 6):
        time.sleep(pause)
        conn.request("POST", "/mcp", body=json.dumps(MCP_INITIALIZE), headers=MCP_HEADERS)
        answer = conn.getresponse()
        answer.read()
        answers.append(answer.status)
        if pause == 0:
            first = conn.sock
    assert answers == [200, 200]
    assert conn.sock is first  # the same connection: http.client reconnects silently
    conn.close()
