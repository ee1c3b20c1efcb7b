"""A state dir's config.toml in the suite's PostgreSQL lanes (W1, L4): there the test's
database is named as a user names it, `[storage] url` in the state dir's config.toml
(besides $MEMDIR_DATABASE_URL), so every memdir process reaches the test's store, those an
agent host starts with only MEMDIR_STATE_DIR in their environment too. A test that writes a
config.toml of its own writes it with `write_config`, which keeps the [storage] keys the
file had; on memory.db (no URL) both write the text alone."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

# the suite's PostgreSQL lanes (tests/conftest.py): every store is a scope of a database
TEAM = os.environ.get("MEMDIR_TEST_BACKEND", "sqlite") in ("postgres", "pgvector")
URL_ENV = "MEMDIR_DATABASE_URL"


def storage_keys(state_dir: Path) -> dict[str, str]:
    """The [storage] keys of the state dir's config.toml (none when it has no such table,
    or is no TOML a test left there on purpose)."""
    try:
        table = tomllib.loads((state_dir / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    storage = table.get("storage")
    if not isinstance(storage, dict):
        return {}
    return {k: v for k, v in storage.items() if isinstance(v, str)}


def set_storage(state_dir: Path, **keys: str) -> None:
    """Set `keys` in the [storage] table of the state dir's config.toml (the file and the
    table made when missing), every other line kept where it was."""
    config = state_dir / "config.toml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    lines = text.splitlines()
    assignment = re.compile(r"\s*(" + "|".join(map(re.escape, keys)) + r")\s*=")
    header = next((i for i, line in enumerate(lines) if line.strip() == "[storage]"), None)
    new = [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    if header is None:
        lines += ["[storage]", *new]
    else:
        end = next(
            (i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")),
            len(lines),
        )
        table = [line for line in lines[header + 1 : end] if not assignment.match(line)]
        lines[header + 1 : end] = [*new, *table]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")


def team_config(state_dir: Path) -> None:
    """In the PostgreSQL lanes, the state dir's config.toml names the test's database
    (`[storage] url`, the one $MEMDIR_DATABASE_URL names), as a team's user configures it."""
    if TEAM and os.environ.get(URL_ENV):
        set_storage(state_dir, url=os.environ[URL_ENV])


def write_config(state_dir: Path, text: str) -> None:
    """Write the state dir's config.toml as `text`, keeping in the PostgreSQL lanes the
    [storage] keys it had (the test's database; a scope of its own)."""
    kept = storage_keys(state_dir) if TEAM else {}
    (state_dir / "config.toml").write_text(text, encoding="utf-8")
    if kept:
        set_storage(state_dir, **kept)
