"""Each adapter without its framework fails on import with the pip line that installs it."""

from __future__ import annotations

import importlib
import sys

import pytest

from actrone_pg import MissingDependencyError


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("mcp", "mcp", "mcp"),
        ("langgraph", "langgraph", "langgraph"),
        ("langchain", "langchain_core", "langchain"),
        ("openai_agents", "agents", "openai-agents"),
        ("llamaindex", "llama_index", "llamaindex"),
    ],
)
def test_a_missing_framework_names_the_extra(
    module: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name == framework or name.startswith(framework + "."):
            monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, framework, None)  # type: ignore[arg-type]
    monkeypatch.delitem(sys.modules, f"actrone_pg.integrations.{module}", raising=False)
    with pytest.raises(MissingDependencyError, match=rf'pip install "actrone-pg\[{extra}\]"'):
        importlib.import_module(f"actrone_pg.integrations.{module}")
