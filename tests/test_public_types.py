"""The public face as written: what ``mypy --strict`` sees in a user's script (the real types, not
Any), and each public method's signature, the same as its collaborator's.

The script uses both managers, the async one and the generated blocking one; mypy runs through
its API, once, on a copy of the script in a temporary directory, with this checkout's package.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import pytest

from actrone_pg import MemoryManager
from actrone_pg._manager.consolidating import Consolidation
from actrone_pg._manager.context import ManagerContext
from actrone_pg._manager.memories import Memories
from actrone_pg._manager.retrieval import Retrieval
from actrone_pg._manager.sessions import SessionTurns

ROOT = Path(__file__).parent.parent

SCRIPT = textwrap.dedent(
    """
    import asyncio

    import actrone_pg
    import actrone_pg.sync


    async def with_await() -> None:
        async with actrone_pg.create_memory_manager() as mm:
            ctx = await mm.retrieve_context("agent", "session", "what can I cook?", 2000)
            reveal_type(ctx)
            hits = await mm.search_memories("agent", "cooking", limit=5)
            reveal_type(hits)
            reveal_type(hits[0].explain)
            reveal_type(ctx.recent_turns)


    def without_await() -> None:
        with actrone_pg.sync.MemoryManager.create() as mm:
            ctx = mm.retrieve_context("agent", "session", "what can I cook?", 2000)
            reveal_type(ctx)
            hits = mm.search_memories("agent", "cooking", limit=5)
            reveal_type(hits)
            reveal_type(mm.inject_memory("agent", "likes leeks", importance=0.9))
            reveal_type(mm.relevance_threshold)
            mm.store_turn("agent", "session", "hi")  # a missing argument
            mm.search_memories("agent", "cooking", limit="5")  # a wrong type


    asyncio.run(with_await())
    without_await()
    """
)


@pytest.mark.slow
def test_mypy_strict_sees_the_real_types_of_both_managers(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        "strict = True\n"
        f"mypy_path = {ROOT}\n"
        # The package's own modules are checked by scripts/check; here only the script is.
        "follow_imports = silent\n"
        "ignore_missing_imports = True\n",
        encoding="utf-8",
    )
    # A cache of its own (kept between runs: a cold check of the package takes a minute), apart
    # from scripts/check's, whose options differ.
    cache = ROOT / ".mypy_cache" / "public_types"
    out, err, status = mypy_api.run(
        ["--config-file", str(config), "--cache-dir", str(cache), str(script)]
    )
    assert err == ""
    found = re.findall(r"user_script\.py:(\d+): (\w+): (.*)", out)
    lines = SCRIPT.splitlines()
    got = [(lines[int(n) - 1].strip(), kind, _spelled_as_now(text)) for n, kind, text in found]
    assert got == [
        ("reveal_type(ctx)", "note", 'Revealed type is "actrone_pg.models.RetrievedContext"'),
        ("reveal_type(hits)", "note", 'Revealed type is "list[actrone_pg.models.Memory]"'),
        (
            "reveal_type(hits[0].explain)",
            "note",
            'Revealed type is "actrone_pg.models.Explain | None"',
        ),
        (
            "reveal_type(ctx.recent_turns)",
            "note",
            'Revealed type is "list[actrone_pg.models.Turn]"',
        ),
        ("reveal_type(ctx)", "note", 'Revealed type is "actrone_pg.models.RetrievedContext"'),
        ("reveal_type(hits)", "note", 'Revealed type is "list[actrone_pg.models.Memory]"'),
        (
            'reveal_type(mm.inject_memory("agent", "likes leeks", importance=0.9))',
            "note",
            'Revealed type is "str"',
        ),
        ("reveal_type(mm.relevance_threshold)", "note", 'Revealed type is "float"'),
        (
            'mm.store_turn("agent", "session", "hi")  # a missing argument',
            "error",
            'Missing positional argument "assistant_message" in call to "store_turn" of '
            '"MemoryManager"  [call-arg]',
        ),
        (
            'mm.search_memories("agent", "cooking", limit="5")  # a wrong type',
            "error",
            'Argument "limit" to "search_memories" of "MemoryManager" has incompatible type '
            '"str"; expected "int"  [arg-type]',
        ),
    ], out
    assert status == 1  # the two errors above


def _spelled_as_now(text: str) -> str:
    """A message as mypy 2 spells types (older ones say ``builtins.list``, ``Union[X, None]``)."""
    text = text.replace("builtins.", "")
    return re.sub(r"Union\[([\w.\[\]]+), None\]", r"\1 | None", text)


def test_each_public_method_takes_what_its_collaborator_takes() -> None:
    # manager.py writes each signature out; a parameter added to a collaborator's method (or a
    # default changed) must be added there too, and the sync facade regenerated.
    collaborators = (SessionTurns, Memories, Retrieval, Consolidation, ManagerContext)
    compared = set()
    for name, member in vars(MemoryManager).items():
        if name.startswith("_") or not callable(member) or name in {"create", "close"}:
            continue
        (owner,) = [c for c in collaborators if name in vars(c)]
        assert inspect.signature(member) == inspect.signature(getattr(owner, name)), name
        compared.add(name)
    assert {"store_turn", "inject_memory", "retrieve_context", "count_tokens"} <= compared
