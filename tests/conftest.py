"""Every test gets its own state dir (MEMDIR_STATE_DIR -> tmp), so no test touches ~/.memdir.
The folder exists, as `memdir init` would leave it: a state dir that is named but missing
is an error (L1), tested in test_settings_paths.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.testing import cli_command, cli_env, stop_forkserver, stop_workers_under
from storeconfig import team_config

# `MEMDIR_TEST_BACKEND=postgres pytest ...` (the PostgreSQL lane of `make test`): every test
# gets a fresh database of the test server as MEMDIR_DATABASE_URL and as `[storage] url` in
# its state dir's config.toml (tests/storeconfig.py), and nothing else changes
# (W1: with only a URL set, the tiers behave as on memory.db). `pgvector`: the same on
# the PostgreSQL that the pgserver wheel bundles with pgvector (the pgvector lane, Q2).
TEST_BACKEND = os.environ.get("MEMDIR_TEST_BACKEND", "sqlite")


@pytest.fixture(autouse=True)
def state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    for var in (
        "MEMDIR_STATE_DIR",
        "MEMDIR_MEMORY_DIR",
        "MEMDIR_SESSION_ID",
        "MEMDIR_DATABASE_URL",
        "MEMDIR_DATABASE_SCOPE",
    ):
        monkeypatch.delenv(var, raising=False)
    if TEST_BACKEND in ("postgres", "pgvector"):
        monkeypatch.setenv("MEMDIR_DATABASE_URL", str(request.getfixturevalue("pg_url")))
    state = tmp_path / "state"
    state.mkdir()
    team_config(state)  # the URL in config.toml too, where a user puts it (storeconfig.py)
    monkeypatch.setenv("MEMDIR_STATE_DIR", str(state))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield state
    stop_workers_under(str(tmp_path))  # a CLI search may have started a store's warm worker


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The bundled model's integer graph (storage/embeddings.py) is built once a session
    into a cache of the session's, not the user's, and not once a test (HOME is a test's)."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(scope="session", autouse=True)
def _no_warm_process_outlives_the_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Stores shared by a session's tests (the bench caches) are under its base temp dir.
    The CLI's fork server (C1) of this session lives in a runtime dir of its own (short:
    a socket's path has at most 107 bytes), and a child given an environment of its own,
    without that dir, reaches the user's: both are stopped at the end."""
    runtime = tempfile.mkdtemp(prefix="memdir-rt-", dir="/tmp")
    previous = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    yield
    stop_workers_under(str(tmp_path_factory.getbasetemp()))
    stop_forkserver()
    if previous is None:
        del os.environ["XDG_RUNTIME_DIR"]
    else:
        os.environ["XDG_RUNTIME_DIR"] = previous
    stop_forkserver()
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def memory(state_dir: Path) -> Iterator[Memory]:
    with Memory() as mem:
        yield mem


class CLIResult:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code, self.out, self.err = proc.returncode, proc.stdout, proc.stderr

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def run(state_dir: Path) -> Callable[..., CLIResult]:
    """Run the real `memdir` CLI in a child process."""

    def runner(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> CLIResult:
        proc = subprocess.run(
            cli_command(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env(str(state_dir), env),
            cwd=cwd,
        )
        return CLIResult(proc)

    return runner


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs the real CLI as a child process (the `run` fixture) is slow: a
    process start per command, ~0.1 s idle and seconds on a loaded machine. `make test`
    runs it; `make test-fast` (-m "not slow") leaves it out."""
    for item in items:
        if "run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


# -- PostgreSQL (W1) ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throwaway PostgreSQL server per test process (each xdist worker its own),
    started on first use and removed at the end (tests/pg_server.py); in the pgvector
    lane, the one with pgvector."""
    import pg_server as server_module

    bindir = server_module.pgvector_bin_dir() if TEST_BACKEND == "pgvector" else None
    server = server_module.start(bindir=bindir)
    try:
        if TEST_BACKEND == "pgvector":
            # pgvector 0.6 is not a trusted extension: the databases' owner may not create
            # it, so it is there from the start, as an administrator makes it (each new
            # database is a copy of template1), and the server ranks the lane's vectors
            server.sql("CREATE EXTENSION vector", "template1")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[Any]:
    """A throwaway PostgreSQL with pgvector (the pgserver wheel's), whatever the lane."""
    import pg_server as server_module

    server = server_module.start(bindir=server_module.pgvector_bin_dir())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A URL of a fresh database of the test server, dropped after the test, as the role
    that owns it (memdir_pw: no superuser, no BYPASSRLS), as a team's stores would connect:
    the scopes it makes are its own, so their row-level security is on and holds every
    statement (L4). The PostgreSQL lanes' MEMDIR_DATABASE_URL."""
    import pg_server as server_module

    name = pg_server.new_database()
    try:
        yield pg_server.url(name, role=server_module.PASSWORD_ROLE)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def pg_admin_url(pg_server: Any, pg_url: str) -> str:
    """pg_url's database as the superuser, whom no policy holds: for a test that acts as
    an administrator (roles, extensions, triggers) or looks at rows of every scope."""
    return str(pg_server.url(database_of(pg_url)))


def database_of(url: str) -> str:
    """The database a URL of the test server names."""
    return url.split("?")[0].rsplit("/", 1)[1]
