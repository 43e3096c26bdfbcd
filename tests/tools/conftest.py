"""Real MCP servers for the tool tests: the registry's `mcp-server-time` and `mcp-server-git` over stdio
(requirements/dev.txt installs them beside the interpreter), the SDK's own server over streamable HTTP
(uvicorn in a thread), and a few tiny misbehaving stdio scripts. One allow-list covers them all."""

import base64
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import pytest
import uvicorn
from django.test import override_settings

from dataplatform.settings.tools import check_mcp_servers
from dataplatform.tools import clear_cache

BIN = Path(sys.executable).parent
SECRET = "s3cret-do-not-log"

# Reads its stdin and never answers; it exits when stdin closes, as a stdio server does.
SILENT = "import sys\nfor line in sys.stdin:\n    pass\n"
# Never answers, ignores its stdin closing and SIGTERM, and starts a child that ignores SIGTERM too:
# only SIGKILL to the whole process group stops both.
STUBBORN = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(sys.argv[1], "w") as pids:
        pids.write(f"{__import__('os').getpid()} {child.pid}")
    sys.stdin.read()
    time.sleep(3600)
""")


def executable(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: install requirements/dev.txt"
    return str(path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def echo_server():
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ImageContent

    server = MCPServer("echo")

    @server.tool(description="Gives the text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Sleeps, then answers.")
    async def sleep(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    @server.tool(description="A picture and a caption.")
    def picture() -> list:
        return [ImageContent(type="image", data=base64.b64encode(b"\x89PNG" + b"x" * 1230).decode(),
                             mime_type="image/png"), "a caption"]

    @server.tool(description="Always fails.")
    def fail() -> str:
        raise ToolError("this tool always fails")

    return server


@pytest.fixture(scope="package")
def http_server():
    """The SDK's server on a free port; `seen` collects the headers of every HTTP request it got."""
    app = echo_server().streamable_http_app()
    seen: list[dict] = []

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            seen.append({key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]})
        await app(scope, receive, send)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the test MCP server did not start"
        time.sleep(0.02)
    yield {"url": f"http://127.0.0.1:{port}/mcp", "seen": seen}
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="package")
def git_repository(tmp_path_factory) -> Path:
    """A repository with one commit."""
    repo = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(repo), "-c", "user.name=Tester", "-c", "user.email=tester@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "README.md").write_text("hello\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First commit of the fixture"], check=True)
    return repo


@pytest.fixture(scope="package")
def scripts(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scripts")
    (folder / "silent.py").write_text(SILENT)
    (folder / "stubborn.py").write_text(STUBBORN)
    return folder


@pytest.fixture(scope="package")
def mcp_servers(http_server, git_repository, scripts):
    """The allow-list of every test server, checked as start-up checks MCP_SERVERS."""
    return check_mcp_servers("MCP_SERVERS", {
        "time": {"command": executable("mcp-server-time"), "description": "clock and time zones"},
        "git": {"command": executable("mcp-server-git"), "args": ["--repository", str(git_repository)]},
        "echo": {"url": http_server["url"], "headers": {"Authorization": f"Bearer {SECRET}"}},
        "echo_again": {"url": http_server["url"]},
        "wrong_path": {"url": http_server["url"].replace("/mcp", "/not-mcp"), "headers": {"X-Api-Key": SECRET}},
        "missing": {"command": "/nonexistent/mcp-server", "env": {"API_TOKEN": SECRET}},
        "exits": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        "silent": {"command": sys.executable, "args": [str(scripts / "silent.py")]},
        "stubborn": {"command": sys.executable, "args": [str(scripts / "stubborn.py"), str(scripts / "pids")]},
        "nobody": {"url": f"http://127.0.0.1:{free_port()}/mcp", "headers": {"X-Api-Key": SECRET}},
    })


@pytest.fixture(scope="package", autouse=True)
def allow_listed(mcp_servers):
    """Every test here runs with the allow-list above; listings are kept between tests (as in a process
    that serves many calls), which keeps server start-ups few."""
    clear_cache()
    with override_settings(MCP_SERVERS=mcp_servers):
        yield
    clear_cache()
