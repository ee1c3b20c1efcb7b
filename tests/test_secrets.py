"""Secrets never reach memory (X2): refused on every write path, named, nothing on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir import Memory, ValidationError, secret_scan
from memdir.errors import SecretError
from memdir.secret_scan import find, normalise

# Each is built from pieces so that no scanner flags this test file as a leaked secret.
SECRETS = {
    "a private key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END",
    "an AWS access key id": "AKIA" + "IOSFODNN7EXAMPLQ",
    "a GitHub token": "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyzAB",
    "a Slack token": "xoxb-" + "123456789012-abcdefghijklmn",
    "an Anthropic API key": "sk-ant-" + "api03-abcdefghijklmnopqrstuvwxyz012345",
    "an OpenAI API key": "sk-" + "proj-abcdefghijklmnopqrstuvwxyz0123",
    "a Google API key": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "a JSON Web Token": "eyJhbGciOiJIUzI1NiJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "a password in a URL": "postgres://admin:" + "s3cr3tPass@db.internal/app",
    "a password value": "password = " + "correct-horse-battery",
    "a secret value": "secret: " + "9f8d7c6b5a4e3f2d1c0b9a8f7e6d5c4b",
}

CLEAN = [
    "The user prefers tabs and a token budget of 4000 characters.",
    "Passwords live in the team vault; never paste them here.",
    "api_key = os.environ['OPENAI_API_KEY']",
    "password: get_password_from_keyring()",
    "Connect with postgres://user:password@localhost/db in the docs example.",
    "client_secret: settings.CLIENT_SECRET",
    "set TOKEN=${GITHUB_TOKEN} in CI",
    "sk-learn and scikit-learn are the same library",
    'The JWT header starts with eyJ, which is base64 for {"',
    "ssh-keygen -t ed25519 makes a key pair; the public key goes to GitHub",
    "def login(user, password): return check(user, password)",
    "Commit 3f2a9c1d4b5e6f708192a3b4c5d6e7f8a9b0c1d2 fixed the bug",
]


@pytest.mark.parametrize("kind", SECRETS)
def test_each_kind_of_secret_is_found_and_named(kind: str) -> None:  # X2
    found = find(f"note: {SECRETS[kind]} (from the deploy script)")
    assert found is not None and found[0] == kind


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_prose_and_code_pass(text: str) -> None:  # X2: false positives stay rare
    assert find(text) is None


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("kind", ["a GitHub token", "a password in a URL", "a private key"])
def test_every_write_path_refuses_and_writes_nothing(memory: Memory, kind: str) -> None:  # X2
    secret = SECRETS[kind]
    memory.add_fact("a harmless fact", "learning")  # the store exists
    memory.start_task("t")
    writes = {
        "fact": lambda: memory.add_fact(f"deploy with {secret}", "learning"),
        "bulk": lambda: memory.add_facts([("ok", "learning"), (secret, "learning")]),
        "supersede": lambda: memory.supersede_fact(1, f"now {secret}"),
        "hot set": lambda: memory.hot_set(f"Name: Ada\n{secret}"),
        "hot append": lambda: memory.hot_append(secret),
        "procedure": lambda: memory.write_procedure("deploy", f"# Deploy\n{secret}\n"),
        "entry": lambda: memory.write_entry("creds", "where creds are", secret),
        "entry description": lambda: memory.write_entry("creds", f"key {secret}", "body"),
        "note": lambda: memory.add_note("t", f"used {secret}"),
        "daily": lambda: memory.daily_append(f"rotated {secret}"),
    }
    for path, write in writes.items():
        with pytest.raises(SecretError, match=kind) as info:
            write()
        assert "\n" not in str(info.value) and "line" in str(info.value), path
        assert isinstance(info.value, ValidationError)
    block = json.dumps({"content": f"the key is {secret}"})
    marker = f"MEMDIR_MEMORIZE_BEGIN\n{block}\nMEMDIR_MEMORIZE_END\n"
    ingested = memory.ingest(marker, task="t")
    assert ingested.applied == [] and any("looks like" in w for w in ingested.warnings)
    memory.close()
    # no byte of it reached disk: not the files, not the database, not the WAL
    fragment = secret[-12:].encode() if kind != "a private key" else b"MIIEowIBAAKCAQEA7"
    assert fragment not in _all_bytes(Path(memory.path))


def test_cli_refuses_with_one_line(run) -> None:  # X2
    result = run("fact", "add", f"token {SECRETS['a Slack token']}", "-c", "learning")
    assert result.code == 1 and "a Slack token" in result.err and result.err.count("\n") == 1


# -- the scan's shortcuts find what the full scan finds (X2) ---------------------------------

NEEDLE_PIECES = sorted({needle for needle, _ in secret_scan._index()}) + [" ", "\n", "\t", "x"]


def _present_plainly(lowered: str) -> set[int]:
    """Every needle tested against the whole text: what the word-by-word test must equal."""
    present: set[int] = set()
    for needle, numbers in secret_scan._index():
        if needle in lowered:
            present |= numbers
    return present


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(NEEDLE_PIECES), st.text(max_size=6)), min_size=0, max_size=30
    )
)
def test_needles_found_word_by_word_are_those_found_in_the_whole_text(pieces: list[str]) -> None:
    # X2: needles that cross words, repeat, or sit in a word seen before are all found
    secret_scan._scans = secret_scan.LEARN_AFTER  # as in a bulk import: words remembered
    lowered = "".join(pieces).lower()
    assert secret_scan._present(lowered) == _present_plainly(lowered)
    assert secret_scan._present(lowered) == _present_plainly(lowered)  # now from the memo


def test_needles_of_words_forgotten_by_a_memo_reset_are_found_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # X2: past MEMO_LIMIT words the memo starts again; a text of words known before the
    # reset, and one new word, still has every needle of every word found
    secret_scan._scans = secret_scan.LEARN_AFTER
    monkeypatch.setattr(secret_scan, "MEMO_LIMIT", 0)
    known = "the password and token of the machine"
    assert secret_scan._present(known) == _present_plainly(known)
    text = known + " akia"
    assert secret_scan._present(text) == _present_plainly(text)
    assert secret_scan._present(text) == _present_plainly(text)


RUN_SHAPES = [(n, shape) for n, shape in enumerate(secret_scan.SHAPES) if shape.min_run]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="MNOabcXYZ019_-.", min_size=0, max_size=45),
            st.sampled_from([" ", "\n", "\t", ".", "M" * 24, "a" * 6, "b" * 27]),
        ),
        max_size=12,
    )
)
def test_a_shape_skipped_for_short_words_could_not_have_matched(pieces: list[str]) -> None:
    # X2: a shape whose every match is one unbroken run of min_run characters is not run
    # on a text without a word that long: it would have found nothing there
    text = "".join(pieces)
    longest = max(map(len, text.split()), default=0)
    for number, shape in RUN_SHAPES:
        for match in secret_scan._pattern(number).finditer(text):
            assert len(match.group(0).split()) == 1
            assert len(match.group(0)) >= shape.min_run and longest >= shape.min_run


def test_shapes_with_a_minimum_run_still_catch_their_secrets() -> None:  # X2
    token = "M" + "a1B2c3D4e5F6g7H8i9J0k1L2" + "." + "Gh-_x9" + "." + "z" * 20 + "Q1w2E3r4"
    assert len(token) == 1 + 24 + 1 + 6 + 1 + 28
    for text in (f"bot token {token} in prose.", f"DISCORD={token}", f"{token[:30]}\n{token[30:]}"):
        found = find(text)
        assert found is not None and "Discord" in found.kind, text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab \n\t=-+/_0123456789ABCDEF", max_size=80))
def test_the_skipped_regexes_would_have_found_nothing(text: str) -> None:  # X2
    # the spelled-out key and the encoded runs are looked for wherever they can be
    assert normalise.joined(text) == _joined_plainly(text)
    assert list(normalise.decoded_runs(text)) == _runs_plainly(text)


def _joined_plainly(text: str) -> str:
    text = normalise._CONTINUATION.sub("", text)
    if "'" in text or '"' in text:
        text = normalise._CONCAT.sub("", text)
    if "\n" in text:
        text = normalise._BREAK.sub("", text)
    return normalise._SPACED.sub(lambda m: m.group(0).replace(" ", ""), text)


def _runs_plainly(text: str) -> list[str]:
    runs = [m.group(0) for m in normalise._BASE64_RUN.finditer(text)]
    found = [
        normalise._base64(run)
        for run in runs
        if not (run.isdigit() or run.isalpha() and run.islower())  # as decoded_runs skips
    ]
    found += [
        normalise._printable(bytes.fromhex(m.group(0))) for m in normalise._HEX_RUN.finditer(text)
    ]
    return [plain for plain in found if plain is not None]


def test_a_bulk_import_refuses_the_first_secret_as_one_write_would(tmp_path: Path) -> None:
    # X2: one scan of a repeated value, and the refusal names the same row and field
    secret = SECRETS["a GitHub token"]
    rows = [(f"fact {i}", "learning") for i in range(20)] + [(f"deploy with {secret}", "decision")]
    memory = Memory(tmp_path / "s", env={}, cwd=tmp_path, create=True)
    with pytest.raises(SecretError) as bulk:
        memory.add_facts(rows)
    with pytest.raises(SecretError) as single:
        memory.add_fact(f"deploy with {secret}", "decision")
    assert str(bulk.value) == str(single.value)
    # import: each row's checks come before the next row's scan, as one by one
    with pytest.raises(SecretError):
        memory.import_facts(
            [{"content": "ok", "category": "learning", "agent": secret}, {"category": "x"}]
        )
    with pytest.raises(ValidationError):
        memory.import_facts(
            [{"content": "ok", "category": "nope"}, {"content": secret, "category": "learning"}]
        )
    assert memory.stats().facts_active == 0
    memory.close()


def test_a_big_import_with_a_secret_in_a_late_part_writes_nothing(tmp_path: Path) -> None:
    # X2: a bulk import is checked part by part while earlier parts are being inserted
    # (storage/ahead.py); a secret in a late part still refuses the whole import, names the
    # first secret, and leaves no fact of the earlier parts behind
    github, aws = SECRETS["a GitHub token"], SECRETS["an AWS access key id"]
    rows = [(f"fact number {i} about sockets", "learning") for i in range(3000)]
    rows[2100] = (f"deploy with {github}", "decision")
    rows[2900] = (f"key {aws}", "decision")
    memory = Memory(tmp_path / "s", env={}, cwd=tmp_path, create=True)
    with pytest.raises(SecretError) as refused:
        memory.add_facts(rows)
    assert "GitHub" in str(refused.value)
    assert memory.stats().facts_active == 0
    assert memory.search("sockets", mode="lexical") == []
    ids = memory.add_facts(rows[:2000])  # the rest of the import goes in as before
    assert len(set(ids)) == 2000 and memory.stats().facts_active == 2000
    memory.close()
