"""Faults (H4, L3, Z): a writer SIGKILLed at random instants (bench/faults.py at a
small size), a full disk (RLIMIT_FSIZE in a child process) and a read-only memory folder.
A database locked past the busy timeout is tested in test_concurrency.py."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dbrows import TEAM
from memdir import Memory
from memdir.storage.files import TEMP_PREFIX
from memdir.testing import cli_command, cli_env
from storeconfig import write_config

BENCH = Path(__file__).resolve().parent.parent / "bench"
BIG = 300_000  # bytes: far over the file size limit below
LIMIT = 100_000


def temp_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(f"{TEMP_PREFIX}*")]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every memory file but the database and the lock files, by relative path; nor, in
    team mode, the view's record of the rows it saw, which a read brings up to date (W1)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and ".locks" not in p.parts
        and not p.name.startswith("memory.db")
        and p.name != ".view.json"
    }


# -- 1. SIGKILL at random instants ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
@pytest.mark.sqlite_only  # bench/faults.py checks memory.db itself (team mode's kills: W1 tests)
def test_writer_killed_at_random_instants_loses_nothing(tmp_path: Path) -> None:  # H4 L3
    result = subprocess.run(
        [sys.executable, str(BENCH / "faults.py"), "--kills", "25", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = json.loads((tmp_path / "faults.json").read_text())["summary"]
    assert summary["kills"] == 25 and summary["writes_acknowledged"] > 50
    assert summary["lost"] == 0 and summary["torn_files"] == 0
    assert summary["integrity_failures"] == 0 and summary["errors"] == 0
    assert summary["temps_left_at_end"] == 0 and summary["index_fresh_at_end"]


@pytest.mark.sqlite_only  # the harness reads memory.db's rows and integrity_check
def test_fault_checks_see_a_torn_file_and_a_lost_write(state_dir: Path) -> None:
    """The harness's verify() is not blind: a cut HOT.md and a missing fact are reported."""
    sys.path.insert(0, str(BENCH))
    try:
        import faults
    finally:
        sys.path.remove(str(BENCH))
    with Memory() as mem:
        mem.start_task(faults.TASK)
        mem.hot_set(faults.hot_text(7))
        fact = mem.add_fact("fault fact f1 about crashes", "learning")
    records = [
        {"op": "hot_set", "seq": 7},
        {"op": "fact", "seq": 1, "id": fact.id, "content": fact.content},
        {"op": "fact", "seq": 2, "id": fact.id + 1, "content": "fault fact f2"},
    ]
    clean = faults.verify(str(state_dir), records[:2])
    assert clean["torn"] == [] and clean["lost"] == [] and clean["integrity"] == "ok"
    hot = state_dir / "memory" / "HOT.md"
    hot.write_text(hot.read_text()[:-30])
    checked = faults.verify(str(state_dir), records)
    assert [t.split(":")[0] for t in checked["torn"]] == ["HOT.md"]
    assert checked["lost"] == [f"fact {fact.id + 1}", "hot set v7"]


# -- 2. a full disk --------------------------------------------------------------------------

FULL_DISK = f"""
import resource, signal, sys
from memdir import Memory, MemdirError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}))
big = "".join(f"line {{i:06d}} " + "z" * 60 + "\\n" for i in range({BIG} // 72))
mem = Memory()
for what, write in (
    ("procedure", lambda: mem.write_procedure("deploy-staging", big)),
    ("entry", lambda: mem.write_entry("big-entry", "a big entry", big)),
    ("hot", lambda: mem.hot_set(big)),
):
    try:
        write()
        print(what, "WROTE")
    except MemdirError as exc:
        print(what, type(exc).__name__, str(exc))
"""


def limit_file_size() -> None:  # runs in the child, before exec: both survive the exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def write_small_versions(state_dir: Path) -> None:
    write_config(state_dir, "[memory]\nhot_cap_chars = 1000000\nmax_entry_bytes = 1000000\n")
    with Memory() as mem:
        mem.write_procedure("deploy-staging", "# Deploy\n1. small version\n")
        mem.write_entry("big-entry", "a small entry", "small body\n")
        mem.hot_set("# Hot\n- small version\n")
        mem.hot_set("# Hot\n- small version two\n")  # so HOT.md.bak exists too


def test_full_disk_gives_a_clear_error_and_keeps_the_old_file(state_dir: Path) -> None:  # Z H4
    write_small_versions(state_dir)
    memory_dir = state_dir / "memory"
    before = snapshot(memory_dir)
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(str(state_dir)),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["procedure", "entry", "hot"], lines
    for line in lines:
        what, kind, message = line.split(" ", 2)
        assert kind == "StorageError", line
        assert message.startswith("cannot write ") and "nothing was changed" in message, line
        assert "too large" in message.lower(), line
    assert snapshot(memory_dir) == before  # every file, HOT.md.bak and MEMORY.md included
    assert temp_files(memory_dir) == []
    with Memory() as mem:  # and memory still works once there is room again
        assert mem.procedure("deploy-staging").content == "# Deploy\n1. small version\n"
        mem.write_procedure("deploy-staging", "# Deploy\n1. new version\n")


def test_full_disk_through_the_cli_is_one_line_on_stderr(state_dir: Path) -> None:  # Z
    write_small_versions(state_dir)
    memory_dir = state_dir / "memory"
    before = snapshot(memory_dir)
    big = "".join(f"- line {i:06d} " + "z" * 60 + "\n" for i in range(BIG // 72))
    for args in (("procedure", "write", "deploy-staging", "-"), ("hot", "set", "-")):
        proc = subprocess.run(
            cli_command(*args),
            input=big,
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env(str(state_dir)),
            preexec_fn=limit_file_size,
        )
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stdout == ""
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("memdir: error: cannot write "), proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert snapshot(memory_dir) == before
    assert temp_files(memory_dir) == []


# -- 3. a read-only memory folder ------------------------------------------------------------


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root ignores permission bits: as root, the read-only mount test below covers it",
)
def test_read_only_memory_folder_gives_a_clear_error_and_loses_nothing(
    state_dir: Path, run: object
) -> None:  # Z
    write_small_versions(state_dir)
    memory_dir = state_dir / "memory"
    procedures = memory_dir / "procedures"
    before = snapshot(memory_dir)
    frozen = [memory_dir, procedures, memory_dir / "global"]
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in frozen}
    for path in frozen:
        path.chmod(0o555)
    (procedures / "deploy-staging.md").chmod(0o444)
    try:
        for args, stdin in (
            (("procedure", "write", "deploy-staging", "-"), "# Deploy\n1. new\n"),
            (("hot", "set", "-"), "# Hot\n- new\n"),
            (("hot", "append", "a new line"), None),
        ):
            proc = subprocess.run(
                cli_command(*args),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                env=cli_env(str(state_dir)),
            )
            assert proc.returncode == 1, (args, proc.stderr)
            assert "Traceback" not in proc.stderr
            assert proc.stderr.startswith("memdir: error: ")
            assert proc.stderr.count("\n") == 1, proc.stderr
            assert "permission denied" in proc.stderr, proc.stderr
        assert snapshot(memory_dir) == before
        assert temp_files(memory_dir) == []
    finally:
        (procedures / "deploy-staging.md").chmod(0o644)
        for path, mode in modes.items():
            path.chmod(mode)


def _can_bind_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.skipif(not _can_bind_mount(), reason="needs root and mount(8) for a bind mount")
def test_read_only_filesystem_gives_a_clear_error_and_loses_nothing(
    state_dir: Path, tmp_path: Path
) -> None:  # Z: as root permission bits do not bind, a read-only mount does
    write_small_versions(state_dir)
    memory_dir = state_dir / "memory"
    before = snapshot(memory_dir)
    mounted = subprocess.run(
        ["mount", "--bind", str(memory_dir), str(memory_dir)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"bind mount refused here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(memory_dir)], check=True)
        for args, stdin in (
            (("procedure", "write", "deploy-staging", "-"), "# Deploy\n1. new\n"),
            (("hot", "set", "-"), "# Hot\n- new\n"),
            (("hot", "append", "a new line"), None),
            # in team mode a fact is a row of the database, which is not on the mount (W1)
            *([] if TEAM else [(("fact", "add", "a new fact", "-c", "learning"), None)]),
        ):
            proc = subprocess.run(
                cli_command(*args),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                env=cli_env(str(state_dir)),
            )
            assert proc.returncode == 1, (args, proc.stderr)
            assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
            assert proc.stderr.startswith("memdir: error: ")
        # and the reads still answer, from the files as they stand (Z; in team mode the
        # view, which cannot be refreshed there, W1)
        for args, shown in (
            (("hot", "show"), "small version two"),
            (("procedure", "show", "deploy-staging"), "small version"),
            (("list",), "big-entry"),
        ):
            proc = subprocess.run(
                cli_command(*args),
                capture_output=True,
                text=True,
                timeout=60,
                env=cli_env(str(state_dir)),
            )
            assert proc.returncode == 0 and shown in proc.stdout, (args, proc.stderr)
        assert snapshot(memory_dir) == before
    finally:
        subprocess.run(["umount", str(memory_dir)], check=False)
    assert snapshot(memory_dir) == before
