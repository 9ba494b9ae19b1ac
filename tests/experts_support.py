"""Fixtures for the expert tests: a real Gradio app on 127.0.0.1 (a Space and an MCP server at once)
and a real FastMCP server over HTTP and over stdio."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from fakes.tool_mcp import HttpServer

FAKES = Path(__file__).parent / "fakes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def space_url():
    """The Gradio stand-in for a Space, launched with mcp_server=True; its root URL."""
    from fakes.tool_space import build

    demo = build(extra=True)
    demo.queue()
    _, url, _ = demo.launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        prevent_thread_lock=True,
        mcp_server=True,
        quiet=True,
    )
    yield url
    demo.close()


@pytest.fixture
def mcp_state(tmp_path) -> Path:
    return tmp_path / "state.txt"


@pytest.fixture
def mcp_http(mcp_state):
    server = HttpServer(mcp_state)
    yield server
    server.close()


def stdio_command(state: Path) -> str:
    return f"{sys.executable} {FAKES / 'tool_mcp.py'} {state}"


@pytest.fixture(autouse=True)
def tool_task_types_are_forgotten():
    """A catalog with tools adds task types to the process's registry: gone again after each test,
    so that other modules see only the built-in ones."""
    from hugginggpt import tasks

    yield
    for name in set(tasks.TASKS) - tasks.BUILT_IN:
        del tasks.TASKS[name]
