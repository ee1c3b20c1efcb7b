"""Hosts of a team for tests and benches of team mode (W1): Linux network namespaces, each
with its own network stack (its own loopback, ports and address), joined by veth pairs to a
bridge in the root namespace on a private /24. The bridge holds the subnet's first address,
where a PostgreSQL of the root namespace listens; host k is `.10+k`. A process started with
`Hosts.command(k, argv)` runs inside host k (`ip netns exec`): it reaches the server only
over the subnet, as a client on another machine would.

Needs root and iproute2's `ip`: `Hosts()` raises with what is missing (never a skip).
`close()` kills every process left in a namespace (all of them this test's own), then
deletes the namespaces, the veths and the bridge; it runs even when the test failed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def prerequisites() -> str | None:
    """Why hosts cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is missing: apt-get install -y iproute2"
    if os.geteuid() != 0:
        return "network namespaces need root: run the test as root (CI does)"
    return None


def _free_subnet(rng: random.Random) -> str:
    """A 10.213.N.0/24 that no interface of the root namespace uses (as `10.213.N`)."""
    taken = _ip("-4", "-o", "addr")
    for _ in range(200):
        prefix = f"10.213.{rng.randrange(1, 255)}"
        if f" {prefix}." not in taken:
            return prefix
    raise RuntimeError("no free 10.213.N.0/24 subnet for the test hosts")


def _zombie(pid: int) -> bool:
    """A dead process not yet reaped by its parent (this test, which reaps it later)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class Hosts:
    """`count` namespaces on one bridge; `address` is the server's side of the subnet."""

    def __init__(self, count: int = 3) -> None:
        missing = prerequisites()
        if missing:
            raise RuntimeError(missing)
        rng = random.Random(os.getpid() ^ time.time_ns())
        self.tag = f"{rng.randrange(16**5):05x}"  # interface names: at most 15 bytes
        self.bridge = f"mdbr{self.tag}"
        self.names = [f"memdir-{self.tag}-h{k}" for k in range(count)]
        self._veths: list[str] = []
        self.prefix = _free_subnet(rng)
        self.address = f"{self.prefix}.1"
        self.subnet = f"{self.prefix}.0/24"
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for k, name in enumerate(self.names):
                _ip("netns", "add", name)
                veth = f"mdv{self.tag}{k}"
                self._veths.append(veth)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
                _ip("link", "set", veth, "master", self.bridge, "up")
                _ip("-n", name, "addr", "add", f"{self.host_address(k)}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "eth0", "up")
                _ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def host_address(self, k: int) -> str:
        return f"{self.prefix}.{10 + k}"

    def command(self, k: int, argv: list[str]) -> list[str]:
        """argv run inside host k."""
        return ["ip", "netns", "exec", self.names[k], *argv]

    def pids(self, k: int) -> list[int]:
        """Every process inside host k."""
        found = _ip("netns", "pids", self.names[k], check=False)
        return [int(pid) for pid in found.split() if not _zombie(int(pid))]

    def kill(self, k: int) -> list[int]:
        """SIGKILL every process of host k (the machine dies), until none is left; the pids
        killed."""
        killed: list[int] = []
        for _ in range(100):  # a fork racing the kill shows up in the next look
            pids = self.pids(k)
            if not pids:
                return killed
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"processes of {self.names[k]} outlived 100 rounds of SIGKILL")

    def close(self) -> None:
        for k, name in enumerate(self.names):
            if name in _ip("netns", "list", check=False).split():
                try:
                    self.kill(k)
                finally:
                    _ip("netns", "del", name, check=False)
        for veth in self._veths:
            _ip("link", "del", veth, check=False)  # usually gone with its namespace
        _ip("link", "del", self.bridge, check=False)
