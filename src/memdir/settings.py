"""config.toml -> frozen Settings (S). Errors name the file, the line and the key."""

from __future__ import annotations

import os
import re

from .errors import ConfigError
from .names import full_match
from .numbers import MAX_BYTES, MAX_CHARS, MAX_DAYS, MAX_HOURS, MAX_TIMEOUT_MS
from .records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .storage.embedders import Choice

DURATION_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd])\s*")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PREFIX_RE = re.compile(r"[A-Z][A-Z0-9_]{0,31}")


class Settings(Record):
    enabled: bool = True
    path: str | None = None
    max_inject_chars: int = 4000
    max_entry_bytes: int = 16384
    task_retention: float = 720 * 3600.0  # seconds
    hot_cap_chars: int = 5250
    marker_prefix: str = "MEMDIR"
    busy_timeout_ms: int = 10_000
    # [boot] (E3): what a session starts with, in order; `main_only` parts are left out of
    # subagent and group sessions.
    boot_files: tuple[str, ...] = (
        "HOT.md",
        "SOUL.md",
        "USER.md",
        "daily:today",
        "daily:yesterday",
        "MEMORY.md",
    )
    boot_main_only: tuple[str, ...] = ("MEMORY.md",)
    # [heartbeat] (B2): hours between checks, by check name; unlisted checks use "default".
    heartbeat_hours: tuple[tuple[str, float], ...] = (
        ("email", 4.0),
        ("calendar", 6.0),
        ("hn", 8.0),
        ("twitter", 2.0),
        ("weather", 12.0),
        ("default", 4.0),
    )
    # [distill] (D1): how much `memdir distill` gathers at most.
    distill_max_chars: int = 8000
    # [search] (Q2, Q3): "auto" is hybrid when the embeddings extra is installed, else
    # lexical. Hybrid ranks by lexical_weight x bm25/best + semantic_weight x the calibrated
    # semantic score; lexical and hybrid add neighbour_weight x the better neighbour's score
    # and group_weight x the group's share (search/context.py). The defaults sit in the flat
    # optimum on the LoCoMo dev split (semantic 0.5-0.7, neighbour 0.3, group 0.4-0.5).
    # rrf_k orders lexical hits of equal share from different lists (facts, files,
    # procedures) by reciprocal rank. embed_on_write: "always", a small write embeds what it
    # wrote, loading the model in a CLI call if need be (~0.35 s on a ~30 ms write), so a
    # search finds it by meaning at once; "loaded", only where the model is loaded already
    # (the server; else `memdir reindex` or the server embeds it later).
    search_mode: str = "auto"
    search_min_score: float = 0.5
    search_lexical_weight: float = 1.0
    search_semantic_weight: float = 0.5
    search_neighbour_weight: float = 0.3
    search_group_weight: float = 0.5
    search_rrf_k: int = 60
    search_embed_on_write: str = "always"
    # seconds the warm worker (vector_worker.py) stays up with no request; 0: no worker,
    # each process that searches by meaning loads the model itself
    search_worker_idle: float = 600.0
    # [embeddings] (Q2): the model of semantic search. "bundled" is MiniLM (offline, the
    # embeddings extra); "sentence-transformers" and "fastembed" load `model` by name, and
    # "openai" asks an OpenAI-compatible endpoint at `url` (its key from the environment
    # variable `api_key_env` names, never from this file). storage/embedders.py loads them.
    embeddings_provider: str = "bundled"
    embeddings_model: str = ""
    embeddings_url: str = "http://localhost:11434/v1"
    embeddings_api_key_env: str = ""
    embeddings_dimensions: int = 0
    embeddings_timeout: float = 30.0
    embeddings_path: str = ""
    # [duplicates] (N1): a write that resembles an active item this much is reported:
    # Jaccard of content words, and cosine when the embedding model is loaded.
    duplicate_lexical: float = 0.7
    duplicate_semantic: float = 0.8
    # [hooks] (K2): `memdir hook EVENT`, run by an agent host. start_budget_chars: what
    # SessionStart and SubagentStart inject at most, below Claude Code's cap on a hook's
    # context (10,000 chars: 2.1.332 turns a longer one into a 2 KB preview); timeout_ms:
    # a hook that would run longer gives up, with nothing injected (SessionEnd: at most
    # 1,200 ms, inside the host's 1.5 s). recall_on_prompt: UserPromptSubmit puts the few
    # hits a prompt's words find in front of the model, within prompt_budget_chars and
    # prompt_timeout_ms (past it nothing is injected: the prompt is never held up).
    hooks_start_budget_chars: int = 9000
    hooks_timeout_ms: int = 5000
    # off: the events `memdir hook` answers with nothing and does nothing for (a plugin's
    # hooks cannot be edited away one by one; this turns each off where memory lives).
    hooks_off: tuple[str, ...] = ()
    hooks_recall_on_prompt: bool = False
    hooks_prompt_budget_chars: int = 2000
    hooks_prompt_timeout_ms: int = 400
    # [storage] (W1): a PostgreSQL URL puts the store in that database (team memory) in
    # place of memory.db; `scope` names the store among the database's many (one schema
    # each). MEMDIR_DATABASE_URL and MEMDIR_DATABASE_SCOPE override them (with_env).
    storage_url: str = ""
    storage_scope: str = "default"

    def embedding_choice(self) -> Choice:
        """The [embeddings] table as storage/embedders.py takes it (imported only here:
        the CLI's cold path never needs it)."""
        from .storage.embedders import Choice

        return Choice(
            self.embeddings_provider,
            self.embeddings_model,
            self.embeddings_url,
            self.embeddings_api_key_env,
            self.embeddings_dimensions,
            self.embeddings_timeout,
            self.embeddings_path,
        )


DEFAULTS = Settings()

# key -> (type check, what it must be)
_KEYS: dict[str, tuple[type, str]] = {
    "enabled": (bool, "true or false"),
    "path": (str, "a folder path in quotes"),
    "max_inject_chars": (int, "a whole number of characters from 1 to 10,000,000"),
    "max_entry_bytes": (int, "a whole number of bytes from 1 to 67,108,864 (64 MiB)"),
    "task_retention": (str, 'a duration such as "720h", "30d" or "90m", at most 36500d'),
    "hot_cap_chars": (int, "a whole number of characters from 1,000 to 1,000,000,000"),
    "marker_prefix": (str, 'an upper-case word such as "MEMDIR" or "APIARY"'),
    "busy_timeout_ms": (int, "a whole number of milliseconds from 0 to 600,000"),
}


def load_settings(config_path: str) -> Settings:
    """Read config.toml if it exists; a missing file means the defaults."""
    from .storage import files  # X1: config.toml may not be a link out of the state dir

    real = files.confined(os.path.dirname(config_path), config_path, "the state dir")
    try:
        with open(real, "rb", opener=files.no_follow) as handle:
            raw = handle.read()
    except FileNotFoundError:
        return DEFAULTS
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror}", path=config_path) from exc
    import tomllib  # ~14 ms: only when a config file exists

    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _line_of_decode_error(str(exc))
        raise ConfigError(
            f"malformed TOML: {str(exc).split(' (at ')[0]}; "
            "fix the file, or delete it to use the defaults",
            path=config_path,
            line=line,
        ) from exc
    return _settings_from(data, text, config_path)


TABLES = (
    "memory",
    "boot",
    "heartbeat",
    "distill",
    "search",
    "embeddings",
    "duplicates",
    "hooks",
    "storage",
)
HOOKS_KEYS = {
    "start_budget_chars": ("a whole number of characters from 1,000 to 1,000,000", 1000, 1_000_000),
    "timeout_ms": ("a whole number of milliseconds from 100 to 600,000", 100, MAX_TIMEOUT_MS),
    "prompt_budget_chars": ("a whole number of characters from 200 to 10,000", 200, 10_000),
    "prompt_timeout_ms": ("a whole number of milliseconds from 50 to 600,000", 50, MAX_TIMEOUT_MS),
}
HOOKS_SWITCHES = ("recall_on_prompt",)  # true or false
SEARCH_KEYS = {
    "mode": "one of auto, lexical, semantic, hybrid",
    "min_score": "a number from -10 to 10 (the calibrated semantic score)",
    "lexical_weight": "a number from 0 to 1000",
    "semantic_weight": "a number from 0 to 1000",
    "neighbour_weight": "a number from 0 to 1000",
    "group_weight": "a number from 0 to 1000",
    "rrf_k": "a whole number from 1 to 1,000,000",
    "embed_on_write": "loaded or always",
    "worker_idle": "seconds from 0 (no worker) to 86400",
}
CHECK_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def _settings_from(data: dict[str, Any], text: str, path: str) -> Settings:
    for table, value in data.items():
        if table not in TABLES:
            raise ConfigError(
                f"unknown setting {table!r}: the tables are [{'], ['.join(TABLES)}]",
                path=path,
                line=_line_of_table(text, table),
                key=table,
            )
        if not isinstance(value, dict):
            raise ConfigError(
                f"'{table}' must be a table ([{table}])",
                path=path,
                line=_line_of_table(text, table),
                key=table,
            )
    values = _memory_values(data.get("memory", {}), text, path)
    values.update(_boot_values(data.get("boot", {}), text, path))
    values.update(_heartbeat_values(data.get("heartbeat", {}), text, path))
    distill = data.get("distill", {})
    for key, value in distill.items():
        if key != "max_chars" or not _positive_int(value) or not 500 <= value <= MAX_CHARS:
            raise _bad(
                f"distill.{key}",
                value,
                "max_chars, a whole number of characters from 500 to 10,000,000",
                text,
                path,
            )
        values["distill_max_chars"] = value
    values.update(_search_values(data.get("search", {}), text, path))
    values.update(_embeddings_values(data.get("embeddings", {}), text, path))
    for key, value in data.get("duplicates", {}).items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key not in ("lexical", "semantic") or not (number and 0 < value <= 1):
            raise _bad(
                f"duplicates.{key}",
                value,
                "lexical or semantic, a similarity above 0 and at most 1",
                text,
                path,
            )
        values["duplicate_" + key] = float(value)
    values.update(_hooks_values(data.get("hooks", {}), text, path))
    values.update(_storage_values(data.get("storage", {}), text, path))
    return DEFAULTS._replace(**values)


DATABASE_URL_ENV = "MEMDIR_DATABASE_URL"
DATABASE_SCOPE_ENV = "MEMDIR_DATABASE_SCOPE"
STORAGE_KEYS = {
    "url": 'a PostgreSQL URL in quotes, e.g. "postgresql://memdir@db.internal/team" '
    "(the password from PGPASSWORD, ~/.pgpass or a service file, never this file)",
    "scope": "a name of lower-case letters, digits and _ (at most 40), starting with a letter",
}


def _storage_values(table: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    from .storage.postgres.url import SCOPE_RE, is_database_url

    values: dict[str, Any] = {}
    for key, value in table.items():
        ok = isinstance(value, str) and (
            (key == "url" and (value == "" or is_database_url(value)))
            or (key == "scope" and full_match(SCOPE_RE, value))
        )
        if key not in STORAGE_KEYS or not ok:
            expected = STORAGE_KEYS.get(key, "url or scope")
            shown = "a value" if key == "url" else repr(value)  # a URL may hold a password
            raise ConfigError(
                f"storage.{key} = {shown} is not valid: it must be {expected}"
                if key in STORAGE_KEYS
                else f"unknown key storage.{key}; known keys: storage.url, storage.scope",
                path=path,
                line=_line_of_key(text, key),
                key=f"storage.{key}",
            )
        values["storage_" + key] = value
    return values


def with_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    """The settings with MEMDIR_DATABASE_URL / MEMDIR_DATABASE_SCOPE applied (W1)."""
    from .errors import ValidationError
    from .storage.postgres.url import SCOPE_RE, is_database_url

    url, scope = env.get(DATABASE_URL_ENV), env.get(DATABASE_SCOPE_ENV)
    if not url and not scope:
        return settings
    changed: dict[str, Any] = {}
    if url:
        if not is_database_url(url):
            raise ValidationError(
                f"{DATABASE_URL_ENV} must be a PostgreSQL URL (postgresql://...): "
                "set it to the team database's URL, or unset it to use memory.db"
            )
        changed["storage_url"] = url
    if scope:
        if not full_match(SCOPE_RE, scope):
            raise ValidationError(
                f"{DATABASE_SCOPE_ENV}={scope!r} is not a scope name: {STORAGE_KEYS['scope']}"
            )
        changed["storage_scope"] = scope
    return settings._replace(**changed)


# the events `memdir hook` answers (hooks.EVENTS, checked by a test): [hooks] off names them
HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "SubagentStart",
    "PreToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)


def _hooks_values(hooks: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    keys = ", ".join([*HOOKS_KEYS, *HOOKS_SWITCHES, "off"])
    for key, value in hooks.items():
        if key == "off":
            if not isinstance(value, list) or not all(v in HOOK_EVENTS for v in value):
                events = f"a list of hook events, of {', '.join(HOOK_EVENTS)}"
                raise _bad("hooks.off", value, events, text, path)
            values["hooks_off"] = tuple(value)
            continue
        if key in HOOKS_SWITCHES:
            if not isinstance(value, bool):
                raise _bad(f"hooks.{key}", value, "true or false", text, path)
            values["hooks_" + key] = value
            continue
        expected, low, high = HOOKS_KEYS.get(key, (None, 0, 0))
        if expected is None or not _positive_int(value) or not low <= value <= high:
            raise _bad(f"hooks.{key}", value, expected or f"one of the keys {keys}", text, path)
        values["hooks_" + key] = value
    return values


def _search_values(search: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in search.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok = {
            "mode": value in ("auto", "lexical", "semantic", "hybrid"),
            "min_score": number and -10 <= value <= 10,
            "lexical_weight": number and 0 <= value <= 1000,
            "semantic_weight": number and 0 <= value <= 1000,
            "neighbour_weight": number and 0 <= value <= 1000,
            "group_weight": number and 0 <= value <= 1000,
            "rrf_k": _positive_int(value) and value <= 1_000_000,
            "embed_on_write": value in ("loaded", "always"),
            "worker_idle": number and 0 <= value <= 86_400,
        }.get(key)
        if not ok:
            expected = SEARCH_KEYS.get(key, f"one of the keys {', '.join(SEARCH_KEYS)}")
            raise _bad(f"search.{key}", value, expected, text, path)
        values["search_" + key] = value
    return values


EMBEDDINGS_PROVIDERS = ("bundled", "sentence-transformers", "fastembed", "openai")
EMBEDDINGS_KEYS = {
    "provider": f"one of {', '.join(EMBEDDINGS_PROVIDERS)}",
    "model": 'the model\'s name in quotes, e.g. "BAAI/bge-small-en-v1.5"',
    "url": 'the endpoint\'s base URL, e.g. "http://localhost:11434/v1"',
    "api_key_env": 'the name of an environment variable, e.g. "OPENAI_API_KEY"',
    "dimensions": "a whole number from 1 to 65,536 (the endpoint is asked for that size)",
    "timeout": "seconds from 1 to 600",
    "path": "a folder holding a fastembed model's files, in quotes",
}
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
URL_RE = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")


def _embeddings_values(table: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    """Q2: [embeddings]. A key is never a value here: `api_key` is refused, naming
    api_key_env, so that no secret sits in a file a team may commit."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok = {
            "provider": value in EMBEDDINGS_PROVIDERS,
            "model": isinstance(value, str) and 0 < len(value) <= 300 and value.strip() == value,
            "url": isinstance(value, str) and full_match(URL_RE, value),
            "api_key_env": isinstance(value, str) and full_match(ENV_NAME_RE, value),
            "dimensions": _positive_int(value) and value <= 65_536,
            "timeout": number and 1 <= value <= 600,
            "path": isinstance(value, str) and 0 < len(value) <= 4096,
        }.get(key)
        if not ok:
            expected = EMBEDDINGS_KEYS.get(key)
            if expected is None and key in ("api_key", "key", "token"):
                expected = (
                    "absent: the key is never stored; put it in an environment variable "
                    "and name that with api_key_env"
                )
            raise _bad(
                f"embeddings.{key}",
                "..." if expected and "never stored" in expected else value,
                expected or f"one of the keys {', '.join(EMBEDDINGS_KEYS)}",
                text,
                path,
            )
        if key == "path":  # relative to the state dir, as memory.path is
            value = os.path.normpath(os.path.join(os.path.dirname(path), os.path.expanduser(value)))
        values["embeddings_" + key] = float(value) if key == "timeout" else value
    provider = values.get("embeddings_provider", "bundled")
    model = values.get("embeddings_model")
    if provider == "openai" and model is None:
        raise _bad(
            "embeddings.provider",
            provider,
            'given with a model: the endpoint\'s model name, e.g. model = "nomic-embed-text"',
            text,
            path,
        )
    from .storage.embeddings import DEFAULT_MODEL as BUNDLED_ID
    from .storage.embeddings import SHIPPED_MODEL

    # the bundled model's id, or its id from before its products were integer ones
    if provider == "bundled" and model not in (None, BUNDLED_ID, SHIPPED_MODEL):
        raise _bad(
            "embeddings.model",
            model,
            f'left out with provider = "bundled" (its one model is {BUNDLED_ID}); '
            'set provider = "sentence-transformers" or "fastembed" to pick a model',
            text,
            path,
        )
    return values


def _boot_values(boot: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in boot.items():
        if key not in ("files", "main_only"):
            raise _bad(f"boot.{key}", value, "files or main_only", text, path)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise _bad(
                f"boot.{key}",
                value,
                'a list of file names, e.g. ["HOT.md", "SOUL.md", '
                '"daily:today", "daily:yesterday", "MEMORY.md"]',
                text,
                path,
            )
        values["boot_" + key] = tuple(value)
    return values


def _heartbeat_values(heartbeat: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    if not heartbeat:
        return {}
    hours = dict(DEFAULTS.heartbeat_hours)
    for check, value in heartbeat.items():
        number_ok = isinstance(value, int | float) and not isinstance(value, bool)
        number_ok = number_ok and 0 < value <= MAX_HOURS  # NaN fails both comparisons
        if not full_match(CHECK_RE, check) or not number_ok:
            raise _bad(
                f"heartbeat.{check}",
                value,
                "a number of hours above 0 and at most 87,600 (ten years), under a lowercase "
                "check name",
                text,
                path,
            )
        hours[check] = float(value)
    return {"heartbeat_hours": tuple(hours.items())}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _bad(key: str, value: Any, expected: str, text: str, path: str) -> ConfigError:
    return ConfigError(
        f"{key} = {value!r} is not valid: it must be {expected}",
        path=path,
        line=_line_of_key(text, key.split(".", 1)[1]),
        key=key,
    )


def _line_of_table(text: str, table: str) -> int | None:
    match = re.search(
        rf"^[ \t]*\[{re.escape(table)}\]|^[ \t]*{re.escape(table)}\b", text, re.MULTILINE
    )
    return None if match is None else text.count("\n", 0, match.start()) + 1


def _memory_values(memory: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in memory.items():
        if key not in _KEYS:
            known = ", ".join(f"memory.{k}" for k in _KEYS)
            raise ConfigError(
                f"unknown key memory.{key}; known keys: {known}",
                path=path,
                line=_line_of_key(text, key),
                key=f"memory.{key}",
            )
        values[key] = _check(key, value, text, path)
    return values


# The range of each whole-number key (X3: every number is range-checked on the way in).
_INT_RANGES = {
    "max_inject_chars": (1, MAX_CHARS),
    "max_entry_bytes": (1, MAX_BYTES),
    "hot_cap_chars": (1000, 1_000_000_000),
    "busy_timeout_ms": (0, MAX_TIMEOUT_MS),
}


def _check(key: str, value: Any, text: str, path: str) -> Any:
    kind, expected = _KEYS[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if ok and key == "task_retention":
        seconds = parse_duration(value)
        ok = seconds is not None and seconds <= MAX_DAYS * 86400
        value = seconds
    elif ok and key == "marker_prefix":
        ok = full_match(PREFIX_RE, value)
    elif ok and kind is int:
        low, high = _INT_RANGES[key]
        ok = low <= value <= high
    if not ok:
        raise ConfigError(
            f"memory.{key} = {value!r} is not valid: it must be {expected}",
            path=path,
            line=_line_of_key(text, key),
            key=f"memory.{key}",
        )
    return value


def parse_duration(text: str) -> float | None:
    match = DURATION_RE.fullmatch(text)
    if not match:
        return None
    return float(match.group(1)) * DURATION_UNITS[match.group(2)]


def _line_of_key(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^[ \t]*([a-z]+\.)?{re.escape(key)}[ \t]*=", re.MULTILINE)
    match = pattern.search(text)
    return None if match is None else text.count("\n", 0, match.start()) + 1


def _line_of_decode_error(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


def config_template() -> str:
    """What `memdir init` writes: every key, commented out, at its default."""
    return (
        "# memdir settings. Every key is optional; the values shown are the defaults.\n"
        "[memory]\n"
        "# enabled = true            # false: nothing is persisted or injected\n"
        '# path = "memory"           # relocate the memory root (relative to this folder), e.g.\n'
        '#                           # "../team-memory"; a root holding the project, your home\n'
        "#                           # or / is refused unless MEMDIR_ALLOW_ROOT names it\n"
        "# max_inject_chars = 4000   # budget of the recall sections\n"
        "# max_entry_bytes = 16384   # cap on one fact, entry or procedure\n"
        '# task_retention = "720h"   # prune task notes this long after the task ends\n'
        "# hot_cap_chars = 5250      # hard cap of HOT.md\n"
        '# marker_prefix = "MEMDIR"  # <PREFIX>_MEMORIZE_BEGIN / _END\n'
        "# busy_timeout_ms = 10000   # how long a write waits for another process's lock\n"
        "\n[boot]\n"
        "# what `memdir boot` prints, in order; main_only parts are left out for subagents\n"
        '# files = ["HOT.md", "SOUL.md", "USER.md", "daily:today", "daily:yesterday", '
        '"MEMORY.md"]\n'
        '# main_only = ["MEMORY.md"]\n'
        "\n[heartbeat]\n"
        "# hours between periodic checks; any other check name works too\n"
        "# email = 4\n# calendar = 6\n# hn = 8\n# twitter = 2\n# weather = 12\n# default = 4\n"
        "\n[distill]\n"
        "# max_chars = 8000          # how much `memdir distill` gathers at most\n"
        "\n[search]\n"
        '# mode = "auto"             # auto (hybrid with the embeddings extra), lexical, ...\n'
        "# min_score = 0.5           # semantic hits below this score are dropped (0: unrelated)\n"
        "# lexical_weight = 1.0      # hybrid: weight x bm25/best + weight x semantic score\n"
        "# semantic_weight = 0.5\n"
        "# neighbour_weight = 0.3    # + weight x the better score of the items beside a hit\n"
        "# group_weight = 0.5        # + weight x its session's or file's share as one text\n"
        "# rrf_k = 60                # orders equal lexical scores by reciprocal rank\n"
        '# embed_on_write = "always" # loaded: a CLI write leaves embedding to reindex/server\n'
        "# worker_idle = 600         # s the warm embedding worker stays up idle; 0: none\n"
        "\n[embeddings]\n"
        "# the model of semantic search; a change re-embeds with `memdir reindex`\n"
        '# provider = "bundled"      # MiniLM, offline; or sentence-transformers, fastembed,\n'
        "#                           # openai (any OpenAI-compatible endpoint: Ollama, vLLM...)\n"
        '# model = ""                # the provider\'s model, e.g. "BAAI/bge-small-en-v1.5"\n'
        '# url = "http://localhost:11434/v1"  # openai: the endpoint\'s base URL\n'
        '# api_key_env = ""          # openai: the environment variable holding its key\n'
        "# dimensions = 0            # openai: ask for vectors of this size (0: the model's)\n"
        "# timeout = 30              # openai: seconds one request may take\n"
        '# path = ""                 # fastembed: a folder with the model\'s files (offline)\n'
        "\n[duplicates]\n"
        "# a write this similar to an active fact, entry or procedure is reported\n"
        "# lexical = 0.7             # Jaccard of content words\n"
        "# semantic = 0.8            # cosine, when the embedding model is loaded\n"
        "\n[hooks]\n"
        "# `memdir hook EVENT`, run by an agent host (Claude Code) at its session events\n"
        "# start_budget_chars = 9000 # what a session or subagent start injects at most\n"
        "# timeout_ms = 5000         # a hook running longer gives up (SessionEnd: 1200 at most)\n"
        '# off = []                  # events to do nothing at, e.g. ["SubagentStart", "Stop"]\n'
        "# recall_on_prompt = false  # true: each prompt gets the few memory hits its words find\n"
        "# prompt_budget_chars = 2000 # what a prompt's recall injects at most\n"
        "# prompt_timeout_ms = 400   # past this a prompt's recall gives up, injecting nothing\n"
        "\n[storage]\n"
        "# team memory: the store in a PostgreSQL database in place of memory.db (W1);\n"
        "# MEMDIR_DATABASE_URL and MEMDIR_DATABASE_SCOPE override these two\n"
        '# url = ""                  # e.g. "postgresql://memdir@db.internal/team" (PGPASSWORD)\n'
        '# scope = "default"         # the store among the database\'s many (one schema each)\n'
    )
