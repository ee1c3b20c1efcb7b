"""A choice of embedding models (Q2, S): [embeddings] in config.toml picks the bundled
MiniLM, a sentence-transformers or fastembed model, or an OpenAI-compatible endpoint. The
endpoint is a real HTTP server on loopback (memdir.testing.EmbeddingsStandIn); the bundled
model is the real one. Vectors record the model that made them, a change of model
re-embeds (with progress) and never mixes spaces, doctor names the model and what is
stale, a configured model's calibration is measured once, and the warm worker serves the
configured model."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from dbrows import TEAM
from dbrows import rows as db_rows
from memdir import Memory
from memdir.cli.curation import render
from memdir.curation import doctor
from memdir.errors import ConfigError, EmbeddingError, MissingExtraError
from memdir.search import CALIBRATED, calibration, worker
from memdir.settings import EMBEDDINGS_PROVIDERS, load_settings
from memdir.storage import embedders, embeddings
from memdir.testing import EmbeddingsStandIn as StandIn
from memdir.testing import at_once, cli_command, cli_env, poll

needs_model = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")
KEY = "sk-test-0123456789abcdefABCDEF"  # the stand-in's key: never written anywhere
FACTS = (
    "giraffes sleep standing up in the savanna",
    "the wiki moved to the new nas box",
    "kiwi vines like shade in the orchard",
    "the build uses make and a venv",
    "our cat naps on the warm windowsill",
)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    monkeypatch.setenv("STANDIN_EMBED_KEY", KEY)
    with StandIn(key=KEY) as server:
        yield server


def configure(state_dir: Path, server: StandIn | None, model: str = "standin-embed") -> None:
    """config.toml naming the stand-in (or, with None, the bundled model)."""
    text = "[search]\nworker_idle = 0\n"
    if server is not None:
        text += (
            f'[embeddings]\nprovider = "openai"\nmodel = "{model}"\nurl = "{server.url}"\n'
            'api_key_env = "STANDIN_EMBED_KEY"\n'
        )
    state_dir.joinpath("config.toml").write_text(text)


# -- the setting (S) --------------------------------------------------------------------


def test_embeddings_table_picks_a_model(state_dir: Path) -> None:
    """S, Q2: [embeddings] is checked on the way in; the model id is what vectors record."""
    path = state_dir / "config.toml"
    assert load_settings(str(path)).embedding_choice() == embedders.BUNDLED
    assert embedders.model_id(embedders.BUNDLED) == embeddings.DEFAULT_MODEL  # stores keep theirs
    assert EMBEDDINGS_PROVIDERS == embedders.PROVIDERS
    path.write_text('[embeddings]\nprovider = "fastembed"\npath = "models/bge"\n')
    assert load_settings(str(path)).embeddings_path == str(state_dir / "models" / "bge")
    path.write_text(
        '[embeddings]\nprovider = "openai"\nmodel = "nomic-embed-text"\n'
        'url = "http://127.0.0.1:11434/v1"\napi_key_env = "MY_KEY"\ndimensions = 256\n'
        "timeout = 5\n"
    )
    choice = load_settings(str(path)).embedding_choice()
    assert (choice.provider, choice.model, choice.api_key_env, choice.timeout) == (
        "openai",
        "nomic-embed-text",
        "MY_KEY",
        5.0,
    )
    assert embedders.model_id(choice) == "openai:nomic-embed-text@256"
    path.write_text('[embeddings]\nprovider = "fastembed"\n')
    choice = load_settings(str(path)).embedding_choice()
    assert embedders.model_id(choice) == "fastembed:BAAI/bge-small-en-v1.5"
    assert embedders.loadable(embedders.model_id(choice))
    assert not embedders.loadable(embeddings.DEFAULT_MODEL) and not embedders.loadable("hash")


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('provider = "word2vec"', "embeddings.provider = 'word2vec' is not valid: it must be one"),
        ('provider = "openai"', "embeddings.provider = 'openai' is not valid: it must be given "),
        ('model = "BAAI/bge-small-en-v1.5"', 'left out with provider = "bundled"'),
        ('provider = "openai"\nmodel = "m"\nurl = "localhost:11434"', "embeddings.url"),
        ('api_key_env = "MY KEY"', "the name of an environment variable"),
        ("dimensions = 0", "embeddings.dimensions"),
    ],
)
def test_embeddings_table_refuses_what_it_cannot_use(
    state_dir: Path, table: str, says: str
) -> None:
    """S: a bad [embeddings] value is a ConfigError naming the file, line and key."""
    path = state_dir / "config.toml"
    path.write_text(f"[embeddings]\n{table}\n")
    with pytest.raises(ConfigError, match=r"config.toml:[234]: ") as caught:
        load_settings(str(path))
    assert says in str(caught.value)


def test_a_key_is_never_a_setting(state_dir: Path) -> None:
    """Q2, X2: an api key in config.toml is refused, naming api_key_env, and the refusal
    does not quote it."""
    path = state_dir / "config.toml"
    path.write_text(f'[embeddings]\nprovider = "openai"\nmodel = "m"\napi_key = "{KEY}"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(str(path))
    assert "api_key_env" in str(caught.value) and "never stored" in str(caught.value)
    assert KEY not in str(caught.value) and caught.value.line == 4


# -- the endpoint provider (Q2) ----------------------------------------------------------


def test_endpoint_embeds_searches_and_keeps_the_key_out_of_the_store(
    state_dir: Path, endpoint: StandIn
) -> None:
    """Q2: with provider "openai", every vector comes from the endpoint (the key in a
    Bearer header only), search compares the question with them, and the calibration of
    the model is measured once on the shipped set and kept in the store."""
    configure(state_dir, endpoint)
    with Memory() as mem:
        assert mem.model_id() == "openai:standin-embed"
        for text in FACTS:
            mem.add_fact(text, category="learning")  # each small write embeds what it wrote
        model = mem.model_id()
        assert mem.store.count_unembedded(model) == 0
        assert mem.store.vector_models() == {model: len(FACTS)}
        hits = mem.search("kiwi orchard", mode="semantic", kinds=["fact"])
        assert hits[0].content == FACTS[2] and not hits[0].lexical_only
        measured = mem.store.get_value(CALIBRATED + model)
        assert measured is not None
        mean, p99 = calibration(model, mem.store)
        assert (mean, p99) == tuple(float(x) for x in measured.split()) and p99 > mean
        # the score is the cosine on the measured scale, not the plain cosine
        q = embedders.load(mem.settings.embedding_choice()).embed(["kiwi orchard"])[0]
        v = embedders.load(mem.settings.embedding_choice()).embed([FACTS[2]])[0]
        assert hits[0].score == round((float(q @ v) - mean) / (p99 - mean), 4)
    requests = endpoint.requests
    assert requests and all(r["path"] == "/v1/embeddings" for r in requests)
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in requests)
    assert all(r["body"]["model"] == "standin-embed" for r in requests)
    calibration_set = Path(embeddings.__file__).parent.parent / "data" / "calibration.txt"
    lines = [line for line in calibration_set.read_text().splitlines() if line.strip()]
    assert endpoint.texts().count(lines[0].strip()) == 1  # measured once, not per write
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_endpoint_dimensions_are_asked_for(state_dir: Path, endpoint: StandIn) -> None:
    """Q2: `dimensions` is sent to the endpoint and is part of the model's id."""
    configure(state_dir, endpoint)
    with open(state_dir / "config.toml", "a") as handle:
        handle.write("dimensions = 16\n")
    with Memory() as mem:
        mem.add_fact(FACTS[0], category="learning")
        assert mem.model_id() == "openai:standin-embed@16"
        assert mem.store.vector_models() == {"openai:standin-embed@16": 1}
        blob = next(mem.store.iter_vectors("openai:standin-embed@16")).vec
    assert len(blob) == 16 * 4
    assert {r["body"]["dimensions"] for r in endpoint.requests} == {16}


def test_endpoint_failures_are_one_line_errors(
    state_dir: Path, endpoint: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Q2: a wrong key, a server error, an answer that is not JSON, an endpoint that is
    not there and a key variable that is not set are each an EmbeddingError of one line
    that never quotes the key; a write still succeeds (its vector waits)."""
    configure(state_dir, endpoint)
    choice = load_settings(str(state_dir / "config.toml")).embedding_choice()

    def error() -> str:
        with pytest.raises(EmbeddingError) as caught:
            embedders.Endpoint(choice, "openai:standin-embed")
        message = str(caught.value)
        assert "\n" not in message and KEY not in message
        return message

    endpoint.key = "another-key"
    assert "answered HTTP 401" in error() and "invalid api key" in error()
    endpoint.fail = 503
    assert "answered HTTP 503" in error()
    endpoint.fail = "garbage"
    assert "not JSON" in error()
    endpoint.fail = None
    endpoint.key = KEY
    assert embedders.Endpoint(choice, "x").dim == 48
    monkeypatch.delenv("STANDIN_EMBED_KEY")
    assert "$STANDIN_EMBED_KEY, which is not set" in error()
    monkeypatch.setenv("STANDIN_EMBED_KEY", KEY)
    gone = choice._replace(url=f"http://127.0.0.1:{endpoint.port}/v1")
    endpoint.__exit__()
    with pytest.raises(EmbeddingError, match="cannot reach the embeddings endpoint"):
        embedders.Endpoint(gone, "x")
    with Memory() as mem:  # the endpoint is down: the write is kept, its vector waits
        fact = mem.add_fact("written while the endpoint is down", category="learning")
        assert mem.get_fact(fact.id).content == "written while the endpoint is down"
        assert mem.store.count_unembedded(mem.model_id()) == 1


def test_a_missing_extra_names_its_install_command(state_dir: Path) -> None:
    """Q2: a provider whose extra is not installed makes search lexical in the default
    mode (the notice says how to install it) and is a one-line MissingExtraError when a
    semantic mode is asked for; nothing of the extra is imported."""
    missing = [
        p for p in ("fastembed", "sentence-transformers") if find_spec(p.replace("-", "_")) is None
    ]
    if not missing:
        pytest.skip("both optional providers are installed here: nothing is missing")
    provider = missing[0]
    state_dir.joinpath("config.toml").write_text(f'[embeddings]\nprovider = "{provider}"\n')
    with Memory() as mem:
        mem.add_fact(FACTS[0], category="learning")
        assert mem.search_mode() == "lexical"
        assert mem.search("giraffes")[0].content == FACTS[0]
        notice = mem.search_notice() or ""
        assert f"needs the {provider} extra" in notice and f"[{provider}]" in notice
        with pytest.raises(MissingExtraError) as caught:
            mem.search("giraffes", mode="semantic")
        assert caught.value.extra == provider and "\n" not in str(caught.value)
        report = doctor.run(mem)
        assert [f.check for f in report.findings if f.check.startswith("embeddings.")] == [
            "embeddings.extra"
        ]
        assert report.database["embeddings"]["in_use"] is False


# -- a change of model (Q2) ---------------------------------------------------------------


@needs_model
def test_a_change_of_model_reembeds_with_progress_and_never_mixes_spaces(
    state_dir: Path, endpoint: StandIn
) -> None:
    """Q2: vectors of the bundled model are not compared with the endpoint's question;
    until reindex every item is ranked by its words (and doctor says it is stale); reindex
    re-embeds them all with progress from 0, then drops the old model's vectors; a change
    back re-embeds again."""
    configure(state_dir, None)
    with Memory() as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
        assert mem.store.vector_models() == {embeddings.DEFAULT_MODEL: len(FACTS)}
    configure(state_dir, endpoint)
    with Memory() as mem:
        new = mem.model_id()
        hits = mem.search("kiwi orchard", mode="semantic", kinds=["fact"])
        assert hits and all(hit.lexical_only for hit in hits)  # by words: no old vector used
        assert mem.unembedded == len(FACTS)
        report = doctor.run(mem)
        stale = [f for f in report.findings if f.check == "embeddings.stale"]
        assert len(stale) == 1 and stale[0].severity == "warning"
        assert f"now {new}" in stale[0].message and "reindex" in stale[0].action
        assert report.database["embeddings"]["other_models"] == {
            embeddings.DEFAULT_MODEL: len(FACTS)
        }
        seen: list[tuple[str, int, int]] = []
        done = mem.reindex(progress=lambda stage, d, t: seen.append((stage, d, t)))
        steps = [(d, t) for stage, d, t in seen if stage == "embeddings"]
        assert steps[0] == (0, len(FACTS)) and steps[-1] == (len(FACTS), len(FACTS))
        assert (done.embedded, done.dropped) == (len(FACTS), len(FACTS))
        assert mem.store.vector_models() == {new: len(FACTS)}
        hits = mem.search("kiwi orchard", mode="semantic", kinds=["fact"])
        assert hits[0].content == FACTS[2] and not hits[0].lexical_only
        report = doctor.run(mem)
        assert not [f for f in report.findings if f.check.startswith("embeddings.")]
        shown = render(report).splitlines()
        # in team mode doctor says how the server ranks, on the line after (W1)
        at = -3 if TEAM else -2
        assert shown[at] == f"search model: {new} (openai); 5 vectors, 0 item(s) waiting"
        assert report.database["embeddings"] == {
            "model": new,
            "provider": "openai",
            "installed": True,
            "in_use": True,
            "vectors": len(FACTS),
            "waiting": 0,
            "other_models": {},
        }
    configure(state_dir, None)
    with Memory() as mem:
        done = mem.reindex()
        assert (done.embedded, done.dropped) == (len(FACTS), len(FACTS))
        assert mem.store.vector_models() == {embeddings.DEFAULT_MODEL: len(FACTS)}


def test_old_vectors_stay_until_the_new_model_covers_the_store(
    state_dir: Path, endpoint: StandIn
) -> None:
    """Q2: reindex drops another model's vectors only once nothing waits for the new one;
    left over, doctor notes them and reindex drops them."""
    configure(state_dir, endpoint, model="first")
    with Memory() as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
    configure(state_dir, endpoint, model="second")
    with Memory() as mem:
        from memdir.search import vectors

        embedder = mem.embedder()
        assert vectors.replace_model(mem.store, embedder) == 0  # all five wait: none dropped
        assert set(mem.store.vector_models()) == {"openai:first"}
        vectors.embed_pending(mem.store, embedder)
        report = doctor.run(mem)
        found = [f for f in report.findings if f.check.startswith("embeddings.")]
        assert [f.check for f in found] == ["embeddings.unused"]
        assert "openai:first (5)" in found[0].message and found[0].severity == "info"
        assert mem.reindex().dropped == len(FACTS)
        assert mem.store.vector_models() == {"openai:second": len(FACTS)}


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_concurrent_reindexes_after_a_change_of_model(state_dir: Path, endpoint: StandIn) -> None:
    """Q2: three `memdir reindex` at once after a change of model all succeed and leave
    exactly one vector of the new model per item, none of the old."""
    configure(state_dir, endpoint, model="old")
    with Memory() as mem:
        mem.add_facts([(f"fact number {i} about topic {i % 7}", "learning") for i in range(120)])
        mem.embed_pending()
        assert mem.store.vector_models() == {"openai:old": 120}
    configure(state_dir, endpoint, model="new")
    env = cli_env(str(state_dir), {"STANDIN_EMBED_KEY": KEY})
    results = at_once(cli_command("reindex", "--json"), 3, env)
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    with Memory() as mem:
        rows = db_rows(
            mem.store,
            "SELECT model, count(*), count(DISTINCT owner_id) FROM vectors GROUP BY model",
        )
    assert rows == [("openai:new", 120, 120)]


# -- the warm worker serves the configured model (Q2) --------------------------------------


@pytest.mark.slow
def test_the_worker_serves_the_configured_model_and_goes_when_it_changes(
    state_dir: Path, endpoint: StandIn
) -> None:
    """Q2: a CLI search starts a worker that serves the configured model; a request for
    another model is refused; asked to exit it frees its lock; after a change of model in
    config.toml it goes and a worker of the new model answers."""
    import subprocess
    import time

    def config(model: str) -> None:
        configure(state_dir, endpoint, model=model)
        text = (
            (state_dir / "config.toml").read_text().replace("worker_idle = 0", "worker_idle = 60")
        )
        (state_dir / "config.toml").write_text(text)

    config("one")
    with Memory() as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
    env = cli_env(str(state_dir), {"STANDIN_EMBED_KEY": KEY})
    places = worker.Places(str(state_dir))

    def search() -> str:
        proc = subprocess.run(
            cli_command("search", "kiwi orchard", "--mode", "semantic", "--json"),
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "kiwi vines" in search()
    first = poll(lambda: worker.call(places, {"op": "status"}, 5))
    assert first["model"] == "openai:one"
    asked = worker.call(places, {"op": "query", "model": "openai:two", "text": "x", "want": 1}, 5)
    assert asked is not None and "serves openai:one, not openai:two" in asked["error"]
    # asked to go (what a search of another model does), it lets go of its lock and socket
    worker.retire(places, time.monotonic() + 60)
    assert worker.call(places, {"op": "status"}, 5) is None
    poll(lambda: not os.path.exists(places.socket))
    assert "kiwi vines" in search()
    first = poll(lambda: worker.call(places, {"op": "status"}, 5))
    # a change of config.toml's model: the worker sees it and goes; the next one serves it
    config("two")
    with Memory() as mem:
        mem.reindex()
    assert "kiwi vines" in search()
    second = poll(lambda: worker.call(places, {"op": "status"}, 5))
    assert second["model"] == "openai:two" and second["pid"] != first["pid"]
    assert os.path.exists(places.socket)


def test_an_endpoint_down_at_search_time(
    state_dir: Path, endpoint: StandIn, run: Callable[..., Any]
) -> None:
    """Q2: once the endpoint stops answering, a search in the default mode ranks by words
    and says why; a mode asked for by name is a one-line error. Both whether the model
    was loaded in the process before (the question fails) or is loaded now (the model
    fails: a CLI call)."""
    configure(state_dir, endpoint)
    with Memory() as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
        assert not mem.search("kiwi orchard")[0].lexical_only  # hybrid, by meaning too
        endpoint.fail = 503
        hits = mem.search("kiwi orchard")
        assert hits[0].content == FACTS[2]
        notice = mem.search_notice() or ""
        assert notice.startswith("ranked by words alone: the embedding model is unavailable")
        assert "HTTP 503" in notice
        with pytest.raises(EmbeddingError, match="HTTP 503"):
            mem.search("kiwi orchard", mode="semantic")
    env = {"STANDIN_EMBED_KEY": KEY}
    result = run("search", "kiwi orchard", env=env)
    assert result.code == 0 and "kiwi vines" in result.out
    assert "the embedding model is unavailable" in result.err and "HTTP 503" in result.err
    result = run("search", "kiwi orchard", "--mode", "semantic", env=env)
    assert result.code == 1 and len(result.err.strip().splitlines()) == 1
    assert "HTTP 503" in result.err and KEY not in result.err
