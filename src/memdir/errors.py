"""The one exception tree of memdir. Front ends turn these into messages and exit codes.

MemdirError                 exit 1: anything the user can fix; str() is one line
├── ConfigError             config.toml is malformed (path, line, key)
├── ValidationError         a bad name, category, date, size or argument
│   ├── SecretError         a field of the write holds a secret (X2)
│   └── UsageError          a command line the CLI cannot parse
├── QueryError              a search query FTS5 cannot run (carries a hint)
├── NotFoundError           no fact, procedure, session or line with that id/name
├── ReadOnlyError           a subagent session tried to write (U2)
├── DisabledError           memory.enabled = false and a write was asked for
├── ConflictError           the write lost a race or contradicts the stored state
├── StorageError            the disk or the database failed (locked, full, corrupt)
├── MissingExtraError       an optional extra is not installed
└── EmbeddingError          the configured embedding model cannot load or does not answer
"""

from __future__ import annotations


class MemdirError(Exception):
    """Base class: a message meant for the user, on one line."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        from .secret_scan import redact  # X2: an error quoting what it refused masks a secret

        super().__init__(redact(" ".join(message.split("\n"))))

    @property
    def message(self) -> str:
        return str(self)


class ConfigError(MemdirError):
    def __init__(
        self, message: str, *, path: str, line: int | None = None, key: str | None = None
    ) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.key = path, line, key


class ValidationError(MemdirError):
    pass


class SecretError(ValidationError):
    """X2: a field of the write holds a secret; nothing was written. `kind` names the kind
    of secret ("a GitHub token"), `field` the field ("" for the text), `line` its line."""

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.field, self.line = kind, field, line


class UsageError(ValidationError):
    """argparse's complaint, raised rather than printed so every front-end error is
    rendered in one place (as JSON with --json)."""


class QueryError(MemdirError):
    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(f"{message} ({hint})")
        self.hint = hint


class NotFoundError(MemdirError):
    """What was missing, when the raiser knows: `kind` ("fact", "entry", "procedure",
    "session", "task", "daily", "hot line", "hot section", "file", "state dir"...), `key`
    (its id, name or date) and `path` (a file or directory that is not there)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        key: str | int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.key, self.path = kind, key, path


class ReadOnlyError(MemdirError):
    pass


class DisabledError(MemdirError):
    pass


class ConflictError(MemdirError):
    pass


class StorageError(MemdirError):
    pass


class MissingExtraError(MemdirError):
    """`extra`: the optional extra to install ("embeddings"), when the raiser names it."""

    def __init__(self, message: str, *, extra: str | None = None) -> None:
        super().__init__(message)
        self.extra = extra


class EmbeddingError(MemdirError):
    """Q2: the embedding model [embeddings] names could not be loaded, or its endpoint
    failed (unreachable, an HTTP error, an answer that is not vectors)."""
