"""Timestamps: stored as UTC ISO 8601 to the second (`2026-06-10T14:02:11Z`), sortable as
text. datetime is already loaded by sqlite3, so parsing costs no import (calendar would
cost ~3 ms on every CLI start)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

Clock = Callable[[], float]
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def iso(moment: float) -> str:
    return time.strftime(ISO_FORMAT, time.gmtime(moment))


def epoch(stamp: str) -> float:
    """The unix time of a stored timestamp."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
