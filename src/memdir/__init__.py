"""memdir: memory that outlasts the session for AI agents."""

from .errors import (
    ConfigError,
    ConflictError,
    DisabledError,
    MemdirError,
    MissingExtraError,
    NotFoundError,
    QueryError,
    ReadOnlyError,
    StorageError,
    ValidationError,
)
from .memory import Memory, init_project, open_memory
from .models import CATEGORIES, Fact, Hit, HotWrite, Procedure, Session
from .settings import Settings

# The one version source: hatch reads it for the package metadata (pyproject.toml,
# [tool.hatch.version]); `memdir --version` prints it.
__version__ = "0.1.0"

__all__ = [
    "CATEGORIES",
    "ConfigError",
    "ConflictError",
    "DisabledError",
    "Fact",
    "Hit",
    "HotWrite",
    "MemdirError",
    "Memory",
    "MissingExtraError",
    "NotFoundError",
    "Procedure",
    "QueryError",
    "ReadOnlyError",
    "Session",
    "Settings",
    "StorageError",
    "ValidationError",
    "init_project",
    "open_memory",
]
