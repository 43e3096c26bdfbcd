"""Tool calls through MCP servers, for synchronous callers (Django views, Celery tasks).

Each call starts (stdio) or connects to (streamable HTTP) the server, runs, and shuts it down, all inside
the calling thread: the official `mcp` SDK is async, and `anyio.run` gives the call an event loop of its
own (a sync view under uvicorn runs in a worker thread, so this works there too; an async view must not
call these). One deadline covers the whole call, start-up included. On a timeout the SDK closes the
server's stdin; a stdio server still running 0.3 s later gets SIGTERM (its whole process group), then
SIGKILL 0.5 s after that (the SDK alone would wait 2 s, then 2 s more), and the call raises ToolTimedOut
once the process is gone.

A server's tool listing is kept for LIST_CACHE_SECONDS per server (and per configuration), so a call
does not restart a server only to learn its schemas; a call that finds no listing lists on its own
connection.

The log says which server and tool, how long and how it ended; never arguments, env values or headers.
"""

import asyncio
import binascii
import concurrent.futures
import contextvars
import json
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
from django.conf import settings
from django.utils.translation import gettext

from dataplatform.errors import PlatformError, Refused

from .results import bounded_result_text, bounded_structured
from .schema import EMPTY_OBJECT_SCHEMA, Tool, validate_arguments
from .servers import ToolTimedOut, ToolUnavailable, check_server_names, server_config

logger = logging.getLogger(__name__)

LIST_CACHE_SECONDS = 60.0
MAX_LIST_PAGES = 100  # a server whose cursor never ends cannot hang a listing
MAX_ERROR_CHARS = 200
MARKER = "DATAPLATFORM_MCP_CALL"  # in a stdio server's environment: which call started it
STDIN_CLOSE_GRACE_SECONDS = 0.3  # past the deadline, a stdio server has this long to exit on its own
KILL_GRACE_SECONDS = 0.5  # between SIGTERM and SIGKILL


@dataclass(frozen=True)
class ToolResult:
    server: str
    name: str
    text: str  # the text parts, joined; other parts as placeholders such as "[image/png, 1234 bytes]"
    is_error: bool  # the server's isError: the tool's own answer, for the model to read
    structured: dict | None  # structuredContent
    latency_ms: float  # the whole call: start-up, listing if needed, the call, shut-down


_listings: dict[tuple[str, str], tuple[float, tuple[Tool, ...]]] = {}
_listings_lock = threading.Lock()


def _key(server: str, config: dict) -> tuple[str, str]:
    return server, json.dumps(config, sort_keys=True)


def _cached_listing(server: str, config: dict) -> tuple[Tool, ...] | None:
    with _listings_lock:
        entry = _listings.get(_key(server, config))
    if entry is None or time.monotonic() - entry[0] > LIST_CACHE_SECONDS:
        return None
    return entry[1]


def _store_listing(server: str, config: dict, tools: tuple[Tool, ...]) -> None:
    with _listings_lock:
        _listings[_key(server, config)] = (time.monotonic(), tools)


def clear_cache() -> None:
    """Forget every tool listing (the next list or call asks the servers again)."""
    with _listings_lock:
        _listings.clear()


# --- the SDK, imported when first used (it takes about a second to import) ---------------------------

@asynccontextmanager
async def _connected(config: dict, marker: str):
    """An MCP client session with the server `config` describes."""
    from mcp import Client, StdioServerParameters

    if "command" in config:
        # The server's environment is the SDK's short safe list (PATH, HOME, USER...) plus its own `env`:
        # the platform's secrets are not passed on. The marker tells this call's process from the others.
        params = StdioServerParameters(command=config["command"], args=list(config.get("args", [])),
                                       env=dict(config.get("env") or {}) | {MARKER: marker},
                                       cwd=config.get("cwd"))
        async with Client(params) as client:
            yield client
        return
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=dict(config.get("headers") or {}),
                                  timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(config["url"], http_client=http)) as client:
            yield client


async def _listing(client, server: str) -> tuple[Tool, ...]:
    tools, cursor = [], None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += [Tool(server=server, name=tool.name, description=tool.description or "",
                       input_schema=tool.input_schema or dict(EMPTY_OBJECT_SCHEMA)) for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _marked_servers(marker: str) -> list[int]:
    """The pids of this process's children started with `marker` and not yet dead."""
    import psutil

    pids = []
    for child in psutil.Process().children():
        try:
            if child.environ().get(MARKER) == marker:
                pids.append(child.pid)
        except psutil.Error:  # gone, a zombie (the SDK reaps it), or not ours to read
            continue
    return pids


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


async def _stop_stragglers(when: float, marker: str) -> None:
    """At `when` (just past the deadline), stop the stdio server of this call if it still runs: SIGTERM
    to its process group (the SDK starts each server in a session of its own, so its children too), and
    SIGKILL to what is left of the group half a second later. The SDK alone would wait 2 s, then 2 s more."""
    await anyio.sleep_until(when)
    groups = _marked_servers(marker)
    if not groups:
        return
    logger.warning("MCP server process group %s still running after its deadline: stopping it", groups)
    # Shielded: the call ends as soon as the server itself is gone, and the SIGKILL must still follow.
    with anyio.CancelScope(shield=True):
        for pgid in groups:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        with anyio.move_on_after(KILL_GRACE_SECONDS):
            while any(_group_alive(pgid) for pgid in groups):
                await anyio.sleep(0.02)
        for pgid in groups:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


async def _bounded(config: dict, timeout: float, work) -> None:
    """`await work(client)` with a session to the server, all of it (start-up included) under `timeout`."""
    marker = uuid.uuid4().hex
    async with anyio.create_task_group() as group:
        if "command" in config:
            group.start_soon(_stop_stragglers, anyio.current_time() + timeout + STDIN_CLOSE_GRACE_SECONDS,
                             marker)
        try:
            with anyio.fail_after(timeout):
                async with _connected(config, marker) as client:
                    await work(client)
        finally:
            group.cancel_scope.cancel()


def _leaves(error: BaseException):
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _reason(error: BaseException) -> str | None:
    """Why the server could not be used, in words that hold no setting's value (in the active language); None:
    not such an error."""
    import httpx2
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED
    from pydantic import ValidationError

    if isinstance(error, FileNotFoundError):
        return gettext("its command was not found")
    if isinstance(error, PermissionError):
        return gettext("its command may not be run (permission denied)")
    if isinstance(error, httpx2.ConnectError):
        return gettext("nothing answered at its URL (connection refused, or no such host)")
    if isinstance(error, httpx2.HTTPError):
        return gettext("the HTTP exchange failed (%(error)s)") % {"error": type(error).__name__}
    if isinstance(error, MCPError):
        if error.code == CONNECTION_CLOSED:
            return gettext("it closed the connection (its process exited, or the server hung up)")
        return gettext("it answered with an error (%(code)s: %(message)s)") % {
            "code": error.code, "message": error.message[:MAX_ERROR_CHARS]}
    if isinstance(error, OSError):
        return gettext("it could not be started or reached (%(error)s)") % {
            "error": error.strerror or type(error).__name__}
    if isinstance(error, ValidationError):
        return gettext("it answered with something that is not MCP")
    if isinstance(error, (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)):
        return gettext("the connection broke off")
    return None


def _translated(error: BaseException, server: str, *, doing: str, timeout: float,
                called: str | None = None) -> PlatformError | None:
    """`error` (often an exception group from the SDK's task groups) in the platform's vocabulary."""
    import httpx2
    from mcp import MCPError
    from mcp.types import INVALID_PARAMS

    leaves = list(_leaves(error))
    for leaf in leaves:
        if isinstance(leaf, PlatformError):  # raised by this module inside the session (unknown tool...)
            return leaf
    for leaf in leaves:
        if isinstance(leaf, (TimeoutError, httpx2.TimeoutException)):
            return ToolTimedOut(gettext("The MCP server %(server)s did not finish %(doing)s within %(seconds)s s.")
                                % {"server": repr(server), "doing": doing, "seconds": f"{timeout:g}"})
    for leaf in leaves:
        if called and isinstance(leaf, MCPError) and leaf.code == INVALID_PARAMS:
            return Refused(gettext("The MCP server %(server)s refused the call to %(tool)s: %(message)s") % {
                "server": repr(server), "tool": repr(called), "message": leaf.message[:MAX_ERROR_CHARS]},
                field="arguments")
        if (reason := _reason(leaf)) is not None:
            return ToolUnavailable(gettext("The MCP server %(server)s is unavailable: %(reason)s.")
                                   % {"server": repr(server), "reason": reason})
    return None


def _in_a_loop_of_its_own(function, *args):
    """`anyio.run(function, *args)`, in this thread, or in a thread of its own when this one already runs
    an event loop (a caller inside async code, or a test next to Playwright's sync API): a call never
    waits on, or breaks, a loop that is not its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(function, *args)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-call") as pool:
        # In this thread's context: its messages in the caller's language (Django's active one is a context variable).
        return pool.submit(contextvars.copy_context().run, anyio.run, function, *args).result()


def _run(config: dict, work, server: str, *, doing: str, timeout: float, called: str | None = None):
    """`work(client, answer)` (a coroutine function that puts its result in the list `answer`) in an event
    loop of this thread, under `timeout`, its errors translated. An answer that came in time counts even
    when the server's shut-down then ran past the deadline."""
    answer: list = []

    async def run(client):
        await work(client, answer)

    try:
        _in_a_loop_of_its_own(_bounded, config, timeout, run)
    except Exception as error:
        translated = _translated(error, server, doing=doing, timeout=timeout, called=called)
        if translated is None:
            raise
        if not (answer and isinstance(translated, ToolTimedOut)):
            raise translated from error
    return answer[0]


# --- listing ------------------------------------------------------------------------------------------

def _list_servers(names: list[str], timeout: float) -> dict[str, tuple[Tool, ...] | PlatformError]:
    """Each server's listing or error, listed side by side in one event loop."""
    outcomes: dict[str, tuple[Tool, ...] | PlatformError] = {}

    async def list_one(name: str, config: dict):
        started = time.perf_counter()
        tools: list[tuple[Tool, ...]] = []

        async def work(client):
            tools.append(await _listing(client, name))

        try:
            await _bounded(config, timeout, work)
        except Exception as error:
            translated = _translated(error, name, doing=gettext("listing its tools"), timeout=timeout)
            if translated is None:
                raise
            outcomes[name] = translated
            logger.warning("MCP list_tools server=%s failed after %.0f ms: %s", name,
                           (time.perf_counter() - started) * 1000, type(translated).__name__)
            return
        outcomes[name] = tools[0]
        logger.info("MCP list_tools server=%s tools=%d latency_ms=%.0f", name, len(tools[0]),
                    (time.perf_counter() - started) * 1000)

    async def list_all():
        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(list_one, name, server_config(name))

    try:
        _in_a_loop_of_its_own(list_all)
    except BaseExceptionGroup as group:  # an unexpected error in a task: the first one, as it is
        raise next(_leaves(group)) from group
    return outcomes


def list_tools(names: Sequence[str], *, timeout: float | None = None) -> list[Tool]:
    """The tools of the named servers (each listed at most once a minute), in server order. Refused for
    a name not on the allow-list, or two servers offering the same tool name; ToolUnavailable or
    ToolTimedOut for a server that cannot be listed."""
    names = check_server_names(names)
    timeout = timeout or settings.MCP_LIST_TIMEOUT_SECONDS
    listings = {name: _cached_listing(name, server_config(name)) for name in names}
    missing = [name for name, tools in listings.items() if tools is None]
    if missing:
        outcomes = _list_servers(missing, timeout)
        for name in missing:  # keep what was listed, then report the first failure in the caller's order
            if not isinstance(outcomes[name], PlatformError):
                _store_listing(name, server_config(name), outcomes[name])
                listings[name] = outcomes[name]
        for name in missing:
            if isinstance(outcomes[name], PlatformError):
                raise outcomes[name]
    tools, offered_by = [], {}
    for name in names:
        for tool in listings[name]:
            if tool.name in offered_by and offered_by[tool.name] != name:
                raise Refused(gettext("The MCP servers %(first)s and %(second)s both offer a tool named %(tool)s; a "
                                      "conversation can use only one of them.") % {
                    "first": repr(offered_by[tool.name]), "second": repr(name), "tool": repr(tool.name)},
                    field="mcp_servers")
            offered_by[tool.name] = name
            tools.append(tool)
    return tools


def find_tool(tools: Sequence[Tool], server: str, name: str) -> Tool:
    for tool in tools:
        if tool.name == name:
            return tool
    offered = ", ".join(tool.name for tool in tools) or gettext("none")
    raise Refused(gettext("The MCP server %(server)s has no tool named %(tool)s; it offers: %(offered)s.")
                  % {"server": repr(server), "tool": repr(name[:100]), "offered": offered}, field="name")


# --- calling ------------------------------------------------------------------------------------------

def _size(data: str) -> int:
    try:
        return len(binascii.a2b_base64(data))
    except (binascii.Error, ValueError):
        return len(data)


def _part_text(part) -> str:
    """One content part as text: text as it is, anything else as a placeholder (never dropped)."""
    kind = getattr(part, "type", None)
    if kind == "text":
        return part.text
    if kind in ("image", "audio"):
        return f"[{part.mime_type or kind}, {_size(part.data)} bytes]"
    if kind == "resource":
        resource = part.resource
        mime = getattr(resource, "mime_type", None)
        if getattr(resource, "text", None) is not None:
            return f"[resource {resource.uri}, {mime or 'text'}, {len(resource.text)} characters]"
        size = _size(getattr(resource, "blob", "") or "")
        return f"[resource {resource.uri}, {mime or 'binary'}, {size} bytes]"
    if kind == "resource_link":
        return f"[resource link {part.uri}]"
    return f"[{kind or type(part).__name__} content]"


def call_tool(server: str, name: str, arguments, *, timeout: float | None = None) -> ToolResult:
    """Run the tool `name` of the allow-listed `server` with `arguments` (a dict, or a JSON string).

    Refused: the server is not allowed, it has no such tool, or the arguments do not fit its schema.
    ToolUnavailable: the server cannot be started or reached. ToolTimedOut: it took longer than `timeout`
    (default MCP_CALL_TIMEOUT_SECONDS), start-up included. A result with isError is a ToolResult with
    is_error=True: the tool's own answer, not an exception."""
    config = server_config(server)
    timeout = timeout or settings.MCP_CALL_TIMEOUT_SECONDS
    listing = _cached_listing(server, config)
    if listing is not None:
        arguments = validate_arguments(find_tool(listing, server, name), arguments)

    async def work(client, answer: list):
        checked = arguments
        if listing is None:
            tools = await _listing(client, server)
            _store_listing(server, config, tools)
            checked = validate_arguments(find_tool(tools, server, name), arguments)
        answer.append(await client.call_tool(name, checked))

    started = time.perf_counter()
    try:
        result = _run(config, work, server, doing=gettext("the call to %(tool)s") % {"tool": repr(name)}, timeout=timeout, called=name)
    except PlatformError as error:
        logger.warning("MCP call_tool server=%s tool=%s failed after %.0f ms: %s", server, name[:100],
                       (time.perf_counter() - started) * 1000, type(error).__name__)
        raise
    latency_ms = (time.perf_counter() - started) * 1000
    text = bounded_result_text("\n".join(_part_text(part) for part in result.content))
    tool_result = ToolResult(server=server, name=name, text=text, is_error=bool(result.is_error),
                             structured=bounded_structured(result.structured_content), latency_ms=latency_ms)
    logger.info("MCP call_tool server=%s tool=%s latency_ms=%.0f outcome=%s", server, name, latency_ms,
                "tool_error" if tool_result.is_error else "ok")
    return tool_result

