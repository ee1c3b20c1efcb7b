"""A throwaway PostgreSQL server for the suite (W1): initdb + pg_ctl of the installed
PostgreSQL (Debian's postgresql-15, which `make test` installs when initdb is missing),
in a temp dir, on a unix socket and a free loopback port. Nothing is assumed running.
Debian's has no pgvector; `start(bindir=pgvector_bin_dir())` runs the PostgreSQL 16 that
the `pgserver` wheel (the dev extra) bundles with pgvector instead (Q2).

As root the server runs as the `postgres` user (PostgreSQL refuses to run as root). Local
connections (the socket) are trusted; TCP ones need a password (scram-sha-256), so a test
can connect with a URL that holds one. Beside the superuser `postgres` there is one ordinary
role, `memdir_pw` (no superuser, no BYPASSRLS), that owns each test database: what the
suite's stores connect as, so the scopes' row-level security holds them (L4). Durability
settings are off (fsync, full page writes): the server is thrown away, and what the tests
check is what a client sees.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass

from memdir.testing import free_port

PASSWORD_ROLE = "memdir_pw"
PASSWORD = "s3cret-Pw-9d2f"  # a test role's: the tests check it is never shown


def bin_dir() -> str:
    """Where initdb and pg_ctl are: PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not candidates:
        raise RuntimeError(
            "PostgreSQL is not installed (no initdb): `make test` installs postgresql-15; "
            "by hand: apt-get install -y postgresql-15"
        )
    return os.path.dirname(candidates[-1])


def pgvector_bin_dir() -> str:
    """The bin dir of the PostgreSQL with pgvector that the pgserver wheel bundles (its
    package is not imported: only its files are used)."""
    from importlib.util import find_spec

    spec = find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the pgvector lane needs the pgserver wheel (PostgreSQL with pgvector): "
            "pip install -e '.[dev]'"
        )
    install = os.path.join(list(spec.submodule_search_locations)[0], "pginstall")
    return os.path.join(_reachable(install), "bin")


def _reachable(install: str) -> str:
    """`install`, or a copy the postgres user can reach: the server runs as that user,
    and a checkout under a folder only root may enter (a clone in `mktemp -d`) hides the
    venv's files from it. Copied once per installation, made whole before it is named."""
    folder = os.path.dirname(os.path.abspath(install))
    while folder != os.path.dirname(folder):
        if not os.stat(folder).st_mode & 0o001:
            break
        folder = os.path.dirname(folder)
    else:
        return install  # every folder above it may be entered by anyone
    # the binaries find their libraries at $ORIGIN/../../../pgserver.libs (the wheel's
    # RPATH): the package and its libs folder are copied side by side
    package = os.path.dirname(install)
    site = os.path.dirname(package)
    tag = f"{os.stat(install).st_ino:x}-{int(os.stat(install).st_mtime)}"
    copy = os.path.join(tempfile.gettempdir(), f"memdir-pgserver-{tag}")
    if not os.path.isdir(copy):
        part = tempfile.mkdtemp(prefix="memdir-pgserver-part-")
        os.chmod(part, 0o755)
        for name in (os.path.basename(package), "pgserver.libs"):
            if os.path.isdir(os.path.join(site, name)):
                shutil.copytree(os.path.join(site, name), os.path.join(part, name), symlinks=True)
        try:
            os.rename(part, copy)
        except OSError:
            shutil.rmtree(part, ignore_errors=True)  # another worker made it first
    return os.path.join(copy, os.path.basename(package), os.path.basename(install))


@dataclass
class Server:
    root: str
    socket_dir: str
    port: int
    host: str = "127.0.0.1"
    bindir: str = ""

    def url(self, database: str = "postgres", role: str = "postgres") -> str:
        """A URL over the unix socket (trusted, no password), as `role` (the superuser)."""
        return f"postgresql://{role}@/{database}?host={self.socket_dir}&port={self.port}"

    def tcp_url(self, database: str, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{PASSWORD_ROLE}{secret}@{self.host}:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as db:
            db.execute(statement)  # type: ignore[arg-type]

    def new_database(self) -> str:
        name = "t_" + uuid.uuid4().hex[:16]
        self.sql(f"CREATE DATABASE {name} OWNER {PASSWORD_ROLE} STRATEGY FILE_COPY")
        return name

    def drop_database(self, name: str) -> None:
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        _run(_as_owner([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "immediate",
                        "-w", "stop"]), check=False)  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def data(self) -> str:
        return os.path.join(self.root, "data")


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip() or proc.stdout}")
    return proc


def start(host: str = "127.0.0.1", clients: str | None = None, bindir: str | None = None) -> Server:
    """A new server, initialised and started; stop() removes it. `clients`, a subnet such as
    10.213.7.0/24, may connect over TCP too (with the password), beside loopback. `bindir`:
    the PostgreSQL to run (default: the installed one, bin_dir())."""
    # short: a socket's path has at most 107 bytes
    root = tempfile.mkdtemp(prefix="memdir-pg-", dir="/tmp")
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    bindir = bindir or bin_dir()
    server = Server(root, root, free_port(host), host, bindir)
    _run(_as_owner([os.path.join(bindir, "initdb"), "-D", server.data, "-U", "postgres",
                    "-E", "UTF8", "--locale=C.UTF-8", "--auth-local=trust",
                    "--auth-host=scram-sha-256", "--no-sync"]))  # fmt: skip
    if clients:
        with open(os.path.join(server.data, "pg_hba.conf"), "a", encoding="utf-8") as hba:
            hba.write(f"host all all {clients} scram-sha-256\n")
    options = (
        f"-k {root} -p {server.port} -c listen_addresses={host} -c fsync=off "
        "-c full_page_writes=off -c synchronous_commit=off -c max_connections=300"
    )
    try:
        _run(_as_owner([os.path.join(bindir, "pg_ctl"), "-D", server.data, "-o", options,
                        "-l", os.path.join(root, "log"), "-w", "-t", "60", "start"]))  # fmt: skip
    except RuntimeError:
        with open(os.path.join(root, "log"), encoding="utf-8", errors="replace") as log:
            raise RuntimeError(f"the test PostgreSQL did not start: {log.read()[-2000:]}") from None
    server.sql(f"CREATE ROLE {PASSWORD_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '{PASSWORD}'")
    return server
