"""The Python example of the "Consolidation" section of docs/lifecycle.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "lifecycle.md"


def example() -> str:
    text = DOC.read_text()
    section = text[text.index("## Consolidation") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_the_consolidation_example_prints_what_the_doc_says(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ACTRONE_BACKEND", "ACTRONE_CONSOLIDATOR", "ACTRONE_CONSOLIDATE_AFTER_TURNS"):
        monkeypatch.delenv(var, raising=False)
    exec(compile(example(), str(DOC), "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.splitlines() == [
        "User: I moved to Oslo last March with my wife Anna. consolidated ('t2',)",
        "[]",
    ]
