"""MCP servers the platform may run tool calls through (dataplatform/tools/, docs/tools.md).

`MCP_SERVERS` is the allow-list: a JSON object from the env var of the same name, mapping a server name
to how it is reached, either a command started over stdio or a streamable-HTTP URL:

    {"time": {"command": "/app/.venv/bin/mcp-server-time", "description": "clock and time zones"},
     "git":  {"command": "mcp-server-git", "args": ["--repository", "/srv/repo"], "env": {"GIT_PAGER": "cat"}},
     "docs": {"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer ..."}}}

Projects and requests name servers, never a command or a URL (like ATD_TEACHER_ENDPOINTS). Every entry is
checked at start-up; a bad one stops the start with the variable's name and the server's name. The
messages never repeat a value: headers and env values may hold tokens.

The default is `{}`, no server: which tools exist is an admin's decision, not a side effect of which
executables happen to be installed (README "Settings" has an example with the time server).
"""

import json
import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .env import env_float, env_int
from .logs import LOGGING

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_STDIO_KEYS = {"command", "args", "env", "cwd"}
_HTTP_KEYS = {"url", "headers"}
_COMMON_KEYS = {"description"}


def _string_map(where: str, value) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ImproperlyConfigured(f"{where}: must be an object of strings to strings.")
    return dict(value)


def check_mcp_server(variable: str, name, entry) -> dict:
    """One allow-list entry, checked (`variable` names the setting in the messages); returns a copy."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ImproperlyConfigured(f"{variable}: server name {str(name)[:70]!r} must be 1-64 letters, digits, "
                                   "'_', '.' or '-', starting with a letter or digit.")
    where = f"{variable}[{name!r}]"
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"{where}: must be an object with \"command\" (stdio) or \"url\" (HTTP).")
    unknown = sorted(set(entry) - _STDIO_KEYS - _HTTP_KEYS - _COMMON_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown keys {unknown}; allowed: "
                                   f"{sorted(_STDIO_KEYS | _HTTP_KEYS | _COMMON_KEYS)}.")
    if ("command" in entry) == ("url" in entry):
        raise ImproperlyConfigured(f"{where}: give exactly one of \"command\" (a stdio server) or \"url\" "
                                   "(a streamable-HTTP server).")
    kind, other = (_STDIO_KEYS, _HTTP_KEYS) if "command" in entry else (_HTTP_KEYS, _STDIO_KEYS)
    if misplaced := sorted(set(entry) & other):
        raise ImproperlyConfigured(f"{where}: {misplaced} do not apply to "
                                   f"{'a stdio' if kind is _STDIO_KEYS else 'an HTTP'} server.")
    checked: dict = {}
    if "description" in entry:
        if not isinstance(entry["description"], str):
            raise ImproperlyConfigured(f"{where}.description: must be a string.")
        checked["description"] = entry["description"]
    if "command" in entry:
        if not isinstance(entry["command"], str) or not entry["command"].strip():
            raise ImproperlyConfigured(f"{where}.command: must be a non-empty string (the executable).")
        checked["command"] = entry["command"]
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ImproperlyConfigured(f"{where}.args: must be a list of strings.")
        checked["args"] = list(args)
        checked["env"] = _string_map(f"{where}.env", entry.get("env", {}))
        if "cwd" in entry:
            if not isinstance(entry["cwd"], str) or not entry["cwd"]:
                raise ImproperlyConfigured(f"{where}.cwd: must be a non-empty string (a folder).")
            checked["cwd"] = entry["cwd"]
        return checked
    url = entry["url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{where}.url: must be an http:// or https:// URL with a host.")
    checked["url"] = url
    checked["headers"] = _string_map(f"{where}.headers", entry.get("headers", {}))
    return checked


def check_mcp_servers(variable: str, value) -> dict[str, dict]:
    """The whole allow-list, checked entry by entry."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{variable}: must be a JSON object mapping server names to servers.")
    return {name: check_mcp_server(variable, name, entry) for name, entry in value.items()}


def env_mcp_servers(name: str = "MCP_SERVERS") -> dict[str, dict]:
    """The allow-list from the env var `name` (JSON); unset or empty means no server."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        # The position and JSON's complaint only: the text itself may hold a token.
        raise ImproperlyConfigured(f"{name}: not JSON (line {error.lineno}, column {error.colno}: "
                                   f"{error.msg}).") from None
    return check_mcp_servers(name, value)


def env_seconds(name: str, default: float) -> float:
    """A number of seconds, more than 0."""
    value = env_float(name, default)
    if value <= 0:
        raise ImproperlyConfigured(f"{name}: {value!r} must be more than 0 seconds.")
    return value


MCP_SERVERS = env_mcp_servers()
# A tool call's whole time, server start-up included; listing a server's tools (once a minute at most).
MCP_CALL_TIMEOUT_SECONDS = env_seconds("MCP_CALL_TIMEOUT_SECONDS", 20.0)
MCP_LIST_TIMEOUT_SECONDS = env_seconds("MCP_LIST_TIMEOUT_SECONDS", 20.0)
# What a tool call may carry and bring back, bounded by what it becomes: arguments are stored, sent and put
# in the next prompt, so an edited call's JSON text is refused past TOOL_ARGUMENTS_MAX_BYTES; a result is
# kept up to TOOL_RESULT_MAX_CHARS characters and cut there with a marker, as agent harnesses cut long
# observations (the model reads the marker, and the prompt's token budget holds the rest).
TOOL_ARGUMENTS_MAX_BYTES = env_int("TOOL_ARGUMENTS_MAX_BYTES", 100_000)
TOOL_RESULT_MAX_CHARS = env_int("TOOL_RESULT_MAX_CHARS", 50_000)

# Never the arguments, env values or headers in the log, even with LOG_LEVEL=DEBUG: the SDK logs every
# message it sends at DEBUG (a call's arguments), and its HTTP client every request's URL at INFO (a
# configured URL may carry a token).
LOGGING["loggers"].setdefault("mcp", {"level": "INFO"})
LOGGING["loggers"].setdefault("httpx2", {"level": "WARNING"})
LOGGING["loggers"].setdefault("httpcore2", {"level": "WARNING"})
