"""X1 as a family: names (one anchored full match for every name, id and date), symlinks
out of the memory root (refused on every read and every write, never followed, the link
left in place) and the confinement of `get` and of the memory root itself. Through the
library, the CLI (real processes) and a real MCP client."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import Memory, sessions
from memdir.curation import archive
from memdir.errors import MemdirError, ValidationError
from memdir.names import NAME_RE, is_name
from memdir.paths import DATE_RE, TASK_ID_RE, is_date_name, is_task_id
from memdir.testing import cli_env
from memdir.tools import call_tool
from storeconfig import write_config

B, E = "MEMDIR_MEMORIZE_BEGIN", "MEMDIR_MEMORIZE_END"
SECRET = "OUTSIDE-SECRET-7f3a\n"


def block(item: dict[str, Any]) -> str:
    return f"{B}\n{json.dumps(item)}\n{E}\n"


# -- names ---------------------------------------------------------------------------------

BAD_NAMES = [
    "evil\n",
    "t1\n",
    "evil\r",
    "a\nb",
    "\nevil",
    "evil\n\n",
    "evil\r\n",
    "a\x00b",
    "a\u2028b",
    "a\u0085",
    "Evil",
    "evil name",
    "a/b",
    "..",
    ".",
    "",
    "a" * 65,
    "ａｂｃ",  # full-width letters
    "٣٣",  # Arabic-Indic digits: \d would take them
]
BAD_TASK_IDS = [
    "t1\n",
    "t1\r",
    "t\n1",
    "t1\r\n",
    "..",
    "a..b",
    "/etc",
    "a/b",
    ".hidden",
    "t 1",
    "",
    "x" * 129,
    "٣",
]
BAD_DATES = ["2024-01-01\n", "2024-01-01\r", "2024-1-1", "2024-02-30", "٢٠٢٤-٠١-٠١", "x"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_entry_and_procedure_names_are_refused_on_every_path(
    memory: Memory, name: str
) -> None:  # X1: library, tool, memorize marker
    with pytest.raises(ValidationError, match="bad entry name"):
        memory.write_entry(name, "a description", "body")
    with pytest.raises(ValidationError, match="bad procedure name"):
        memory.write_procedure(name, "# steps\n")
    with pytest.raises(ValidationError):
        call_tool(
            memory,
            "memory_write",
            {"scope": "global", "name": name, "description": "d", "content": "c"},
        )
    result = memory.ingest(
        block({"scope": "global", "name": name, "description": "d", "content": "c"})
    )
    assert result.applied == [] and len(result.warnings) == 1
    assert "\n" not in result.warnings[0] and "\r" not in result.warnings[0]
    root = Path(memory.path)
    assert not (root / "global").exists() or os.listdir(root / "global") == []
    assert not (root / "procedures").exists() or os.listdir(root / "procedures") == []
    index = root / "MEMORY.md"
    assert not index.exists() or index.read_text(encoding="utf-8") == ""


@pytest.mark.parametrize("task_id", BAD_TASK_IDS)
def test_bad_task_ids_are_refused_on_every_path(memory: Memory, task_id: str) -> None:  # X1
    for attempt in (
        lambda: memory.add_note(task_id, "a note"),
        lambda: memory.notes(task_id),
        lambda: memory.start_task(task_id),
    ):
        with pytest.raises(ValidationError):
            attempt()
    # a memorize block is never stored under it, and the warning is one line
    result = memory.ingest(block({"scope": "task", "content": "note"}), task=task_id)
    assert result.applied == [] and len(result.warnings) == 1
    assert "bad task id" in result.warnings[0] and "\n" not in result.warnings[0]
    tasks = Path(memory.path) / "tasks"
    assert not tasks.exists() or os.listdir(tasks) == []


@pytest.mark.parametrize("date", BAD_DATES)
def test_bad_dates_are_refused(memory: Memory, date: str) -> None:  # X1
    with pytest.raises(ValidationError, match="bad date"):
        memory.daily(date)


@pytest.mark.parametrize("bad", ["cli\n", "mcp\r", "Cli", "a b", ""])
def test_bad_session_ids_surfaces_and_check_names_are_refused(
    memory: Memory, bad: str
) -> None:  # X1, U1, B2
    with pytest.raises(ValidationError, match="bad session id"):
        sessions.check_id(bad + "x\n" if bad else "\n")
    with pytest.raises(ValidationError, match="bad surface"):
        sessions.check_surface(bad)
    with pytest.raises(ValidationError, match="bad check name"):
        memory.heartbeat_mark(bad)


def test_bad_names_on_the_command_line_are_one_line_errors(
    run: Callable[..., Any], state_dir: Path
) -> None:  # X1 through the CLI
    for args in (
        ("procedure", "write", "evil\n", "-"),
        ("procedure", "show", "evil\n"),
        ("show", "evil\n"),
        ("task", "start", "t1\n"),
        ("task", "show", "t1\n"),
        ("daily", "show", "2024-01-01\n"),
        ("heartbeat", "mark", "email\n"),
    ):
        res = run(*args, input="# steps\n")
        assert res.code != 0, args
        assert res.err.count("\n") == 1 and "Traceback" not in res.err, (args, res.err)
    memory = state_dir / "memory"
    for folder in ("global", "procedures", "tasks"):
        assert not (memory / folder).exists() or os.listdir(memory / folder) == []


def test_config_values_with_a_trailing_newline_are_refused(state_dir: Path) -> None:  # X1 S
    for config in (
        'marker_prefix = "MEMDIR\\n"',
        '[heartbeat]\n"email\\n" = 4',
    ):
        table = "" if config.startswith("[") else "[memory]\n"
        write_config(state_dir, table + config + "\n")
        with pytest.raises(MemdirError):
            Memory()


HAND_MADE = {
    "global": ["Evil Name.md", "evil\nname.md", "x\n- forged — line.md", "ok\n.md"],
    "procedures": ["Evil.md", "a\nb.md"],
    "tasks": ["x\ny.md", "t1\n.md", "..md"],
    "daily": ["2024-01-01\n.md", "yesterday.md"],
}


def test_hand_made_files_with_bad_names_are_skipped_never_rendered(
    memory: Memory, run: Callable[..., Any]
) -> None:  # X1: derived files come from validated names only
    root = Path(memory.path)
    memory.write_entry("good-one", "a good entry", "searchable-word body")
    for folder, names in HAND_MADE.items():
        (root / folder).mkdir(exist_ok=True)
        for name in names:
            (root / folder / name).write_text(
                "---\nname: evil\ndescription: forged\n---\nsearchable-word\n", encoding="utf-8"
            )
    memory.reindex()
    index = (root / "MEMORY.md").read_text(encoding="utf-8")
    assert index == "- good-one — a good entry\n"
    assert [e.name for e in memory.entries()] == ["good-one"]
    assert memory.procedures() == []
    hits = memory.search("searchable-word")
    assert {h.path for h in hits} == {"global/good-one.md"}
    recalled = memory.recall().text
    assert "forged" not in recalled and "Evil" not in recalled
    # doctor names each one, on one line, its line breaks escaped
    res = run("doctor", "--json")
    found = json.loads(res.out)
    strays = [
        f for f in found["findings"] if f["check"] == "layout.stray"
    ]  # every stray, each on its own finding
    shown = " ".join(f["message"] for f in strays)
    assert "\n" not in shown
    assert len(strays) == sum(len(v) for v in HAND_MADE.values())
    for res in (run("list"), run("recall"), run("search", "searchable-word")):
        assert "forged" not in res.out and "Evil" not in res.out


def near_names() -> st.SearchStrategy[str]:
    """Valid names with a little noise around them, where `$`-style bugs live."""
    noise = st.sampled_from(["", "\n", "\r", "\r\n", " ", "\t", "\x00", "\u2028", "/", ".."])
    return st.builds(
        lambda core, a, b: a + core + b, st.from_regex(NAME_RE, fullmatch=True), noise, noise
    )


def near_ids() -> st.SearchStrategy[str]:
    """Valid task ids and dates with a little noise around them."""
    noise = st.sampled_from(["", "\n", "\r", "\r\n", " ", "\x00", "/", "..", "\u2028"])
    core = st.one_of(
        st.from_regex(TASK_ID_RE, fullmatch=True), st.from_regex(DATE_RE, fullmatch=True)
    )
    return st.builds(lambda c, a, b: a + c + b, core, noise, noise)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.text(max_size=140), near_names(), near_ids()))
@pytest.mark.slow
def test_fuzz_the_name_validators_accept_only_single_safe_components(text: str) -> None:
    """X1 fuzz: whatever a validator accepts is one printable path component with no
    separator, no whitespace, no line break, and never '.' or '..'."""
    for check in (is_name, is_task_id, is_date_name):
        if check(text):
            assert text and text.isprintable() and text.isascii()
            assert not any(c.isspace() for c in text)
            assert os.sep not in text and "/" not in text and "\\" not in text
            assert text not in (".", "..") and ".." not in text
            assert os.path.basename(text) == text and os.path.normpath(text) == text


def test_fuzz_accepted_names_produce_exactly_one_index_line(state_dir: Path) -> None:
    """X1 fuzz through real writes: every accepted entry name creates exactly one file
    named by it and adds exactly one line to MEMORY.md; every refused one changes nothing."""
    with Memory() as memory:
        root = Path(memory.path)
        written: set[str] = set()

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(near_names())
        def check(name: str) -> None:
            if is_name(name):
                memory.write_entry(name, "desc", "body")
                written.add(name)
            else:
                with pytest.raises(ValidationError):
                    memory.write_entry(name, "desc", "body")
            lines = (root / "MEMORY.md").read_text(encoding="utf-8").splitlines()
            assert lines == [f"- {n} — desc" for n in sorted(written)]
            assert sorted(os.listdir(root / "global")) == sorted(f"{n}.md" for n in written)

        memory.write_entry("seed", "desc", "body")
        written.add("seed")
        check()


def test_fuzz_task_ids(state_dir: Path) -> None:  # X1 fuzz: one notes file per accepted id
    with Memory() as memory:
        tasks = Path(memory.path) / "tasks"
        noted: set[str] = set()

        @settings(
            max_examples=40,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(
            st.builds(
                lambda core, tail: core + tail,
                st.from_regex(TASK_ID_RE, fullmatch=True),
                st.sampled_from(["", "\n", "\r", "\r\n", "/x", ".."]),
            )
        )
        def check(task_id: str) -> None:
            if is_task_id(task_id):
                memory.add_note(task_id, "a note")
                noted.add(task_id)
            else:
                with pytest.raises(ValidationError):
                    memory.add_note(task_id, "a note")
            found = set(os.listdir(tasks)) if tasks.exists() else set()
            assert found == {f"{t}.md" for t in noted}

        check()


# -- symlinks out of the root --------------------------------------------------------------

TODAY = time.strftime("%Y-%m-%d")
FILE_LINKS = [
    "HOT.md",
    "HOT.md.bak",
    "MEMORY.md",
    "global/seen.md",
    "procedures/deploy.md",
    "tasks/t1.md",
    f"daily/{TODAY}.md",
    "heartbeat-state.json",
]
FOLDER_LINKS = ["global", "procedures", "tasks", "daily", ".locks"]


class Outside:
    """A folder outside the memory root whose bytes and mtimes must never change."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder = folder
        for name in ("secret.md", "seen.md", "deploy.md", "t1.md", f"{TODAY}.md"):
            (folder / name).write_text(SECRET, encoding="utf-8")
        (folder / "secret.json").write_text('{"lastChecks": {"x": 1}}', encoding="utf-8")
        past = time.time() - 3600
        for item in folder.iterdir():
            os.utime(item, (past, past))
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        return {
            p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(self.folder.iterdir())
        }

    def untouched(self) -> bool:
        return self.snapshot() == self.before


def seeded(state_dir: Path) -> Memory:
    memory = Memory()
    memory.hot_set("# Hot\nkeep me\n")
    memory.hot_append("second line")  # makes HOT.md.bak
    memory.write_entry("seen", "an entry", "entry body")
    memory.write_procedure("deploy", "# Deploy\nsteps\n")
    memory.start_task("t1")
    memory.add_note("t1", "a note")
    memory.daily_append("logged")
    memory.heartbeat_mark("email")
    return memory


def link(root: Path, rel: str, outside: Outside) -> Path:
    path = root / rel
    if rel in FOLDER_LINKS:
        target = outside.folder
    elif rel.endswith(".json"):
        target = outside.folder / "secret.json"
    else:
        target = outside.folder / ("secret.md" if "/" not in rel else rel.split("/")[1])
    if path.is_dir():
        for item in path.iterdir():
            item.unlink()
        path.rmdir()
    elif path.exists():
        path.unlink()
    path.symlink_to(target, target_is_directory=rel in FOLDER_LINKS)
    return path


def reads(memory: Memory) -> list[tuple[str, Callable[[], object]]]:
    return [
        ("hot show", memory.hot),
        ("boot", lambda: memory.boot().parts),
        ("recall", lambda: memory.recall(task="t1").text),
        ("get HOT.md", lambda: memory.get("HOT.md")),
        ("get entry", lambda: memory.get("global/seen.md")),
        ("get task", lambda: memory.get("tasks/t1.md")),
        ("get daily", lambda: memory.get(f"daily/{TODAY}.md")),
        ("search", lambda: memory.search("OUTSIDE")),
        ("list", memory.entries),
        ("show", lambda: memory.entry("seen")),
        ("procedure show", lambda: memory.procedure("deploy")),
        ("procedures", memory.procedures),
        ("daily show", memory.daily),
        ("task show", lambda: memory.notes("t1")),
        ("distill", lambda: memory.distill()),
        ("heartbeat", memory.heartbeat_status),
        ("stats", memory.stats),
    ]


def writes(memory: Memory) -> list[tuple[str, Callable[[], object]]]:
    return [
        ("hot append", lambda: memory.hot_append("more")),
        ("hot set", lambda: memory.hot_set("# Hot\nnew\n")),
        ("hot rm", lambda: memory.hot_remove(line="keep me")),
        ("entry write", lambda: memory.write_entry("seen", "changed", "new body")),
        ("entry write new", lambda: memory.write_entry("fresh", "new", "new body")),
        ("entry rm", lambda: memory.remove_entry("seen")),
        ("procedure write", lambda: memory.write_procedure("deploy", "# New\n")),
        ("task note", lambda: memory.add_note("t1", "another note")),
        (
            "memorize",
            lambda: memory.ingest(
                block({"scope": "task", "content": "memorized"})
                + block({"scope": "global", "name": "seen", "description": "m", "content": "m"}),
                task="t1",
            ),
        ),
        ("daily append", lambda: memory.daily_append("more log")),
        ("heartbeat mark", lambda: memory.heartbeat_mark("email")),
        ("reindex", memory.reindex),
    ]


def _shows(value: object) -> str:
    return repr(value)


@pytest.mark.parametrize("rel", FILE_LINKS + FOLDER_LINKS)
def test_a_link_out_of_the_root_is_never_followed(
    state_dir: Path, tmp_path: Path, rel: str
) -> None:  # X1: every tier file and folder x every read surface and write path
    memory = seeded(state_dir)
    root = Path(memory.path)
    outside = Outside(tmp_path / "outside")
    path = link(root, rel, outside)
    refused = 0
    for what, action in reads(memory) + writes(memory):
        try:
            result = action()
        except MemdirError as exc:
            message = str(exc)
            assert "\n" not in message and "OUTSIDE-SECRET" not in message, what
            if "symlink pointing outside" in message:
                refused += 1
        else:
            assert "OUTSIDE-SECRET" not in _shows(result), (rel, what)
        assert path.is_symlink(), (rel, what)  # the link is left in place
        assert outside.untouched(), (rel, what)  # nothing written outside
    assert refused > 0
    memory.close()


@pytest.mark.parametrize("rel", FILE_LINKS + FOLDER_LINKS)
def test_a_link_out_is_refused_by_the_surfaces_that_use_it(
    state_dir: Path, tmp_path: Path, rel: str
) -> None:  # X1: a surface that needs the linked file says so, in one line
    memory = seeded(state_dir)
    outside = Outside(tmp_path / "outside")
    link(Path(memory.path), rel, outside)
    needs = {
        "HOT.md": ["hot show", "boot", "get HOT.md", "hot append", "hot set", "hot rm"],
        "HOT.md.bak": ["hot append", "hot set"],
        "MEMORY.md": ["entry write", "entry rm", "reindex"],
        "global/seen.md": ["get entry", "show", "entry write", "entry rm"],
        "procedures/deploy.md": ["procedure show"],
        "tasks/t1.md": ["task show", "get task", "task note", "recall"],
        f"daily/{TODAY}.md": ["daily show", "get daily", "daily append", "boot"],
        "heartbeat-state.json": ["heartbeat", "heartbeat mark"],
        "global": ["list", "show", "entry write", "recall", "search", "get entry"],
        "procedures": ["procedure show", "procedures", "procedure write", "search"],
        "tasks": ["task show", "task note", "search", "get task"],
        "daily": ["daily show", "daily append", "search", "get daily"],
        ".locks": ["hot append", "entry write", "task note", "daily append"],
    }[rel]
    actions = dict(reads(memory) + writes(memory))
    for what in needs:
        with pytest.raises(ValidationError, match="symlink pointing outside") as caught:
            actions[what]()
        assert "\n" not in str(caught.value), what
    assert outside.untouched()
    memory.close()


@pytest.mark.parametrize("rel", ["HOT.md", "global", f"daily/{TODAY}.md"])
def test_a_link_inside_the_root_is_followed(state_dir: Path, rel: str) -> None:  # X1
    memory = seeded(state_dir)
    root = Path(memory.path)
    elsewhere = root / "kept"
    elsewhere.mkdir()
    path = root / rel
    if path.is_dir():
        os.rename(path, elsewhere / "global")
        path.symlink_to(elsewhere / "global", target_is_directory=True)
    else:
        os.rename(path, elsewhere / path.name)
        path.symlink_to(elsewhere / path.name)
    memory.hot_append("through the link")
    memory.write_entry("another", "via link", "body")
    memory.daily_append("linked log")
    assert "through the link" in memory.hot()
    assert {e.name for e in memory.entries()} == {"seen", "another"}
    assert "linked log" in memory.daily()
    assert path.is_symlink()  # written through, the link kept
    memory.close()


def test_identity_files_and_config_links_out_of_the_state_dir_are_refused(
    state_dir: Path, tmp_path: Path, run: Callable[..., Any]
) -> None:  # X1 relative to the state dir: boot reads SOUL.md, every call reads config.toml
    outside = Outside(tmp_path / "outside")
    with Memory() as memory:
        memory.hot_set("# Hot\nx\n")
    (state_dir / "SOUL.md").symlink_to(outside.folder / "secret.md")
    with (
        Memory() as memory,
        pytest.raises(ValidationError, match="SOUL.md is a symlink pointing outside the state dir"),
    ):
        memory.boot()
    res = run("boot")
    assert res.code == 1 and "OUTSIDE-SECRET" not in res.out + res.err
    assert res.err.count("\n") == 1
    (state_dir / "SOUL.md").unlink()
    (state_dir / "config.toml").unlink(missing_ok=True)  # the PostgreSQL lanes' (storeconfig)
    (state_dir / "config.toml").symlink_to(outside.folder / "secret.md")
    with pytest.raises(ValidationError, match="config.toml is a symlink"):
        Memory()
    assert outside.untouched()


@pytest.mark.sqlite_only  # memory.db itself as a link out; a team store has no file
def test_a_linked_memory_db_is_refused(state_dir: Path, tmp_path: Path) -> None:  # X1
    outside = Outside(tmp_path / "outside")
    with Memory() as memory:
        memory.add_fact("a fact", "convention")
        db = Path(memory.layout.db)
    for extra in ("", "-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    db.symlink_to(outside.folder / "secret.md")
    with Memory() as memory, pytest.raises(ValidationError, match="memory.db is a symlink"):
        memory.add_fact("another", "convention")
    assert outside.untouched()


def test_cli_refuses_links_out_in_one_line(
    state_dir: Path, tmp_path: Path, run: Callable[..., Any]
) -> None:  # X1 through real processes
    seeded(state_dir).close()
    root = state_dir / "memory"
    outside = Outside(tmp_path / "outside")
    link(root, "HOT.md", outside)
    link(root, "tasks/t1.md", outside)
    link(root, f"daily/{TODAY}.md", outside)
    for args in (
        ("hot", "show"),
        ("boot",),
        ("recall", "--task", "t1"),
        ("get", "HOT.md"),
        ("hot", "append", "x"),
        ("daily", "append", "x"),
        ("daily", "show"),
        ("task", "show", "t1"),
    ):
        res = run(*args)
        assert "OUTSIDE-SECRET" not in res.out + res.err, args
        assert res.code == 1 and res.err.count("\n") == 1, (args, res.err)
        assert "symlink pointing outside" in res.err, (args, res.err)
    assert outside.untouched()
    assert (root / "HOT.md").is_symlink()


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_instructions_and_hot_resource_never_show_a_linked_hot(
    state_dir: Path, tmp_path: Path
) -> None:  # X1 through a real MCP client
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    seeded(state_dir).close()
    outside = Outside(tmp_path / "outside")
    link(state_dir / "memory", "HOT.md", outside)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir))
    )
    async with Client(params, read_timeout_seconds=60) as client:
        assert client.instructions is not None
        assert "OUTSIDE-SECRET" not in client.instructions
        assert "symlink pointing outside" in client.instructions
        with pytest.raises(MCPError, match="symlink pointing outside") as raised:
            await client.read_resource("memdir://hot")
        assert "OUTSIDE-SECRET" not in str(raised.value)
    assert outside.untouched()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_export_leaves_links_out_and_import_never_writes_through_one(
    state_dir: Path, tmp_path: Path
) -> None:  # X1: the archive's files
    memory = seeded(state_dir)
    backup = tmp_path / "backup.jsonl"
    archive.export_to(memory, str(backup))
    outside = Outside(tmp_path / "outside")
    link(Path(memory.path), "global", outside)
    link(Path(memory.path), "HOT.md", outside)
    exported = archive.export_to(memory, str(tmp_path / "second.jsonl"))
    assert "OUTSIDE-SECRET" not in (tmp_path / "second.jsonl").read_text(encoding="utf-8")
    assert any("global" in x for x in exported.left_out)
    with pytest.raises(MemdirError):
        archive.import_archive(memory, str(backup), force=True)
    assert outside.untouched()
    assert (Path(memory.path) / "global").is_symlink()
    memory.close()


def test_archive_paths_with_line_breaks_are_refused(state_dir: Path, tmp_path: Path) -> None:
    """X1: an archive cannot put a line break into a file name."""
    with Memory() as memory:
        memory.write_entry("seen", "an entry", "body")
        backup = tmp_path / "backup.jsonl"
        archive.export_to(memory, str(backup))
    lines = backup.read_text(encoding="utf-8").splitlines()
    hacked = [line.replace('"global/seen.md"', '"global/evil\\nname.md"') for line in lines]
    (tmp_path / "hacked.jsonl").write_text("\n".join(hacked) + "\n", encoding="utf-8")
    with Memory() as memory, pytest.raises(ValidationError, match="unsafe path"):
        archive.import_archive(memory, str(tmp_path / "hacked.jsonl"), force=True)
    assert os.listdir(state_dir / "memory" / "global") == ["seen.md"]


# -- get reads memory files only; a root that holds the project is refused ----------------


def project(tmp_path: Path, memory_path: str | None) -> Path:
    """A cloned repository: .env, .git/config and a .memdir whose config names the root."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[remote]\nurl = secret-remote\n", encoding="utf-8")
    (repo / ".env").write_text("API_TOKEN=OUTSIDE-SECRET\n", encoding="utf-8")
    (repo / ".memdir").mkdir()
    if memory_path is not None:
        (repo / ".memdir" / "config.toml").write_text(
            f'[memory]\npath = "{memory_path}"\n', encoding="utf-8"
        )
    return repo


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".git/config",
        "config.toml",
        "memory.db",
        "HOT.md.bak",
        "heartbeat-state.json",
        "global/evil\n.md",
        "global/Evil.md",
        "notes/x.md",
        "../.env",
        "/etc/hostname",
    ],
)
def test_get_reads_memory_files_only(memory: Memory, path: str) -> None:  # X1 E4
    memory.write_entry("seen", "an entry", "body")
    Path(memory.path, ".env").write_text("OUTSIDE-SECRET\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="get reads memory files only") as caught:
        memory.get(path)
    assert "OUTSIDE-SECRET" not in str(caught.value)
    with pytest.raises(ValidationError, match="memory files only"):
        call_tool(memory, "memory_get", {"path": path})


def test_get_reads_every_memory_file_of_the_layout(memory: Memory, state_dir: Path) -> None:
    """X1 E4: what get may read, it reads: the tiers' files and the identity files."""
    memory.hot_set("# Hot\nx\n")
    memory.write_entry("seen", "an entry", "body")
    memory.write_procedure("deploy", "# Deploy\n")
    memory.add_note("t1", "a note")
    memory.daily_append("log")
    (state_dir / "SOUL.md").write_text("I am\n", encoding="utf-8")
    for path in (
        "HOT.md",
        "MEMORY.md",
        "global/seen.md",
        "procedures/deploy.md",
        "tasks/t1.md",
        f"daily/{TODAY}.md",
        "SOUL.md",
        "./global/seen.md",
        str(Path(memory.path) / "global" / "seen.md"),
        str(state_dir / "SOUL.md"),
    ):
        assert memory.get(path).lines, path


@pytest.mark.parametrize("memory_path", ["..", "../..", "~", "/", "ABS_PROJECT", "ABS_HOME"])
def test_a_memory_root_holding_the_project_or_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Callable[..., Any], memory_path: str
) -> None:  # X1: a cloned repository cannot turn memdir into a reader of its files
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    repo = project(tmp_path, None)
    value = {"ABS_PROJECT": str(repo), "ABS_HOME": str(home)}.get(memory_path, memory_path)
    (repo / ".memdir" / "config.toml").write_text(f'[memory]\npath = "{value}"\n', encoding="utf-8")
    monkeypatch.delenv("MEMDIR_STATE_DIR")
    monkeypatch.chdir(repo)
    with pytest.raises(ValidationError, match="MEMDIR_ALLOW_ROOT"):
        Memory(cwd=str(repo))
    res = run("get", ".env", cwd=str(repo), env={"MEMDIR_STATE_DIR": ""})
    assert res.code == 1 and "OUTSIDE-SECRET" not in res.out + res.err
    assert res.err.count("\n") == 1 and "MEMDIR_ALLOW_ROOT" in res.err


def test_a_sibling_team_folder_is_fine_and_a_confirmed_root_is_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # X1 L6: ../team-memory does not hold the project
    repo = project(tmp_path, "../../team-memory")
    (tmp_path / "team-memory").mkdir()
    monkeypatch.delenv("MEMDIR_STATE_DIR")
    with Memory(cwd=str(repo)) as memory:
        assert os.path.realpath(memory.path) == str((tmp_path / "team-memory").resolve())
        memory.write_entry("shared", "team knowledge", "body")
    (repo / ".memdir" / "config.toml").write_text('[memory]\npath = ".."\n', encoding="utf-8")
    monkeypatch.setenv("MEMDIR_ALLOW_ROOT", str(repo))
    with Memory(cwd=str(repo)) as memory:  # the user confirmed it outside the repository
        with pytest.raises(ValidationError, match="memory files only"):
            memory.get(".env")  # and get still reads memory files only
        with pytest.raises(ValidationError, match="memory files only"):
            memory.get(".git/config")


def test_memdir_init_refuses_a_root_holding_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Callable[..., Any]
) -> None:  # X1
    repo = project(tmp_path, "..")
    res = run("init", cwd=str(repo), env={"MEMDIR_STATE_DIR": ""})
    assert res.code == 1 and "MEMDIR_ALLOW_ROOT" in res.err and res.err.count("\n") == 1


def test_a_folder_swapped_for_a_link_during_a_write_is_not_followed(
    memory: Memory, tmp_path: Path
) -> None:  # X1: the race between the check and the write
    from memdir.storage import files

    memory.write_entry("seen", "an entry", "body")
    root = Path(memory.path)
    outside = Outside(tmp_path / "outside")
    with files.atomic_output(str(root / "global" / "new.md"), root=str(root)) as out:
        out.write(b"written after the swap\n")
        os.rename(root / "global", root / "moved")  # swapped once the path was checked
        (root / "global").symlink_to(outside.folder, target_is_directory=True)
    assert outside.untouched()
    assert (root / "moved" / "new.md").read_bytes() == b"written after the swap\n"
    assert (root / "global").is_symlink()


def test_the_memory_root_itself_may_be_a_link_the_user_made(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # X1 L5: what lies below the root is checked against its real path
    real = tmp_path / "real-memory"
    real.mkdir()
    (tmp_path / "linked-memory").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("MEMDIR_MEMORY_DIR", str(tmp_path / "linked-memory"))
    with Memory() as memory:
        memory.hot_append("through the root's link")
        memory.write_entry("seen", "an entry", "body")
        memory.add_note("t1", "a note")
        assert "through the root's link" in memory.hot()
        assert memory.get(str(real / "global" / "seen.md")).lines
        # the words' index found it through the link (lexical: which file holds the word,
        # not how near in meaning another file is)
        assert [h.path for h in memory.search("note", mode="lexical")] == ["tasks/t1.md"]
    assert (real / "HOT.md").is_file() and (real / "MEMORY.md").is_file()
