"""Tool calls run through MCP servers (the official `mcp` SDK), for sync views and Celery tasks.

    servers.py   the allow-list (settings.MCP_SERVERS), ToolUnavailable and ToolTimedOut
    schema.py    Tool (and its OpenAI function schema), the arguments' check against its input schema
    client.py    list_tools, call_tool and ToolResult: the SDK's async client run in the calling thread

docs/tools.md says how an admin allow-lists servers and what annotators see when a call fails.
"""

from .client import LIST_CACHE_SECONDS, ToolResult, call_tool, clear_cache, find_tool, list_tools
from .schema import Tool, parse_arguments, validate_arguments
from .servers import ToolTimedOut, ToolUnavailable, check_server_names, server_description, server_names

__all__ = [
    "LIST_CACHE_SECONDS", "Tool", "ToolResult", "ToolTimedOut", "ToolUnavailable", "call_tool",
    "check_server_names", "clear_cache", "find_tool", "list_tools", "parse_arguments", "server_description",
    "server_names", "validate_arguments",
]
