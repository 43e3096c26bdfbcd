"""MCP_SERVERS is read and checked at start-up; a bad value stops it with the variable's name and never
repeats the value (headers and env may hold tokens). Only allow-listed names are accepted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dataplatform.errors import Refused
from dataplatform.settings.tools import env_mcp_servers, env_seconds
from dataplatform.tools import check_server_names, server_description, server_names

from .conftest import SECRET

ROOT = Path(__file__).resolve().parents[2]


def test_unset_or_empty_means_no_server(monkeypatch):
    monkeypatch.delenv("MCP_SERVERS", raising=False)
    assert env_mcp_servers() == {}
    monkeypatch.setenv("MCP_SERVERS", "  ")
    assert env_mcp_servers() == {}


def test_entries_are_read_and_completed(monkeypatch):
    monkeypatch.setenv("MCP_SERVERS", json.dumps({
        "time": {"command": "mcp-server-time", "description": "clock"},
        "docs": {"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer x"}},
    }))
    assert env_mcp_servers() == {
        "time": {"command": "mcp-server-time", "args": [], "env": {}, "description": "clock"},
        "docs": {"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer x"}},
    }


@pytest.mark.parametrize("value, complaint", [
    (f'{{"git": {{"command": "{SECRET}",}}}}', "not JSON (line 1, column"),
    (json.dumps([{"command": "x"}]), "must be a JSON object"),
    (json.dumps({"both": {"command": "x", "url": "http://127.0.0.1/mcp"}}), "exactly one of"),
    (json.dumps({"neither": {"description": "x"}}), "exactly one of"),
    (json.dumps({"ftp": {"url": f"ftp://{SECRET}@host/mcp"}}), "['ftp'].url: must be an http:// or https://"),
    (json.dumps({"hostless": {"url": "http:///mcp"}}), "with a host"),
    (json.dumps({"args": {"command": "x", "args": "--repository /srv"}}), "['args'].args: must be a list of strings"),
    (json.dumps({"args": {"command": "x", "args": ["-v", 3]}}), "must be a list of strings"),
    (json.dumps({"env": {"command": "x", "env": {"TOKEN": 1}}}), "['env'].env: must be an object of strings"),
    (json.dumps({"headers": {"url": "http://h/mcp", "headers": [SECRET]}}), "['headers'].headers: must be"),
    (json.dumps({"mixed": {"url": "http://h/mcp", "env": {"T": SECRET}}}), "do not apply to an HTTP server"),
    (json.dumps({"typo": {"command": "x", "arg": []}}), "unknown keys ['arg']"),
    (json.dumps({"bad name!": {"command": "x"}}), "server name 'bad name!'"),
    (json.dumps({"empty": {"command": " "}}), "['empty'].command: must be a non-empty string"),
])
def test_a_bad_value_stops_start_up_naming_the_variable_not_the_value(monkeypatch, value, complaint):
    monkeypatch.setenv("MCP_SERVERS", value)
    with pytest.raises(ImproperlyConfigured) as raised:
        env_mcp_servers()
    message = str(raised.value)
    assert message.startswith("MCP_SERVERS")
    assert complaint in message
    assert SECRET not in message


def test_start_up_itself_stops_on_a_bad_value():
    result = subprocess.run([sys.executable, "-c", "import dataplatform.settings"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60,
                            env=os.environ | {"MCP_SERVERS": '{"time": {"command": "x", "url": "http://h/"}}'})
    assert result.returncode != 0
    assert "ImproperlyConfigured: MCP_SERVERS['time']: give exactly one of" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_timeouts_are_positive_numbers(monkeypatch, value):
    monkeypatch.setenv("MCP_CALL_TIMEOUT_SECONDS", value)
    with pytest.raises(ImproperlyConfigured, match="MCP_CALL_TIMEOUT_SECONDS"):
        env_seconds("MCP_CALL_TIMEOUT_SECONDS", 20.0)


def test_the_timeouts_default_to_20_seconds(monkeypatch):
    monkeypatch.delenv("MCP_LIST_TIMEOUT_SECONDS", raising=False)
    assert env_seconds("MCP_LIST_TIMEOUT_SECONDS", 20.0) == 20.0


def test_only_allow_listed_names_pass():
    assert "time" in server_names() and server_names() == sorted(server_names())
    assert check_server_names(["time", "git", "time"]) == ["time", "git"]
    assert server_description("time") == "clock and time zones"
    with pytest.raises(Refused) as refused:
        check_server_names(["time", "/usr/bin/rm"])
    assert refused.value.field == "mcp_servers"
    assert "'/usr/bin/rm' is not an allowed MCP server" in refused.value.detail
    assert "allowed: echo, echo_again, exits, git" in refused.value.detail
    with pytest.raises(Refused, match="must be a list"):
        check_server_names("time")


def test_with_no_server_allowed_the_refusal_says_so(settings):
    settings.MCP_SERVERS = {}
    with pytest.raises(Refused, match="allow-listed no MCP server"):
        check_server_names(["time"])
