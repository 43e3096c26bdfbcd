"""Tool calls over streamable HTTP, against the SDK's own server (tests/tools/conftest.py) served by
uvicorn on a free port, and against an address where nothing listens."""

import logging
import time

import pytest

from dataplatform.errors import Refused
from dataplatform.tools import ToolTimedOut, ToolUnavailable, call_tool, clear_cache, list_tools

from .conftest import SECRET


def test_the_tools_are_listed_with_their_schemas():
    tools = {tool.name: tool for tool in list_tools(["echo"])}
    assert set(tools) == {"echo", "sleep", "picture", "fail"}
    assert tools["echo"].input_schema["required"] == ["text"]
    assert tools["echo"].as_openai()["function"]["description"] == "Gives the text back."


def test_markup_comes_back_as_the_text_it_is():
    result = call_tool("echo", "echo", {"text": "<script>alert(1)</script>"})
    assert result.text == "<script>alert(1)</script>"  # escaping is the renderer's job
    assert result.structured == {"result": "<script>alert(1)</script>"}
    assert not result.is_error and result.latency_ms > 0


def test_the_headers_reach_the_server_and_no_log_line_repeats_them_or_the_arguments(http_server, caplog):
    caplog.set_level(logging.DEBUG)  # as with LOG_LEVEL=DEBUG
    assert call_tool("echo", "echo", {"text": f"token {SECRET}x"}).text == f"token {SECRET}x"
    assert any(headers.get("authorization") == f"Bearer {SECRET}" for headers in http_server["seen"])
    assert "server=echo tool=echo" in caplog.text
    assert SECRET not in caplog.text


def test_a_call_past_its_timeout_raises_and_the_next_call_still_works():
    started = time.perf_counter()
    with pytest.raises(ToolTimedOut, match="'echo' did not finish the call to 'sleep' within 0.5 s"):
        call_tool("echo", "sleep", {"seconds": 3}, timeout=0.5)
    assert time.perf_counter() - started < 2
    assert call_tool("echo", "echo", {"text": "still here"}).text == "still here"


def test_an_image_is_summarized_not_dropped():
    result = call_tool("echo", "picture", {})
    assert result.text == "[image/png, 1234 bytes]\na caption"


def test_a_failing_tool_is_a_result_with_is_error():
    result = call_tool("echo", "fail", {})
    assert result.is_error and "this tool always fails" in result.text


def test_two_servers_offering_the_same_tool_name_are_refused():
    with pytest.raises(Refused) as refused:
        list_tools(["echo", "echo_again"])
    assert refused.value.detail.startswith("The MCP servers 'echo' and 'echo_again' both offer a tool named")


def test_nothing_listening_is_unavailable_at_once_without_the_headers(caplog):
    caplog.set_level(logging.DEBUG)
    for attempt in (lambda: list_tools(["nobody"], timeout=5),
                    lambda: call_tool("nobody", "echo", {"text": "hi"}, timeout=5)):
        started = time.perf_counter()
        with pytest.raises(ToolUnavailable) as raised:
            attempt()
        assert time.perf_counter() - started < 5
        assert raised.value.detail == ("The MCP server 'nobody' is unavailable: nothing answered at its URL "
                                       "(connection refused, or no such host).")
    assert SECRET not in caplog.text


def test_an_http_error_is_unavailable():
    with pytest.raises(ToolUnavailable) as raised:
        list_tools(["wrong_path"], timeout=5)
    assert raised.value.detail == ("The MCP server 'wrong_path' is unavailable: it answered with an error "
                                   "(-32601: Not Found).")


def test_with_no_listing_kept_a_call_lists_on_its_own_connection():
    clear_cache()
    with pytest.raises(Refused, match="'echo' has no tool named 'nope'; it offers: echo, sleep, picture, fail"):
        call_tool("echo", "nope", {})
    clear_cache()
    with pytest.raises(Refused, match=r"^arguments\.text: 1 is not of type 'string'$"):
        call_tool("echo", "echo", {"text": 1})
    clear_cache()
    assert call_tool("echo", "echo", '{"text": "cold"}').text == "cold"
