"""C1: a process that lives on keeps the entries' listing while inotify says global/ did not
change (storage/watched.py), and sees every change a person or another process makes: an
edit in place of the same size, a new, deleted or renamed file, a touch, a folder made
again; never through a link; never with a queue it shares with its parent. The fork
server readies the stores the last calls used, and its calls use that. Real files,
real processes, the real kernel."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir import Memory, entries, tasks
from memdir.cli import forkserver
from memdir.errors import StorageError
from memdir.storage import watched
from memdir.storage.sqlite import connection
from memdir.testing import cli_command, cli_env, forkserver_pid, poll, stop_forkserver

pytestmark = pytest.mark.sqlite_only  # the server readies local stores only (Memory.warm)


@pytest.fixture
def watching(memory: Memory) -> Iterator[Memory]:
    """`memory`, in a process that watches (as the MCP server or a spare does)."""
    saved = watched._mode
    watched.enable()
    yield memory
    watched.forget_all()
    watched._mode = saved


def listed(memory: Memory) -> dict[str, str]:
    return {
        name: description for name, description, _ in entries.index(memory.layout, memory.store)
    }


def kept(memory: Memory) -> bool:
    """Whether the listing of global/ is kept under a watch now."""
    current = watched._watcher
    place = None if current is None else current.folders.get(memory.layout.global_dir)
    return place is not None and entries.INDEX_KEY in place.values


def entry_file(memory: Memory, name: str) -> Path:
    return Path(memory.layout.global_dir) / f"{name}.md"


def test_the_listing_is_kept_until_a_file_changes_even_in_place_at_the_same_size(
    watching: Memory,
) -> None:  # C1, G1
    memory = watching
    memory.write_entry("ci", "CI takes 12 min", "details")
    memory.write_entry("db", "The db is Postgres", "details")
    assert listed(memory) == {"ci": "CI takes 12 min", "db": "The db is Postgres"}
    assert listed(memory) == {"ci": "CI takes 12 min", "db": "The db is Postgres"}
    assert kept(memory)
    path = entry_file(memory, "ci")
    text = path.read_text()
    info = path.stat()
    with open(path, "r+", encoding="utf-8") as handle:  # in place, the same size
        handle.write(text.replace("CI takes 12 min", "CI takes 21 min"))
    assert path.stat().st_size == info.st_size
    assert listed(memory)["ci"] == "CI takes 21 min"
    assert "CI takes 21 min" in memory.recall().text


def test_new_deleted_and_renamed_files_are_seen(watching: Memory) -> None:  # C1, G1
    memory = watching
    memory.write_entry("one", "first", "body")
    listed(memory)
    listed(memory)
    assert kept(memory)
    shutil.copy(entry_file(memory, "one"), entry_file(memory, "two"))
    assert set(listed(memory)) == {"one", "two"}
    listed(memory)
    os.rename(entry_file(memory, "two"), entry_file(memory, "three"))
    assert set(listed(memory)) == {"one", "three"}
    listed(memory)
    os.unlink(entry_file(memory, "one"))
    assert set(listed(memory)) == {"three"}


def test_a_global_folder_made_again_at_its_path_is_seen(watching: Memory) -> None:  # C1
    memory = watching
    memory.write_entry("kept", "an entry", "body")
    listed(memory)
    listed(memory)
    assert kept(memory)
    folder = Path(memory.layout.global_dir)
    moved = folder.with_name("global.old")
    folder.rename(moved)
    folder.mkdir()
    shutil.copy(moved / "kept.md", folder / "kept.md")
    (folder / "new.md").write_text(
        (moved / "kept.md").read_text().replace("name: kept", "name: new"), encoding="utf-8"
    )
    assert set(listed(memory)) == {"kept", "new"}


def test_a_folder_with_a_linked_entry_is_never_kept(watching: Memory) -> None:  # C1
    """An edit made through a symlink's target (inside the memory root: X1) raises no
    event in global/: such a listing is computed every call."""
    memory = watching
    memory.write_entry("real", "a real file", "body")
    (Path(memory.layout.memory_dir) / "shared").mkdir()
    target = Path(memory.layout.memory_dir) / "shared" / "elsewhere.md"
    target.write_text(entry_file(memory, "real").read_text().replace("name: real", "name: link"))
    entry_file(memory, "link").symlink_to(target)
    listed(memory)
    listed(memory)
    assert not kept(memory)
    target.write_text(target.read_text().replace("a real file", "edited through the link"))
    assert listed(memory)["link"] == "edited through the link"


def test_a_forked_child_never_reads_its_parents_queue(watching: Memory) -> None:  # C1
    """A child shares its parent's inotify queue: reading it would take the parent's events
    (and its kept listing would miss the change). The child watches on its own."""
    memory = watching
    memory.write_entry("shared", "before", "body")
    listed(memory)
    listed(memory)
    assert kept(memory)
    pid = os.fork()
    if pid == 0:  # the child: lists, changes a file, lists again, and says what it saw
        try:
            first = listed(memory)["shared"]
            path = entry_file(memory, "shared")
            path.write_text(path.read_text().replace("before", "after!"))
            second = listed(memory)["shared"]
            os._exit(0 if (first, second) == ("before", "after!") else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert listed(memory)["shared"] == "after!"


def test_task_notes_are_kept_until_their_folder_changes(watching: Memory) -> None:  # C1, T1
    memory = watching
    memory.start_task("t-1")
    memory.add_note("t-1", "first note")
    assert [n.content for n in tasks.notes(memory.layout, "t-1")] == ["first note"]
    assert [n.content for n in tasks.notes(memory.layout, "t-1")] == ["first note"]
    place = watched._watcher.folders[memory.layout.tasks_dir] if watched._watcher else None
    assert place is not None and "notes:t-1" in place.values
    path = Path(memory.layout.task_notes("t-1"))
    with open(path, "a", encoding="utf-8") as handle:  # a person appends a line by hand
        handle.write("a line by hand\n")
    assert [n.content for n in tasks.notes(memory.layout, "t-1")] == [
        "first note",
        "a line by hand",
    ]
    assert "a line by hand" in memory.recall(task="t-1").text


def synced_kept(memory: Memory) -> bool:
    current = watched._watcher
    place = None if current is None else current.folders.get(memory.layout.procedures_dir)
    return place is not None and any(key.startswith("index.synced") for key in place.values)


def found(memory: Memory, query: str) -> set[str]:
    hits = memory.search(query, mode="lexical", kinds=("daily", "procedure"))
    return {hit.content for hit in hits}


def test_search_finds_what_changed_since_its_kept_sync(watching: Memory) -> None:  # C1, Q3
    """Search syncs the index with the files first; a process that lives on skips that
    while nothing changed, and finds a file written by hand, a tier's folder made after
    its last sync, an edit in place and a deletion."""
    memory = watching
    memory.write_procedure("deploy", "# Deploy\n\nRun the zebra pipeline.\n")
    assert found(memory, "zebra")
    assert found(memory, "zebra")
    assert synced_kept(memory)  # the next search looks at no file
    assert watched._watcher is not None  # nor reads a procedure for its substring match
    assert "procedures.haystacks" in watched._watcher.folders[memory.layout.procedures_dir].values
    daily_dir = Path(memory.layout.memory_dir) / "daily"
    assert not daily_dir.exists()
    daily_dir.mkdir()  # a tier's folder made after the last sync, then a log in it by hand
    (daily_dir / "2026-11-30.md").write_text("# 2026-11-30\n\n- 10:00 the okapi arrived\n")
    assert any("okapi" in text for text in found(memory, "okapi"))
    assert any("okapi" in text for text in found(memory, "okapi"))
    path = Path(memory.layout.procedures_dir) / "deploy.md"
    with open(path, "r+", encoding="utf-8") as handle:  # in place, the same size
        handle.write(path.read_text().replace("zebra", "quagg"))
    assert any("quagg" in text for text in found(memory, "quagg"))
    assert not any("zebra" in text for text in found(memory, "zebra"))
    path.unlink()
    assert not found(memory, "quagg")


def test_a_linked_file_keeps_the_sync_from_being_kept(watching: Memory) -> None:  # C1, Q3
    memory = watching
    (Path(memory.layout.memory_dir) / "shared").mkdir(parents=True)
    target = Path(memory.layout.memory_dir) / "shared" / "notes.md"
    target.write_text("# Steps\n\nFeed the axolotl.\n")
    Path(memory.layout.procedures_dir).mkdir(exist_ok=True)
    (Path(memory.layout.procedures_dir) / "steps.md").symlink_to(target)
    assert any("axolotl" in text for text in found(memory, "axolotl"))
    assert any("axolotl" in text for text in found(memory, "axolotl"))
    assert not synced_kept(memory)
    target.write_text("# Steps\n\nFeed the capybara.\n")  # through the link: no event
    assert any("capybara" in text for text in found(memory, "capybara"))


def test_one_folder_reached_by_two_paths_drops_what_each_kept(
    watching: Memory, tmp_path: Path
) -> None:  # C1
    """The kernel gives a folder one watch whatever path reached it (a symlinked root, a
    bind mount): an event drops what every path kept, and forgetting one path leaves the
    other watched."""
    memory = watching
    memory.write_entry("ci", "CI takes 12 min", "details")
    alias = tmp_path / "alias"
    alias.symlink_to(memory.layout.memory_dir)
    other = Memory(str(memory.layout.state_dir), env={"MEMDIR_MEMORY_DIR": str(alias)})
    assert other.layout.global_dir != memory.layout.global_dir
    for _ in range(2):
        assert listed(memory)["ci"] == listed(other)["ci"] == "CI takes 12 min"
    path = entry_file(memory, "ci")
    path.write_text(path.read_text().replace("12 min", "34 min"))
    assert listed(other)["ci"] == "CI takes 34 min"
    assert listed(memory)["ci"] == "CI takes 34 min"
    assert watched._watcher is not None
    watched._watcher.forget(other.layout.global_dir)
    listed(memory)
    path.write_text(path.read_text().replace("34 min", "56 min"))
    assert listed(memory)["ci"] == "CI takes 56 min"


def test_lost_events_start_every_watch_again(watching: Memory) -> None:  # C1
    """More events than the kernel queues (an idle process): what was kept is dropped and
    every watch is added again, since the end of one may be among those lost."""
    memory = watching
    memory.write_entry("ci", "CI takes 12 min", "details")
    listed(memory)
    listed(memory)
    assert kept(memory)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    path = entry_file(memory, "ci")
    for i in range(limit + 100):
        os.utime(path, ns=(i, i))
    path.write_text(path.read_text().replace("12 min", "21 min"))
    assert listed(memory)["ci"] == "CI takes 21 min"
    assert watched._watcher is not None
    assert memory.layout.global_dir not in watched._watcher.folders or not kept(memory)


def test_a_forked_child_lets_go_of_its_parents_queue_at_once(watching: Memory) -> None:  # C1
    memory = watching
    memory.write_entry("ci", "CI", "details")
    listed(memory)
    listed(memory)
    assert watched._watcher is not None
    fd = watched._watcher.fd
    pid = os.fork()
    if pid == 0:
        try:
            os.fstat(fd)
        except OSError:
            os._exit(0 if watched._watcher is None else 3)
        os._exit(1)  # still open: a later open could get that number and lose it
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    os.fstat(fd)  # the parent's is open


def test_readying_a_stale_index_keeps_nothing(watching: Memory) -> None:  # C1, Q3
    memory = watching
    memory.write_procedure("deploy", "# Deploy\n\nRun the zebra pipeline.\n")
    assert found(memory, "zebra")
    path = Path(memory.layout.procedures_dir) / "deploy.md"
    path.write_text("# Deploy\n\nRun the yak pipeline.\n")
    memory.warm()  # a look: it finds the index behind the files and leaves it to the call
    assert not synced_kept(memory)
    assert any("yak" in text for text in found(memory, "yak"))


def test_a_look_at_a_store_whose_wal_is_folded_makes_no_file(state_dir: Path) -> None:  # C1
    """SQLite makes -wal and -shm for a read-only connection too: the server's look goes
    only where a call left them, and says why it looks at nothing else."""
    with Memory() as memory:
        memory.write_entry("ci", "CI", "details")
        folder = Path(memory.layout.db).parent
    before = sorted(os.listdir(folder))
    assert "memory.db-wal" not in before  # folded by the last close
    with pytest.raises(StorageError, match="no WAL to look at"):
        Memory().warm()
    assert sorted(os.listdir(folder)) == before


def test_a_store_removed_while_it_is_looked_at_is_left_no_file(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # C1
    """A folder deleted right after a call (a test's temporary store) while the server
    looks at it: the files SQLite made for the look once memory.db was gone are removed,
    so the deletion finds the folder as it left it. The deletion is timed from inside the
    look's open, the one moment a look can make them."""
    # a call that ends as a forked one does, without SQLite's close: its WAL stays
    leaves_wal = "import os, memdir; memdir.Memory().write_entry('ci', 'CI', 'x'); os._exit(0)"
    subprocess.run([sys.executable, "-c", leaves_wal], check=True, timeout=60)
    db = Memory().layout.db
    read = connection._first_read

    def removed_meanwhile(look: sqlite3.Connection) -> None:
        for suffix in ("-wal", "-shm"):
            os.unlink(db + suffix)
        read(look)  # SQLite makes both again, beside a memory.db it holds open
        assert os.path.exists(db + "-wal") and os.path.exists(db + "-shm")
        os.unlink(db)

    monkeypatch.setattr(connection, "_first_read", removed_meanwhile)
    with pytest.raises(StorageError, match="went away while it was looked at"):
        Memory().warm()
    left = set(os.listdir(os.path.dirname(db)))
    assert not left & {"memory.db", "memory.db-wal", "memory.db-shm"}


def test_a_process_of_one_call_never_watches(memory: Memory) -> None:  # C1
    saved = watched._mode
    try:
        watched._mode = None
        watched.one_call()
        memory.write_entry("solo", "one call", "body")
        listed(memory)
        listed(memory)
        assert not kept(memory)
    finally:
        watched._mode = saved


# -- the fork server readies the stores the last calls used, for its calls --------------


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    path = os.path.join("/tmp", f"mdw-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    os.makedirs(path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", path)
    yield path
    stop_forkserver()
    shutil.rmtree(path, ignore_errors=True)


def watches(pid: int) -> set[int]:
    """The inodes process `pid` watches with inotify (/proc/PID/fdinfo)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("inotify wd:"):
                field = dict(part.split(":", 1) for part in line.split()[1:] if ":" in part)
                inodes.add(int(field["ino"], 16))
    return inodes


def spare_of(server: int) -> int | None:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == server and forkserver.SPARE_NAME in stat:
                return int(pid)
    return None


def test_the_server_readies_the_last_store_and_its_calls_see_every_change(
    runtime: str, state_dir: Path
) -> None:  # C1, R1
    with Memory() as memory:
        memory.write_entry("ci", "CI takes 12 min", "details")
        memory.write_entry("db", "The db is Postgres", "details")
        folder = Path(memory.layout.global_dir)
    env = cli_env(str(state_dir), {"XDG_RUNTIME_DIR": runtime})

    def recall() -> str:
        proc = subprocess.run(
            cli_command("recall"), env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    first = recall()  # runs on its own and starts the server
    server = poll(
        lambda: os.path.exists(forkserver.places()[1]) and forkserver_pid(), 60, "a server up"
    )
    assert recall() == first  # forked: names this store for the server to ready
    recent = forkserver.recent_file(forkserver.places()[1])
    # written once the caller has its answer: looked for until it is there
    poll(lambda: os.path.exists(recent), 60, "the list of the stores the last calls used")
    assert [str(state_dir), str(folder.parent)] in json.loads(Path(recent).read_text())
    inode = folder.stat().st_ino
    poll(lambda: (spare := spare_of(server)) and inode in watches(spare), 60, "a readied spare")
    assert recall() == first  # from the server's kept listing: the same answer
    poll(lambda: (spare := spare_of(server)) and inode in watches(spare), 60, "a readied spare")
    path = folder / "ci.md"
    text = path.read_text()
    info = path.stat()
    with open(path, "r+", encoding="utf-8") as handle:  # after it readied: same size, in place
        handle.write(text.replace("12 min", "21 min"))
    assert path.stat().st_size == info.st_size
    after = recall()
    assert "CI takes 21 min" in after and "CI takes 12 min" not in after
    poll(lambda: (spare := spare_of(server)) and inode in watches(spare), 60, "a readied spare")
    procedures = Path(state_dir) / "memory" / "procedures"
    procedures.mkdir(exist_ok=True)
    (procedures / "feed.md").write_text("# Feed\n\nFeed the axolotl at noon.\n")
    search = subprocess.run(
        cli_command("search", "--mode", "lexical", "axolotl"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert search.returncode == 0 and "axolotl" in search.stdout  # the readied sync saw it
