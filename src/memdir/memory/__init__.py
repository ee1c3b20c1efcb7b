"""The Memory facade: the one library API that the CLI, the MCP server and the agent tools
call (see facade.py for how its parts compose)."""

from .facade import InitResult, Memory, ingest_output, init_project, open_memory

__all__ = ["InitResult", "Memory", "ingest_output", "init_project", "open_memory"]
