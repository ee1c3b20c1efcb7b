"""When items get their vectors (Q2, Q3, S [search] mode): a search embeds
nothing but its question, ranks what has no vector yet by its words and says so once;
small writes embed what they wrote where the model is loaded; `memdir import` and
`memdir reindex` embed with progress from the first item; the MCP server's background
worker embeds the rest. Real stores on disk; the deterministic HashEmbedder stands in for
the model where the model's quality is not the point, the real model where it is."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dbrows import rows
from memdir import Memory
from memdir.embed_worker import EmbedWorker
from memdir.search import worker
from memdir.search.vectors import STEP, embed_pending
from memdir.storage import embeddings
from memdir.testing import HashEmbedder, cli_command, cli_env
from memdir.tools import call_tool
from storeconfig import write_config

needs_model = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")
WAIT = 60.0  # seconds a background pass may take at most before a test fails


class CountingEmbedder(HashEmbedder):
    """The fake model, recording what it embedded and on which thread."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.threads: dict[str, str] = {}  # text -> the thread that embedded it
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        with self._lock:
            self.texts.extend(texts)
            self.threads.update((t, threading.current_thread().name) for t in texts)
        return super().embed(texts)

    def take(self, *queries: str) -> list[str]:
        """What was embedded since the last call, the search questions left out."""
        with self._lock:
            done, self.texts = self.texts, []
        return [t for t in done if t not in queries]


def vector_count(mem: Memory) -> int:
    return int(rows(mem.store, "SELECT count(*) FROM vectors")[0][0])


def imported(n: int, word: str = "kiwi") -> list[tuple[str, str]]:
    """n distinct facts sharing `word`, as an import brings them (content, category)."""
    return [
        (f"{word} note {i}: the orchard row {i} was pruned on day {i % 7}", "learning")
        for i in range(n)
    ]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def sem(state_dir: Path, embedder: CountingEmbedder) -> Any:
    with Memory(embedder=embedder) as mem:
        yield mem


def write_without_model(rows: list[tuple[str, str]]) -> None:
    """Facts stored without vectors, as an import stores them before it embeds (or a CLI
    call with [search] embed_on_write = "loaded")."""
    with Memory() as writer, writer.bulk():
        writer.add_facts(rows)


# -- a search embeds its question only -----------------------------------------------------


def test_a_search_embeds_only_its_question_and_ranks_the_same_each_time(
    sem: Memory, embedder: CountingEmbedder
) -> None:  # Q2 Q3
    write_without_model(imported(300))
    before = [sem.search("kiwi orchard pruned", mode="hybrid", limit=20) for _ in range(3)]
    assert embedder.take("kiwi orchard pruned") == []  # nothing but the question
    assert vector_count(sem) == 0
    assert before[0] == before[1] == before[2] and len(before[0]) == 20
    assert all(hit.lexical_only for hit in before[0])
    semantic = [sem.search("kiwi orchard pruned", mode="semantic", limit=20) for _ in range(2)]
    assert semantic[0] == semantic[1] and len(semantic[0]) == 20  # not "no matches"
    assert embedder.take("kiwi orchard pruned") == [] and vector_count(sem) == 0


def test_the_answer_says_once_how_many_wait_and_how_they_get_embedded(
    sem: Memory,
) -> None:  # Q2
    write_without_model(imported(5))
    sem.search("kiwi", mode="hybrid")
    assert sem.search_notice() == (
        "5 items are not embedded yet: they were ranked by words alone; "
        "to embed them: `memory.reindex()`"
    )
    sem.search("kiwi", mode="semantic")
    assert sem.search_notice() == (
        "5 items are not embedded yet: semantic search cannot see them, so they were "
        "matched by words; to embed them: `memory.reindex()`"
    )
    result = call_tool(sem, "memory_search", {"query": "kiwi", "mode": "semantic"})
    assert result["note"] == (  # over MCP the advice is addressed to the agent's user
        "5 items are not embedded yet: semantic search cannot see them, so they were "
        "matched by words; to embed them: ask the user to run `memdir reindex`"
    )
    assert len(result["hits"]) == 5
    assert all(hit["lexical_only"] is True for hit in result["hits"])
    sem.embed_later = lambda: None  # what the MCP server sets: its worker embeds them
    sem.search("kiwi", mode="hybrid")
    assert (sem.search_notice() or "").endswith("the server is embedding them in the background")
    sem.embed_later = None
    assert sem.embed_pending() == 5
    sem.search("kiwi", mode="semantic")
    assert sem.search_notice() is None
    sem.search("kiwi", mode="lexical")
    assert sem.search_notice() is None  # lexical search uses no vectors: nothing to say


def test_semantic_mode_puts_what_has_no_vector_after_the_semantic_hits(
    sem: Memory,
) -> None:  # Q2
    seen = sem.add_fact("kiwi vines want a male plant nearby", "learning")  # embedded
    write_without_model([("kiwi harvest starts in march", "learning")])
    hits = sem.search("kiwi vines want a male plant", mode="semantic")
    assert [(h.id, h.lexical_only) for h in hits][0] == (seen.id, None)
    assert [(h.content, h.lexical_only) for h in hits[1:]] == [
        ("kiwi harvest starts in march", True)
    ]
    assert 0.5 <= hits[0].score <= 1.0 and 0 < hits[1].score <= 1.0
    assert "1 item is not embedded yet" in (sem.search_notice() or "")


def test_hybrid_ranks_what_has_no_vector_by_its_lexical_score_alone(
    sem: Memory,
) -> None:  # Q3
    sem.add_fact("kiwi kiwi orchard", "learning")
    write_without_model([("kiwi orchard", "learning")])
    lexical = {h.content: h.score for h in sem.search("kiwi orchard", mode="lexical")}
    hybrid = sem.search("kiwi orchard", mode="hybrid")
    weights = sem.settings.search_lexical_weight, sem.settings.search_semantic_weight
    for hit in hybrid:
        if hit.lexical_only:
            assert hit.content == "kiwi orchard"
            assert hit.score == pytest.approx(weights[0] * lexical[hit.content], abs=1e-6)
        else:
            cosine = float(
                HashEmbedder().embed([hit.content])[0] @ HashEmbedder().embed(["kiwi orchard"])[0]
            )
            assert hit.score == pytest.approx(
                weights[0] * lexical[hit.content] + weights[1] * cosine, abs=1e-5
            )
    assert sorted(h.lexical_only is True for h in hybrid) == [False, True]


# -- writes --------------------------------------------------------------------------------


def test_a_small_write_embeds_only_what_it_wrote(
    sem: Memory, embedder: CountingEmbedder
) -> None:  # Q2
    write_without_model(imported(5))
    fact = sem.add_fact("the wiki lives on the old nas", "decision")
    assert embedder.take() == ["the wiki lives on the old nas"]  # once: the guard's vector
    sem.write_entry("nas", "the nas", "## Disks\n\nfour disks in raid 5\n")
    sem.add_note("t-1", "swapped disk two")
    sem.daily_append("checked the nas fans")
    sem.write_procedure("nas-reboot", "# Reboot the nas\n\nhold the button for five seconds\n")
    embedded = embedder.take()
    for text in (
        "four disks in raid 5",
        "swapped disk two",
        "checked the nas fans",
        "hold the button for five seconds",
    ):
        assert any(text in t for t in embedded), (text, embedded)
    assert not any("orchard" in t for t in embedded)  # what others wrote still waits
    assert sem.store.count_unembedded(embedder.name) == 5
    new = sem.supersede_fact(fact.id, "the wiki moved to the new nas")
    assert embedder.take() == ["the wiki moved to the new nas"]
    assert sem.search("wiki nas", mode="semantic")[0].id == new.id


def test_embed_on_write_loaded_leaves_a_cli_write_to_reindex(
    run: Callable[..., Any], state_dir: Path
) -> None:  # Q2 C
    """With [search] embed_on_write = "loaded" (`memdir fact add` takes ~30 ms and loading
    the model ~0.35 s) the CLI write stores the fact only; search finds it by its words and
    says how it gets its vector."""
    write_config(state_dir, '[search]\nembed_on_write = "loaded"\n')
    result = run("fact", "add", "kiwi vines like shade", "--category", "learning")
    assert result.code == 0, result.err
    with Memory() as mem:
        assert vector_count(mem) == 0
    result = run("search", "kiwi", "--mode", "hybrid", "--json")
    assert result.code == 0, result.err
    [hit] = result.json()
    assert hit["content"] == "kiwi vines like shade" and hit["lexical_only"] is True
    assert result.err.count("memdir: warning:") == 1
    assert "1 item is not embedded yet" in result.err and "memdir reindex" in result.err


@pytest.mark.embeddings
@needs_model
def test_a_cli_write_embeds_what_it_wrote_so_search_finds_it_by_meaning(
    run: Callable[..., Any], state_dir: Path
) -> None:  # Q2 S: embed_on_write = "always", the default
    write_without_model(imported(3))
    result = run("fact", "add", "giraffes sleep standing up", "--category", "learning")
    assert result.code == 0, result.err
    with Memory() as mem:
        assert vector_count(mem) == 1  # the written fact only: the three others still wait
        assert mem.store.count_unembedded(embeddings.DEFAULT_MODEL) == 3
    # found by meaning alone, by the next CLI call: no word in common
    found = run("search", "which animal naps on its feet", "--mode", "semantic", "--json")
    assert [h["content"] for h in found.json() if not h.get("lexical_only")] == [
        "giraffes sleep standing up"
    ]
    write_config(state_dir, '[search]\nembed_on_write = "sometimes"\n')
    result = run("fact", "add", "zebras too", "--category", "learning")
    assert result.code == 1 and "embed_on_write" in result.err and "loaded or always" in result.err


# -- import and reindex: in bulk, with progress from the first item -----------------------


def test_reindex_reports_progress_from_the_first_item(
    sem: Memory, embedder: CountingEmbedder
) -> None:  # Q3 G3
    write_without_model(imported(STEP * 2 + 5))
    steps: list[tuple[str, int, int]] = []
    done = sem.reindex(progress=lambda stage, d, t: steps.append((stage, d, t)))
    total = STEP * 2 + 5
    assert done.embedded == total
    embedding = [(d, t) for stage, d, t in steps if stage == "embeddings"]
    assert embedding == [(0, total), (STEP, total), (2 * STEP, total), (total, total)]
    assert sem.store.count_unembedded(embedder.name) == 0


def test_embedding_in_bulk_stops_at_a_boundary(sem: Memory, embedder: CountingEmbedder) -> None:
    """Q2: what a stopping server relies on: `stop` is asked before each batch, and what
    was embedded stays embedded."""
    write_without_model(imported(STEP * 3))
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1  # let one batch through

    assert embed_pending(sem.store, embedder, stop=stop) == STEP
    assert vector_count(sem) == STEP
    assert embed_pending(sem.store, embedder) == STEP * 2


def mem0_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "mem0.json"
    path.write_text(
        json.dumps([{"memory": text, "id": str(i)} for i, (text, _) in enumerate(imported(n))]),
        "utf-8",
    )
    return path


@pytest.mark.embeddings
@needs_model
def test_import_embeds_what_it_brought_with_progress_on_a_terminal(
    tmp_path: Path, state_dir: Path, run: Callable[..., Any]
) -> None:  # Q2 C
    source = mem0_file(tmp_path, 40)
    leader, follower = pty.openpty()  # stderr a terminal: the progress bar is drawn
    try:
        proc = subprocess.run(
            cli_command("import", "--from", "mem0", str(source)),
            env=cli_env(str(state_dir)),
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the writer closed its end
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, drawn
    frames = [f.strip() for f in drawn.decode().replace("\r", "\n").split("\n") if f.strip()]
    assert frames[0].startswith("embedding") and frames[0].endswith(" 0/40"), frames
    assert frames[-1].endswith(" 40/40") and "#" * 30 in frames[-1]
    assert "imported 40 facts" in proc.stdout and "embedded 40 items" in proc.stdout
    # the first search of a store starts its warm worker and says it ranked by words
    result = run("search", "kiwi orchard", "--json")
    assert result.code == 0 and "the embedding worker is starting" in result.err
    assert worker.wait_up(worker.Places(str(state_dir)), time.monotonic() + 120)
    result = run("search", "kiwi orchard", "--json")
    assert result.code == 0 and result.err == ""  # every item has its vector: no note
    assert all("lexical_only" not in hit for hit in result.json())


@pytest.mark.embeddings
@needs_model
def test_import_no_embed_leaves_it_to_reindex(
    tmp_path: Path, run: Callable[..., Any]
) -> None:  # Q2 C
    result = run("import", "--from", "mem0", str(mem0_file(tmp_path, 12)), "--no-embed", "--json")
    assert result.code == 0, result.err
    assert result.json()["embedded"] == 0 and len(result.json()["imported"]) == 12
    assert result.err == ""  # not a terminal: no bar
    result = run("search", "kiwi orchard", "--mode", "semantic", "--json")
    assert result.code == 0 and len(result.json()) == 10  # found by words, not "no matches"
    assert "12 items are not embedded yet" in result.err
    result = run("reindex", "--json")
    assert result.code == 0 and result.json()["embedded"] == 12
    result = run("search", "kiwi orchard", "--mode", "semantic", "--json")
    assert result.code == 0 and result.err == ""


# -- the background worker of the MCP server ------------------------------------------------


def test_the_worker_embeds_after_start_after_writes_and_after_searches(
    sem: Memory, embedder: CountingEmbedder
) -> None:  # Q2 A2
    write_without_model(imported(40))
    worker = EmbedWorker(sem)
    sem.embed_later = worker.poke
    worker.start()
    try:
        assert worker.wait_idle(WAIT)  # at start: what was there
        assert sem.store.count_unembedded(embedder.name) == 0
        embedder.take()
        embedder.threads.clear()
        with Memory() as other:  # another process writes; a hand-written file appears
            other.add_fact("giraffes sleep standing up", "learning")
        Path(sem.path, "global").mkdir(parents=True, exist_ok=True)
        Path(sem.path, "global", "zoo.md").write_text("# Zoo\n\nthe zoo opens at nine\n")
        sem.search("giraffes", mode="hybrid")  # meets them without vectors: pokes
        assert worker.wait_idle(WAIT)
        assert sem.store.count_unembedded(embedder.name) == 0
        by = {t: embedder.threads[t] for t in embedder.take("giraffes")}
        assert by and set(by.values()) == {"memdir-embedder"}, by  # not the caller's thread
        sem.add_note("t-9", "a note for the worker")
        assert worker.wait_idle(WAIT)
        assert any("a note for the worker" in t for t in embedder.take())
    finally:
        assert worker.stop(WAIT)
    assert worker.embedded >= 43


def test_the_worker_stops_at_once_whatever_it_is_doing(sem: Memory) -> None:  # Q2 U3
    write_without_model(imported(STEP * 20))
    worker = EmbedWorker(sem)
    worker.start()
    assert worker.stop(WAIT)  # loading or embedding: it ends at the next boundary
    assert vector_count(sem) == worker.embedded  # what it embedded is stored, whole batches
    assert worker.embedded % STEP == 0
    again = EmbedWorker(sem)
    assert again.stop(WAIT)  # never started: nothing to join


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.embeddings
@needs_model
@pytest.mark.anyio
async def test_the_server_embeds_in_the_background(state_dir: Path) -> None:  # Q2 A2
    """A real `memdir serve`: what was imported before it started, and what a tool call
    writes, get their vectors from its worker; its searches then need no note."""
    write_without_model(imported(20))
    serve = cli_command("serve")
    params = StdioServerParameters(command=serve[0], args=serve[1:], env=cli_env(str(state_dir)))

    def waiting() -> int:
        with Memory() as mem:
            return mem.store.count_unembedded(embeddings.DEFAULT_MODEL)

    async with Client(params, read_timeout_seconds=WAIT) as client:
        written = await client.call_tool(
            "memory_update", {"category": "learning", "content": "giraffes sleep standing up"}
        )
        assert not written.is_error
        with anyio.fail_after(WAIT):  # the worker's pass: an event to wait for, not a timing
            while waiting():
                await anyio.sleep(0.05)
        found = await client.call_tool("memory_search", {"query": "giraffes", "mode": "semantic"})
        result = found.structured_content
        assert result is not None and "note" not in result
        assert result["hits"][0]["content"] == "giraffes sleep standing up"
        assert all("lexical_only" not in hit for hit in result["hits"])
    with Memory() as mem:
        assert vector_count(mem) == 21
