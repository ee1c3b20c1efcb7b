"""A database URL as memdir shows it, and the scope's schema name. No psycopg here: the
settings and doctor's messages use these without loading a driver."""

from __future__ import annotations

import re

SCHEMES = ("postgresql://", "postgres://")
SCOPE_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
DEFAULT_SCOPE = "default"
_USERINFO_RE = re.compile(r"^(postgres(?:ql)?://)([^@/?#]*)@")
_PASSWORD_PARAM_RE = re.compile(r"(?i)([?&]password=)[^&#]*")


def is_database_url(url: str) -> bool:
    return url.startswith(SCHEMES)


def redact(url: str) -> str:
    """The URL with any password replaced by `***` (in the user part or a parameter)."""

    def userinfo(match: re.Match[str]) -> str:
        user, colon, _ = match.group(2).partition(":")
        return f"{match.group(1)}{user}{':***' if colon else ''}@"

    return _PASSWORD_PARAM_RE.sub(r"\1***", _USERINFO_RE.sub(userinfo, url, count=1))


def schema_of(scope: str) -> str:
    """The PostgreSQL schema that holds a scope's tables."""
    return "memdir_" + scope
