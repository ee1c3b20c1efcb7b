"""How to install an extra from where memdir was installed (Q2).

"pip install 'memdir[embeddings]'" is wrong for most installs: a pipx or `uv tool` install
has its own venv that pip outside it does not reach, a venv made by uv has no pip at all,
and an editable checkout would get the published package in place of itself. So the
command is derived from this interpreter: sys.prefix (a pipx venv holds
pipx_metadata.json, a uv tool venv uv-receipt.toml, a uv venv says `uv =` in pyvenv.cfg)
and the distribution's direct_url.json (PEP 610: an editable checkout, a local folder, a
git URL). Only worked out when a message needs it: reading the metadata costs ~10 ms.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

DIST = "memdir"


def install_command(extra: str) -> str:
    """The shell command that adds `extra` to this memdir, wherever it was installed."""
    return command_for(extra, sys.prefix, sys.executable or "python3", _direct_url(), _has_pip())


def command_for(
    extra: str, prefix: str, executable: str, direct_url: str | None, has_pip: bool
) -> str:
    """install_command for an interpreter at `prefix` whose memdir distribution records
    `direct_url` (the text of its direct_url.json, None without one)."""
    source = _source(direct_url)
    if os.path.exists(os.path.join(prefix, "pipx_metadata.json")):
        return _tool("pipx install --force", source, extra)
    if os.path.exists(os.path.join(prefix, "uv-receipt.toml")):
        return _tool("uv tool install --force", source, extra)
    python = shlex.quote(executable)
    if _made_by_uv(prefix) and not has_pip:
        pip = f"uv pip install --python {python}"
    else:
        pip = f"{python} -m pip install"
    if source is not None and source[0] == "editable":
        return f"cd {shlex.quote(source[1])} && {pip} -e {shlex.quote(f'.[{extra}]')}"
    return f"{pip} {shlex.quote(_requirement(source, extra))}"


def _direct_url() -> str | None:
    from importlib import metadata

    try:
        return metadata.distribution(DIST).read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None


def _source(text: str | None) -> tuple[str, str] | None:
    """("editable", folder), ("url", a PEP 508 URL) or None (an index, or unknown)."""
    try:
        direct = json.loads(text or "null")
    except ValueError:
        return None
    if not isinstance(direct, dict) or not isinstance(direct.get("url"), str):
        return None
    url: str = direct["url"]
    dir_info = direct.get("dir_info")
    if isinstance(dir_info, dict) and dir_info.get("editable") and url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return ("editable", unquote(urlparse(url).path))
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("requested_revision") or vcs.get("commit_id")
        return ("url", f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else ""))
    return ("url", url)


def _requirement(source: tuple[str, str] | None, extra: str) -> str:
    if source is None:
        return f"{DIST}[{extra}]"
    return f"{DIST}[{extra}] @ {source[1]}"


def _tool(install: str, source: tuple[str, str] | None, extra: str) -> str:
    """pipx and uv tool reinstall the app with the extra (their venv is theirs to manage)."""
    if source is not None and source[0] == "editable":
        return f"{install} -e {shlex.quote(f'{source[1]}[{extra}]')}"
    return f"{install} {shlex.quote(_requirement(source, extra))}"


def _made_by_uv(prefix: str) -> bool:
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8") as handle:
            return any(line.split("=")[0].strip() == "uv" for line in handle)
    except OSError:
        return False


def _has_pip() -> bool:
    from importlib.util import find_spec

    return find_spec("pip") is not None
