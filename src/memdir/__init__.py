"""memdir: memory that outlasts the session for AI agents.

Every record a public Memory method returns is exported here, with the exception tree,
the Literal aliases and the Embedder protocol (memdir.types). Each is loaded when first
named (PEP 562 __getattr__): `import memdir` costs nothing, so the `memdir` command's
launcher (cli/__init__.py), which lives inside this package, starts without importing the
library it may hand the call to a warm process for.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .daily import DailyWrite
    from .distill import Distillation
    from .errors import (
        ConfigError,
        ConflictError,
        DisabledError,
        MemdirError,
        MissingExtraError,
        NotFoundError,
        QueryError,
        ReadOnlyError,
        SecretError,
        StorageError,
        UsageError,
        ValidationError,
    )
    from .heartbeat import Check as HeartbeatCheck
    from .identity import Boot
    from .memory import (
        InitResult,
        Lines,
        Memory,
        Reindexed,
        TaskFamily,
        init_project,
        open_memory,
    )
    from .models import (
        CATEGORIES,
        Applied,
        Entry,
        Fact,
        Hit,
        HotWrite,
        ImportItem,
        ImportReport,
        Ingested,
        Note,
        Procedure,
        Provenance,
        Pruned,
        Recalled,
        Session,
        Similar,
        Task,
    )
    from .search.explain import Why
    from .settings import Settings
    from .stats import Stats
    from .timeline import Event as TimelineEvent
    from .types import Category, Embedder, FactStatus, Kind, SearchMode, Surface, TaskState

# The one version source: hatch reads it for the package metadata (pyproject.toml,
# [tool.hatch.version]); `memdir --version` prints it.
__version__ = "0.1.0"

# module -> the names it exports here, imported on first use
_EXPORTS = {
    "memdir.errors": (
        "ConfigError ConflictError DisabledError MemdirError MissingExtraError NotFoundError "
        "QueryError ReadOnlyError SecretError StorageError UsageError ValidationError"
    ),
    "memdir.memory": "InitResult Lines Memory Reindexed TaskFamily init_project open_memory",
    "memdir.models": (
        "CATEGORIES Applied Entry Fact Hit HotWrite ImportItem ImportReport Ingested Note "
        "Procedure Provenance Pruned Recalled Session Similar Task"
    ),
    "memdir.settings": "Settings",
    "memdir.daily": "DailyWrite",
    "memdir.distill": "Distillation",
    "memdir.identity": "Boot",
    "memdir.stats": "Stats",
    "memdir.search.explain": "Why",
    "memdir.types": "Category Embedder FactStatus Kind SearchMode Surface TaskState",
}
# name -> (module, attribute)
_LAZY = {name: (module, name) for module, names in _EXPORTS.items() for name in names.split()}
_LAZY["HeartbeatCheck"] = ("memdir.heartbeat", "Check")
_LAZY["TimelineEvent"] = ("memdir.timeline", "Event")


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'memdir' has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


__all__ = [
    "CATEGORIES",
    "Applied",
    "Boot",
    "Category",
    "ConfigError",
    "ConflictError",
    "DailyWrite",
    "DisabledError",
    "Distillation",
    "Embedder",
    "Entry",
    "Fact",
    "FactStatus",
    "HeartbeatCheck",
    "Hit",
    "HotWrite",
    "ImportItem",
    "ImportReport",
    "Ingested",
    "InitResult",
    "Kind",
    "Lines",
    "MemdirError",
    "Memory",
    "MissingExtraError",
    "Note",
    "NotFoundError",
    "Procedure",
    "Provenance",
    "Pruned",
    "QueryError",
    "ReadOnlyError",
    "Recalled",
    "Reindexed",
    "SearchMode",
    "SecretError",
    "Session",
    "Settings",
    "Similar",
    "Stats",
    "StorageError",
    "Surface",
    "Task",
    "TaskFamily",
    "TaskState",
    "TimelineEvent",
    "UsageError",
    "ValidationError",
    "Why",
    "init_project",
    "open_memory",
]
