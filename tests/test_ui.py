"""The memory browser (V), end to end: a real `memdir ui` process on a free port, a real
store, writes by other real processes (the CLI), and a real browser (Debian's Chromium,
driven by Playwright). A screenshot of each page is kept under the test's temp dir (its
path is printed) and one of each is in docs/img."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright_api  # noqa: E402 - the dev extra pins it

from memdir import Memory
from memdir.testing import cli_command, cli_env, free_port, poll

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

pytestmark = pytest.mark.slow


@dataclass
class UI:
    proc: subprocess.Popen[bytes]
    port: int
    url: str  # the printed address, with the token
    out: Path
    err: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.url).query)["token"][0]


@pytest.fixture
def ui(state_dir: Path, tmp_path: Path) -> Iterator[UI]:
    """`memdir ui --port N`, once it printed its address and listens."""
    port = free_port()
    out, err = tmp_path / "ui.out", tmp_path / "ui.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            cli_command("ui", "--port", str(port)),
            env=cli_env(str(state_dir)),
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
        )

    def address() -> str | None:
        assert proc.poll() is None, out.read_text() + err.read_text()
        found = re.search(r"open: (\S+)", out.read_text())
        return found.group(1) if found else None

    url = poll(address, 60, "memdir ui's address")
    poll(lambda: _listens(port), 60, "memdir ui listening")
    yield UI(proc, port, url, out, err)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err.read_text(), err.read_text()


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    """A page of a fresh Chromium profile (its own user data dir)."""
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


@pytest.fixture
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: kept after the run, printed at the end of the test."""
    folder = tmp_path_factory.getbasetemp() / "ui-screens"
    folder.mkdir(exist_ok=True)
    return folder


def shot(page: Any, screens: Path, name: str) -> None:
    path = screens / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def cli(state_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in another process (a write by someone other than the browser)."""
    done = subprocess.run(
        cli_command(*args),
        env=cli_env(str(state_dir)),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def expect(locator: Any) -> Any:
    return playwright_api.expect(locator)


# -- V1 ---------------------------------------------------------------------------------


def test_v1_overview_shows_hot_md_and_the_boot_preview_with_sizes(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V1: HOT.md with its size against the cap; the exact boot context of the next main
    session and of the next subagent, with chars and tokens (those `memdir boot` gives);
    counts per tier; doctor's findings a link away."""
    cli(state_dir, "hot", "set", "# Hot\n- deploys go out on Fridays\n- use uv, never pip")
    cli(state_dir, "fact", "add", "The staging database is Postgres 16", "-c", "learning")
    with Memory(str(state_dir)) as memory:
        memory.write_entry("ci", "How CI runs", "CI runs `make test` on every push.")
        cap = memory.settings.hot_cap_chars
    hot = (state_dir / "memory" / "HOT.md").read_text()
    main = json.loads(cli(state_dir, "boot", "--json").stdout)
    sub = json.loads(cli(state_dir, "boot", "--subagent", "--json").stdout)

    page.goto(ui.url)
    expect(page.locator("#hot pre.file")).to_have_text(hot.rstrip("\n"))
    expect(page.locator("#hot-size")).to_contain_text(f"{len(hot):,} / {cap:,} chars")
    main_box = page.locator('.boot[data-subagent="no"]')
    sub_box = page.locator('.boot[data-subagent="yes"]')
    assert int(main_box.get_attribute("data-chars")) == main["chars"]
    assert int(main_box.get_attribute("data-tokens")) == main["tokens"]
    assert int(sub_box.get_attribute("data-chars")) == sub["chars"]
    assert main["chars"] > sub["chars"]  # the subagent is not shown MEMORY.md
    expect(main_box).to_contain_text(f"{main['chars']:,} chars · ~{main['tokens']:,} tokens")
    expect(main_box).to_contain_text("MEMORY.md")
    expect(page.locator(".cards")).to_contain_text("1 active facts")
    expect(page.locator(".cards")).to_contain_text("1 entries")
    assert (page.locator("#doctor a").get_attribute("href") or "").endswith("/doctor")
    shot(page, screens, "overview")


def test_v1_doctors_findings_are_checked_when_their_page_is_opened(
    state_dir: Path, ui: UI, page: Any
) -> None:
    """V1/N2: the overview does not run doctor (it reads every file of the store); its
    page does, on every visit, so what it shows is never an older run's: a stray file
    made after one visit is found on the next, and is gone from it once removed."""
    page.goto(ui.url)
    page.locator("#doctor a").click()
    expect(page.locator("#doctor h2")).to_contain_text("0 errors")
    expect(page.locator(".findings")).not_to_contain_text("layout.stray")
    stray = state_dir / "memory" / "notes-by-hand.txt"
    stray.write_text("not memdir's\n")
    page.reload()
    expect(page.locator(".findings")).to_contain_text("layout.stray")
    expect(page.locator(".findings")).to_contain_text("notes-by-hand.txt")
    stray.unlink()
    page.reload()
    expect(page.locator(".findings")).not_to_contain_text("layout.stray")


# -- V2 ---------------------------------------------------------------------------------


def test_v2_a_fact_written_by_another_process_appears_in_the_timeline_without_a_reload(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V2: the timeline updates live when another process writes, with who wrote it."""
    cli(state_dir, "fact", "add", "Releases are tagged from main", "-c", "convention")
    page.goto(ui.url)
    page.goto(f"{ui.base}/timeline")
    expect(page.locator("#rows")).to_contain_text("Releases are tagged from main")
    page.evaluate("window.__same_page = true")  # gone if the page reloads
    cli(
        state_dir,
        "--agent",
        "reviewer",
        "fact",
        "add",
        "The API rate limit is 600 requests a minute",
        "-c",
        "learning",
    )
    row = page.locator("#rows tr", has_text="The API rate limit is 600 requests a minute")
    expect(row).to_be_visible(timeout=30_000)  # a wait for the poll, not a threshold
    assert page.evaluate("window.__same_page") is True
    expect(row).to_contain_text("reviewer")
    expect(row).to_contain_text("cli")
    expect(row).to_contain_text("added")
    first = page.locator("#rows tr").first
    expect(first).to_contain_text("600 requests")  # newest first
    shot(page, screens, "timeline")

    page.goto(f"{ui.base}/timeline?tier=fact&agent=reviewer")
    expect(page.locator("#rows tr")).to_have_count(1)
    expect(page.locator("#rows")).not_to_contain_text("Releases are tagged")


# -- V3 ---------------------------------------------------------------------------------


def test_v3_search_from_any_page_finds_it_with_its_score_and_why(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V3: the one search field of every page runs the CLI's search; each hit shows its
    score and why it matched."""
    cli(state_dir, "fact", "add", "Deploys to production need a second reviewer", "-c", "decision")
    cli(state_dir, "fact", "add", "Lunch is at noon", "-c", "preference")
    page.goto(ui.url)
    field = page.locator('header input[type="search"]')
    field.fill("production deploys")
    field.press("Enter")
    hits = page.locator("li.hit")
    expect(hits.first).to_contain_text("Deploys to production need a second reviewer")
    expect(page.locator("main")).not_to_contain_text("Lunch is at noon")

    # the same search as the CLI's: the same hits and scores, in a mode named by both
    asked = ("production deploys", "--mode", "lexical", "--json")
    expected = json.loads(cli(state_dir, "search", *asked).stdout)
    page.locator('main input[type="search"]').fill("production deploys")
    page.locator('main select[name="mode"]').select_option("lexical")
    page.locator("main form.filters button").click()
    expect(page.locator(".hint")).to_contain_text("ranked lexical")
    assert hits.count() == len(expected)
    expect(hits.first.locator(".score")).to_have_text(f"score {expected[0]['score']:g}")
    expect(hits.first.locator(".why")).to_contain_text("by its words")
    expect(hits.first.locator(".why mark")).to_have_text(["production", "deploys"])
    shot(page, screens, "search")

    # as-of: a superseded fact is found as it held then
    cli(state_dir, "fact", "supersede", "1", "Deploys to production need two reviewers")
    page.goto(f"{ui.base}/search?q=reviewer&as_of=2999-01-01")
    expect(page.locator("li.hit").first).to_contain_text("two reviewers")


# -- V4, V5: a fact -------------------------------------------------------------------------


def test_v5_a_supersede_from_the_page_shows_in_its_timeline_and_in_fact_history(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V4/V5: the fact page shows the supersede chain; a supersede made there (after a
    confirmation) is a write like any other: `memdir fact history` shows it."""
    cli(state_dir, "fact", "add", "The office is in Berlin", "-c", "learning")
    page.goto(ui.url)
    page.goto(f"{ui.base}/fact/1")
    page.locator("#supersede textarea").fill("The office is in Lisbon")
    page.locator("#supersede button").click()
    expect(page.locator("h1")).to_contain_text("Supersede fact #1")
    assert _fact_contents(state_dir) == ["The office is in Berlin"]  # not before confirming
    page.locator("#confirm button").click()
    expect(page.locator("h1")).to_contain_text("Fact #2")
    versions = page.locator(".history .version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("superseded by #2")
    expect(versions.nth(1)).to_contain_text("The office is in Lisbon")
    shot(page, screens, "fact")

    history = json.loads(cli(state_dir, "fact", "history", "1", "--json").stdout)
    assert [v["content"] for v in history] == ["The office is in Berlin", "The office is in Lisbon"]
    assert history[0]["status"] == "superseded"
    assert history[1]["surface"] == "ui"  # the browser's session wrote it
    assert history[1]["session_id"]


def test_v4_a_forked_history_shows_both_branches_on_the_fact_page(
    state_dir: Path, ui: UI, page: Any
) -> None:
    """V4 F3: a fact superseded twice names both successors; both versions are listed."""
    cli(state_dir, "fact", "add", "Standup is at 9:00", "-c", "convention")
    cli(state_dir, "fact", "supersede", "1", "Standup is at 9:30")
    cli(state_dir, "fact", "supersede", "1", "Standup is at 10:00")
    page.goto(ui.url)
    page.goto(f"{ui.base}/fact/3")
    versions = page.locator(".history .version")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_contain_text("superseded by #2 and #3 (forked)")
    expect(versions.nth(1)).to_contain_text("Standup is at 9:30")
    expect(versions.nth(2)).to_contain_text("Standup is at 10:00")


def test_v5_a_secret_is_refused_from_the_page_as_from_every_front_end(
    state_dir: Path, ui: UI, page: Any
) -> None:
    """V5: the page writes through the same path: the secret scan (X2) refuses it, the
    page says why, nothing is written."""
    cli(state_dir, "fact", "add", "The CI token lives in the vault", "-c", "learning")
    page.goto(ui.url)
    page.goto(f"{ui.base}/fact/1")
    page.locator("#supersede textarea").fill(
        "The CI token is ghp_" + "0123456789abcdefghijklmnopqrstuvwxyzAB"
    )
    page.locator("#supersede button").click()
    page.locator("#confirm button").click()
    expect(page.locator(".error")).to_contain_text("GitHub token")
    assert _fact_contents(state_dir) == ["The CI token lives in the vault"]


def test_v5_remove_a_fact_after_confirming(state_dir: Path, ui: UI, page: Any) -> None:
    """V5: forget a fact: removed (kept in its history as removed), after a confirmation."""
    cli(state_dir, "fact", "add", "The old VPN is vpn1.example.org", "-c", "learning")
    page.goto(ui.url)
    page.goto(f"{ui.base}/fact/1")
    page.locator("#remove button").click()
    page.locator("#confirm button").click()
    expect(page.locator("h1")).to_contain_text("removed")
    shown = json.loads(cli(state_dir, "fact", "show", "1", "--json").stdout)
    assert shown["status"] == "removed"


def _fact_contents(state_dir: Path) -> list[str]:
    with Memory(str(state_dir)) as memory:
        return [f.content for f in memory.store.recent_facts(100)][::-1]


# -- V5: files -------------------------------------------------------------------------------


def test_v5_an_entry_edit_lands_on_disk_and_in_memory_md(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V4/V5: the entry page shows its frontmatter; an edit saved there (confirmed) is on
    disk and MEMORY.md lists the new description."""
    with Memory(str(state_dir), agent="writer") as memory:
        memory.write_entry("deploy", "How we deploy", "Run `make deploy`.\n")
    page.goto(ui.url)
    page.goto(f"{ui.base}/entry/deploy")
    expect(page.locator(".frontmatter")).to_contain_text("by writer")
    page.locator('#edit input[name="description"]').fill("How we deploy, step by step")
    page.locator("#edit textarea").fill("1. `make build`\n2. `make deploy`\n")
    page.locator("#edit button").click()
    page.locator("#confirm button").click()
    expect(page.locator(".note")).to_contain_text("saved")
    shot(page, screens, "entry")
    on_disk = (state_dir / "memory" / "global" / "deploy.md").read_text()
    assert "2. `make deploy`" in on_disk
    assert "description: How we deploy, step by step" in on_disk
    index = (state_dir / "memory" / "MEMORY.md").read_text()
    assert "How we deploy, step by step" in index


def test_v5_remove_an_entry_after_confirming(state_dir: Path, ui: UI, page: Any) -> None:
    """V5: forget an entry: its file goes, MEMORY.md follows."""
    with Memory(str(state_dir)) as memory:
        memory.write_entry("old-vpn", "The old VPN", "Gone since May.\n")
    page.goto(ui.url)
    page.goto(f"{ui.base}/entry/old-vpn")
    page.locator("#remove button").click()
    page.locator("#confirm button").click()
    expect(page.locator(".note")).to_contain_text("entry old-vpn removed")
    assert not (state_dir / "memory" / "global" / "old-vpn.md").exists()
    assert "old-vpn" not in (state_dir / "memory" / "MEMORY.md").read_text()


def test_v5_a_conflicting_concurrent_write_is_shown_not_overwritten(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V4/V5: HOT.md edited in the page while another process rewrites it: the save is
    refused (409), the page shows what is there now and the text that was not saved, and
    the other process's text stays."""
    cli(state_dir, "hot", "set", "- first version")
    page.goto(ui.url)
    page.goto(f"{ui.base}/hot")
    page.locator("form.edit textarea").fill("- my version from the browser")
    cli(state_dir, "hot", "set", "- written meanwhile by an agent")
    page.locator("form.edit button").click()
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.locator("#confirm button").click()
    assert answer.value.status == 409
    expect(page.locator(".error")).to_contain_text("changed by another writer")
    expect(page.locator("pre.current")).to_contain_text("written meanwhile by an agent")
    expect(page.locator("pre.draft")).to_contain_text("my version from the browser")
    hot = (state_dir / "memory" / "HOT.md").read_text()
    assert hot.strip() == "- written meanwhile by an agent"
    shot(page, screens, "conflict")

    # saved again from what is there now, it lands
    page.goto(f"{ui.base}/hot")
    page.locator("form.edit textarea").fill("- merged by hand")
    page.locator("form.edit button").click()
    page.locator("#confirm button").click()
    expect(page.locator(".note")).to_contain_text("saved")
    assert (state_dir / "memory" / "HOT.md").read_text().strip() == "- merged by hand"
    shot(page, screens, "hot")


def test_v4_a_procedure_edit_and_the_task_and_daily_pages(
    state_dir: Path, ui: UI, page: Any, screens: Path
) -> None:
    """V4: a procedure with its frontmatter, edited; a task with its lineage, subtasks
    and notes; a daily log rendered."""
    cli(
        state_dir,
        "procedure",
        "write",
        "release",
        "-",
        stdin="---\ndescription: Cut a release\n---\n# Release\n\n1. tag\n",
    )
    cli(state_dir, "task", "start", "build-site")
    cli(state_dir, "task", "start", "build-css", "--parent", "build-site")
    with Memory(str(state_dir), agent="styler") as memory:
        memory.add_note("build-css", "Use **one** stylesheet")
    cli(state_dir, "daily", "append", "Shipped the *new* search page")

    page.goto(ui.url)
    page.goto(f"{ui.base}/procedure/release")
    expect(page.locator(".frontmatter")).to_contain_text("Cut a release")
    expect(page.locator(".rendered h1")).to_have_text("Release")
    page.locator("#edit textarea").fill(
        "---\ndescription: Cut a release\n---\n# Release\n\n1. tag\n2. push\n"
    )
    page.locator("#edit button").click()
    page.locator("#confirm button").click()
    expect(page.locator(".rendered")).to_contain_text("push")
    assert "2. push" in (state_dir / "memory" / "procedures" / "release.md").read_text()
    shot(page, screens, "procedure")

    page.goto(f"{ui.base}/task/build-css")
    expect(page.locator(".lineage")).to_contain_text("build-site")
    expect(page.locator(".notes")).to_contain_text("styler")
    expect(page.locator(".notes strong")).to_have_text("one")
    shot(page, screens, "task")
    page.goto(f"{ui.base}/task/build-site")
    expect(page.locator(".tree")).to_contain_text("build-css")

    page.goto(f"{ui.base}/browse")
    expect(page.locator("main")).to_contain_text("build-site")
    day = page.locator('a[href^="/daily/"]').first
    day.click()
    expect(page.locator(".rendered em")).to_have_text("new")
    shot(page, screens, "daily")


# -- V6 ---------------------------------------------------------------------------------


def test_v6_a_request_without_the_token_gets_403(state_dir: Path, ui: UI, page: Any) -> None:
    """V6: every request needs the token (or the session cookie its first use set)."""
    for path in ("/", "/timeline", "/timeline/rows", "/search?q=x", "/fact/1", "/static/app.css"):
        assert _status(f"{ui.base}{path}") == 403, path
    assert _status(f"{ui.base}/?token=not-the-token") == 403
    answer = page.goto(f"{ui.base}/")
    assert answer is not None and answer.status == 403
    answer = page.goto(ui.url)  # the printed address: a session, then the page
    assert answer is not None and answer.status == 200
    assert "token=" not in page.url  # sent on without it
    headers = answer.headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


def test_v6_a_write_without_the_csrf_token_changes_nothing(
    state_dir: Path, ui: UI, page: Any
) -> None:
    """V6: with a valid session cookie but no (or a wrong) CSRF token, a write is refused
    with 403 and nothing changes."""
    cli(state_dir, "hot", "set", "- keep me")
    cli(state_dir, "fact", "add", "The build uses make", "-c", "convention")
    page.goto(ui.url)
    cookie = next(c for c in page.context.cookies() if c["name"].startswith("memdir_ui_"))
    jar = f"{cookie['name']}={cookie['value']}"
    revision = page.goto(f"{ui.base}/hot") and page.locator('input[name="revision"]').input_value()
    for csrf in (None, "wrong"):
        fields = {"content": "- overwritten", "revision": revision, "confirm": "yes"}
        if csrf:
            fields["csrf"] = csrf
        assert _status(f"{ui.base}/hot", fields, jar) == 403
        assert _status(f"{ui.base}/fact/1/remove", {"confirm": "yes"}, jar) == 403
    assert (state_dir / "memory" / "HOT.md").read_text().strip() == "- keep me"
    assert _fact_contents(state_dir) == ["The build uses make"]
    shown = json.loads(cli(state_dir, "fact", "show", "1", "--json").stdout)
    assert shown["status"] == "active"
    # the page's own token does write (the check is what refused the others)
    real = page.locator('input[name="csrf"]').first.input_value()
    fields = {"content": "- from the form", "revision": revision, "confirm": "yes", "csrf": real}
    assert _status(f"{ui.base}/hot", fields, jar) == 303


def _status(url: str, form: dict[str, str] | None = None, cookie: str | None = None) -> int:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data)
    if cookie:
        request.add_header("Cookie", cookie)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_v6_memory_holding_a_script_renders_as_text(state_dir: Path, ui: UI, page: Any) -> None:
    """V6: memory is untrusted text: a `<script>` (and an onerror attribute) in a fact,
    an entry, HOT.md and a task note is shown as text on every page, and never runs."""
    cli(state_dir, "hot", "set", f"- hot {SCRIPT}")
    cli(state_dir, "fact", "add", f"A fact {SCRIPT}", "-c", "learning")
    cli(state_dir, "task", "start", "t1")
    with Memory(str(state_dir)) as memory:
        memory.add_note("t1", f"A note {SCRIPT}")
    with Memory(str(state_dir)) as memory:
        memory.write_entry("xss", f"An entry {SCRIPT}", f"Body {SCRIPT}\n")
    page.goto(ui.url)
    for path in (
        "/",
        "/timeline",
        "/search?q=fact",
        "/fact/1",
        "/entry/xss",
        "/hot",
        "/task/t1",
        "/browse",
    ):
        page.goto(f"{ui.base}{path}")
        expect(page.locator("main")).to_contain_text("<script>window.__pwned = 1</script>")
        assert page.evaluate("window.__pwned") is None, path
        assert page.locator("main script, main img").count() == 0, path


def test_v6_serve_http_ui_mounts_the_browser_beside_mcp_with_its_own_token(
    state_dir: Path, tmp_path: Path, page: Any
) -> None:
    """V6: `memdir serve --http ... --ui` serves the browser at /ui/ behind its own token
    (no bearer header needed from a browser), while /mcp keeps the bearer token given."""
    port = free_port()
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    bearer = "b" * 32
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            cli_command("serve", "--http", f"127.0.0.1:{port}", "--ui"),
            env=cli_env(str(state_dir), {"MEMDIR_TOKEN": bearer}),
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
        )
    try:
        found = poll(
            lambda: proc.poll() is None and re.search(r"memory browser: (\S+)", out.read_text()),
            60,
            "the browser's address",
        )
        poll(lambda: _listens(port), 60, "serve listening")
        address = found.group(1)
        assert address.startswith(f"http://127.0.0.1:{port}/ui/?token=")
        assert _status(f"http://127.0.0.1:{port}/ui/") == 403
        assert _status(f"http://127.0.0.1:{port}/mcp", {"x": "y"}) == 401  # bearer kept
        cli(state_dir, "fact", "add", "Mounted pages work too", "-c", "learning")
        page.goto(address)
        expect(page.locator("h1")).to_have_text("Overview")
        page.goto(f"http://127.0.0.1:{port}/ui/fact/1")
        page.locator("#remove button").click()
        page.locator("#confirm button").click()
        expect(page.locator("h1")).to_contain_text("removed")
        assert page.url.startswith(f"http://127.0.0.1:{port}/ui/fact/1")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err.read_text(), err.read_text()
