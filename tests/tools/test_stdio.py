"""Tool calls over stdio against the registry's real servers (`mcp-server-time`, `mcp-server-git`),
started by the tests, and against servers that are missing, exit or never answer."""

import asyncio
import json
import logging
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import psutil
import pytest

from dataplatform.errors import Refused
from dataplatform.tools import Tool, ToolTimedOut, ToolUnavailable, call_tool, clear_cache, list_tools
from dataplatform.tools.client import _store_listing

from .conftest import SECRET


@pytest.fixture(scope="module")
def time_tools():
    return {tool.name: tool for tool in list_tools(["time"])}


def test_the_time_server_lists_its_tools_with_schemas(time_tools):
    assert set(time_tools) == {"get_current_time", "convert_time"}
    current = time_tools["get_current_time"]
    assert current.server == "time"
    assert current.input_schema["required"] == ["timezone"]
    assert current.input_schema["properties"]["timezone"]["type"] == "string"
    assert set(time_tools["convert_time"].input_schema["required"]) == {"source_timezone", "time", "target_timezone"}
    assert current.as_openai() == {"type": "function", "function": {
        "name": "get_current_time", "description": current.description, "parameters": current.input_schema}}
    assert current.description


def test_a_second_listing_comes_from_the_cache(time_tools):
    list_tools(["time"])  # listed again only if the fixture's listing is past LIST_CACHE_SECONDS
    started = time.perf_counter()
    assert {tool.name for tool in list_tools(["time"])} == set(time_tools)
    assert time.perf_counter() - started < 0.1  # no server was started


def test_the_current_time_in_utc(time_tools, caplog):
    caplog.set_level(logging.INFO, logger="dataplatform.tools")
    result = call_tool("time", "get_current_time", {"timezone": "UTC"})
    assert (result.server, result.name, result.is_error) == ("time", "get_current_time", False)
    answered = datetime.fromisoformat(json.loads(result.text)["datetime"])
    assert abs((answered - datetime.now(UTC)).total_seconds()) < 60
    assert result.structured["timezone"] == "UTC"
    assert 0 < result.latency_ms < 20_000
    assert "server=time tool=get_current_time" in caplog.text and "outcome=ok" in caplog.text


def test_an_unknown_timezone_is_the_tool_s_own_error_not_an_exception(time_tools):
    # The schema asks only for a string, so validation lets it through; the server answers isError.
    result = call_tool("time", "get_current_time", '{"timezone": "Mars/Base"}')
    assert result.is_error is True
    assert "Mars/Base" in result.text
    assert result.structured is None


def test_a_missing_required_field_is_refused_before_any_server_starts(time_tools):
    list_tools(["time"])
    started = time.perf_counter()
    with pytest.raises(Refused) as refused:
        call_tool("time", "convert_time", {"source_timezone": "UTC", "time": "12:00"})
    assert time.perf_counter() - started < 0.1
    assert refused.value.field == "arguments"
    assert refused.value.detail == "arguments: 'target_timezone' is a required property"


def test_a_wrong_type_names_the_field(time_tools):
    with pytest.raises(Refused, match=r"^arguments\.timezone: 3 is not of type 'string'$"):
        call_tool("time", "get_current_time", {"timezone": 3})


def test_arguments_that_are_not_json_are_refused_with_line_and_column(time_tools):
    with pytest.raises(Refused) as refused:
        call_tool("time", "get_current_time", '{\n  "timezone": "UTC",\n}')
    assert refused.value.detail.startswith("arguments: not JSON (line 3, column 1: ")


def test_an_unknown_tool_is_refused_with_the_tools_offered(time_tools):
    with pytest.raises(Refused) as refused:
        call_tool("time", "get_weather", {})
    assert refused.value.field == "name"
    assert "has no tool named 'get_weather'; it offers: get_current_time, convert_time" in refused.value.detail


def test_a_server_not_on_the_list_is_never_started():
    with pytest.raises(Refused, match="'mcp-server-time' is not an allowed MCP server"):
        call_tool("mcp-server-time", "get_current_time", {"timezone": "UTC"})


def test_a_call_from_another_thread_as_in_a_sync_view_under_uvicorn(time_tools):
    results = []
    worker = threading.Thread(target=lambda: results.append(call_tool("time", "get_current_time",
                                                                      {"timezone": "Europe/Paris"})))
    worker.start()
    worker.join(timeout=30)
    assert results and json.loads(results[0].text)["timezone"] == "Europe/Paris"


def test_a_caller_whose_thread_runs_an_event_loop_gets_a_loop_of_its_own(time_tools):
    """Async code (or Playwright's sync API beside a test) runs a loop in the calling thread: the call
    runs beside it instead of failing with "Already running asyncio in this thread"."""
    async def inside_a_loop():
        listed = {tool.name for tool in list_tools(["time"])}
        return listed, call_tool("time", "get_current_time", {"timezone": "Asia/Tokyo"})

    # In a thread of its own: the test's thread may already run a loop (Playwright's, after browser tests).
    with ThreadPoolExecutor(max_workers=1) as pool:
        listed, result = pool.submit(asyncio.run, inside_a_loop()).result(timeout=60)
    assert "get_current_time" in listed and json.loads(result.text)["timezone"] == "Asia/Tokyo"


def test_git_status_and_log_over_a_temporary_repository(git_repository):
    names = {tool.name for tool in list_tools(["git"])}
    assert {"git_status", "git_log"} <= names
    status = call_tool("git", "git_status", {"repo_path": str(git_repository)})
    assert not status.is_error
    assert "On branch main" in status.text and "nothing to commit" in status.text
    log = call_tool("git", "git_log", {"repo_path": str(git_repository), "max_count": 5})
    assert not log.is_error
    assert "First commit of the fixture" in log.text
    head = subprocess.run(["git", "-C", str(git_repository), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    assert head in log.text


def test_git_refuses_a_repository_outside_the_one_configured(git_repository, tmp_path):
    result = call_tool("git", "git_status", {"repo_path": str(tmp_path)})
    assert result.is_error and "outside the allowed repository" in result.text


def _unavailable(server: str, caplog, **call) -> tuple[ToolUnavailable, float]:
    caplog.set_level(logging.DEBUG)
    started = time.perf_counter()
    with pytest.raises(ToolUnavailable) as raised:
        if call:
            call_tool(server, timeout=5, **call)
        else:
            list_tools([server], timeout=5)
    return raised.value, time.perf_counter() - started


def test_a_command_that_does_not_exist_is_unavailable_at_once(caplog):
    error, elapsed = _unavailable("missing", caplog)
    assert elapsed < 1
    assert error.detail == "The MCP server 'missing' is unavailable: its command was not found."
    assert error.status == 503 and error.retry_after
    error, _ = _unavailable("missing", caplog, name="anything", arguments={"token": SECRET})
    assert "'missing'" in error.detail
    assert SECRET not in caplog.text and SECRET not in error.detail


def test_a_server_that_exits_is_unavailable(caplog):
    error, elapsed = _unavailable("exits", caplog)
    assert elapsed < 5
    assert "The MCP server 'exits' is unavailable: it closed the connection" in error.detail


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def test_a_server_that_never_answers_times_out_and_is_stopped():
    before = _children()
    started = time.perf_counter()
    with pytest.raises(ToolTimedOut) as raised:
        call_tool("silent", "anything", {}, timeout=1)
    elapsed = time.perf_counter() - started
    assert 1 <= elapsed < 1 + 2
    assert raised.value.detail == "The MCP server 'silent' did not finish the call to 'anything' within 1 s."
    assert raised.value.status == 503
    assert _children() <= before  # no process left, zombies included (psutil lists those too)


def test_a_server_that_ignores_stdin_closing_and_sigterm_is_killed_with_its_child(scripts):
    # Past the deadline: stdin closed, 0.3 s, SIGTERM to the process group, 0.5 s, SIGKILL.
    before = _children()
    started = time.perf_counter()
    with pytest.raises(ToolTimedOut, match="'stubborn' did not finish listing its tools within 1 s"):
        list_tools(["stubborn"], timeout=1)
    elapsed = time.perf_counter() - started
    assert 1 <= elapsed < 1 + 2
    server_pid, child_pid = map(int, (scripts / "pids").read_text().split())
    assert not psutil.pid_exists(server_pid)  # killed and reaped
    # Its child was killed with it; orphaned, it is init's to reap, not ours.
    assert not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    assert _children() <= before


def test_a_tool_the_server_no_longer_has_is_refused_by_the_server(time_tools, mcp_servers):
    # A listing kept from before the server changed: the server answers JSON-RPC -32602 itself.
    listing = tuple(time_tools.values()) + (Tool(server="time", name="ghost", description=""),)
    _store_listing("time", mcp_servers["time"], listing)
    try:
        with pytest.raises(Refused) as refused:
            call_tool("time", "ghost", {})
    finally:
        clear_cache()
    assert refused.value.detail == "The MCP server 'time' refused the call to 'ghost': Unknown tool: ghost"
