"""The allow-list (settings.MCP_SERVERS, dataplatform/settings/tools.py) and the errors of tool calls.

A project, a conversation or a request names servers; only names on the list are ever started or
called, with the command or URL the settings give them.
"""

from django.conf import settings
from django.utils.translation import gettext

from dataplatform.errors import Refused, Unavailable


class ToolUnavailable(Unavailable):
    """The server could not be started or reached, or broke off (its process exited, the connection was
    refused, an HTTP error). The message names the server, never its env values or headers."""


class ToolTimedOut(Unavailable):
    """The call (or the listing) took longer than its timeout; a stdio server's process was stopped."""


def server_names() -> list[str]:
    """The allow-listed servers' names, sorted."""
    return sorted(settings.MCP_SERVERS)


def _allowed() -> str:
    names = server_names()
    return ", ".join(names) if names else gettext("none (the admin has allow-listed no MCP server: MCP_SERVERS)")


def check_server_names(names, *, field: str = "mcp_servers") -> list[str]:
    """`names` (each once, in their order) if every one is on the allow-list; Refused naming the first
    one that is not, with the allowed names."""
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise Refused(gettext("MCP server names must be a list of strings."), field=field)
    checked = list(dict.fromkeys(names))
    for name in checked:
        if name not in settings.MCP_SERVERS:
            raise Refused(gettext("%(name)s is not an allowed MCP server; allowed: %(allowed)s.")
                          % {"name": repr(name[:100]), "allowed": _allowed()}, field=field)
    return checked


def server_config(name: str, *, field: str = "server") -> dict:
    """The settings entry for `name`; Refused when it is not on the allow-list."""
    return settings.MCP_SERVERS[check_server_names([name], field=field)[0]]


def server_description(name: str) -> str:
    return server_config(name).get("description", "")
