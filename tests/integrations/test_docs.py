"""Every Python example of docs/integrations.md runs as written, and prints what it says."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def examples() -> dict[str, str]:
    """The page's Python code blocks, by the heading of the section they are in."""
    out: dict[str, str] = {}
    for section in re.split(r"\n## ", DOC.read_text())[1:]:
        title = section.splitlines()[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        if blocks:
            out[title] = "\n".join(blocks)
    return out


def run(title: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> str:
    # The examples call the installed `actrone-pg`, as a reader would after pip install.
    bin_dir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    code = examples()[title]
    exec(compile(code, f"docs/integrations.md: {title}", "exec"), {"__name__": "example"})
    return capfd.readouterr().out


def test_the_page_has_the_examples_these_tests_run() -> None:
    assert set(examples()) == {
        "MCP server (`actrone-pg mcp`)",
        "LangGraph store",
        "LangChain chat history",
        "OpenAI Agents SDK session",
        "LlamaIndex memory block",
    }


def test_mcp_example(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    # Run as from a virtual environment that is not activated: no `actrone-pg` on PATH.
    monkeypatch.setenv("PATH", os.pathsep.join(("/usr/bin", "/bin")))
    code = examples()["MCP server (`actrone-pg mcp`)"]
    exec(compile(code, "docs/integrations.md: MCP", "exec"), {"__name__": "example"})
    out = capfd.readouterr().out.splitlines()
    assert out[0] == str(
        sorted(
            [
                "delete_memory",
                "get_memory",
                "get_recent_turns",
                "inject_memory",
                "list_memories",
                "retrieve_context",
                "search_memories",
                "store_turn",
                "update_memory",
            ]
        )
    )
    assert out[1] == '["The customer\'s plan is Pro"]'
    assert out[2].startswith("True ") and "does not serve agent 'sales-bot'" in out[2]


def test_langgraph_example(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    out = run("LangGraph store", monkeypatch, capfd).splitlines()
    assert out == [
        "['The user eats no meat']",
        "[('users', 'u1')]",
        "['The user eats no meat']",
    ]


def test_langchain_example(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    out = run("LangChain chat history", monkeypatch, capfd)
    assert out == "['system', 'human', 'ai', 'human']\n"


def test_openai_agents_example(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    out = run("OpenAI Agents SDK session", monkeypatch, capfd).splitlines()
    assert out == [
        "[{'role': 'assistant', 'content': 'Sure, for how many?'}]",
        "[('Plan dinner?', 'Sure, for how many?')]",
    ]


def test_llamaindex_example(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    out = run("LlamaIndex memory block", monkeypatch, capfd)
    assert out == "system True\n"
