"""The blocking MemoryManager: generated from the async one, usable from threads and from running
event loops."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
import textwrap
import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import actrone_pg
from actrone_pg import ManagerClosedError, ManagerUsageError, MemoryConfig, ValidationError
from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg.stores.memory import InMemoryStore
from actrone_pg.sync import MemoryManager, create_memory_manager
from tests.helpers import FixedEmbedder, SlowStore

CFG = MemoryConfig(backend="memory", embedding_provider="hashing")


def public_coroutines(cls: type) -> dict[str, object]:
    out = {}
    for name, member in inspect.getmembers_static(cls):
        if isinstance(member, classmethod):
            member = member.__func__
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            out[name] = member
    return out


def test_every_public_coroutine_has_a_blocking_twin_with_its_signature_and_docstring() -> None:
    methods = public_coroutines(AsyncMemoryManager)
    # a sample of the contract, so that an empty derivation cannot pass
    assert {"create", "close", "store_turn", "retrieve_context", "inject_memories"} <= set(methods)
    for name in methods:
        twin = getattr(MemoryManager, name)
        original = getattr(AsyncMemoryManager, name)
        assert not inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin).parameters == inspect.signature(original).parameters, name
        if name not in {"create", "close"}:  # these two also own the loop thread
            assert inspect.signature(twin) == inspect.signature(original), name
            assert twin.__doc__ == original.__doc__, name
    assert MemoryManager.create.__doc__ == AsyncMemoryManager.create.__doc__
    assert (
        inspect.signature(create_memory_manager).parameters
        == inspect.signature(AsyncMemoryManager.create).parameters
    )


ROOT = Path(__file__).parent.parent


def generator() -> ModuleType:
    """scripts/async_to_sync.py, imported."""
    path = ROOT / "scripts" / "async_to_sync.py"
    spec = importlib.util.spec_from_file_location("async_to_sync", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_sync_module_is_what_the_script_writes() -> None:
    manager = (ROOT / "actrone_pg" / "manager.py").read_text(encoding="utf-8")
    checked_in = (ROOT / "actrone_pg" / "sync.py").read_text(encoding="utf-8")
    assert generator().generate(manager) == checked_in, (
        "actrone_pg/sync.py is out of date: run python scripts/async_to_sync.py"
    )


def test_a_method_added_to_the_async_manager_is_generated_in_the_sync_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def shout(self: AsyncMemoryManager, text: str, *, times: int = 2) -> str:
        """Repeat ``text``."""
        return text.upper() * times

    added = textwrap.indent(
        textwrap.dedent(
            '''
            async def shout(self, text: str, *, times: int = 2) -> str:
                """Repeat ``text``."""
                return text.upper() * times

            async def _hidden(self) -> None: ...

            @property
            def loud(self) -> bool:
                """Always."""
                return True
            '''
        ),
        "    ",
    )
    manager = (ROOT / "actrone_pg" / "manager.py").read_text(encoding="utf-8")
    anchor = "    # -- no I/O --\n"
    assert anchor in manager
    text = generator().generate(manager.replace(anchor, added + anchor))
    assert "_hidden" not in text
    # The generated module, run against an async manager that has the new method.
    monkeypatch.setattr(AsyncMemoryManager, "shout", shout, raising=False)
    monkeypatch.setattr(AsyncMemoryManager, "loud", property(lambda self: True), raising=False)
    namespace: dict[str, Any] = {"__name__": "generated_sync"}
    exec(compile(text, "generated sync.py", "exec"), namespace)
    generated = namespace["MemoryManager"]
    got, want = inspect.signature(generated.shout), inspect.signature(shout)
    assert list(got.parameters.values())[1:] == list(want.parameters.values())[1:]
    assert got.return_annotation == want.return_annotation == "str"
    assert generated.shout.__doc__ == shout.__doc__ and generated.loud.__doc__ == "Always."
    with generated.create(CFG, store=InMemoryStore()) as mm:
        assert mm.shout("ab", times=3) == "ABABAB"
        assert mm.loud is True


def test_properties_and_plain_methods_are_forwarded() -> None:
    with create_memory_manager(CFG, embedder=FixedEmbedder(), store=InMemoryStore()) as mm:
        assert mm.backend == "memory"
        assert mm.relevance_threshold == mm.async_manager.relevance_threshold
        assert mm.count_tokens("abcdefgh") == 2  # ceil(8 / 4)
    assert MemoryManager.relevance_threshold.__doc__ == (
        AsyncMemoryManager.relevance_threshold.__doc__
    )


def roundtrip(mm: MemoryManager) -> None:
    turn = mm.store_turn("a1", "s1", "Plan dinner?", "Sure, for how many?")
    assert turn.token_count == 8  # ceil(12 / 4) + ceil(19 / 4)
    mid = mm.inject_memory("a1", "The user is allergic to peanuts", importance=0.9)
    assert mm.get_memory("a1", mid) is not None
    ctx = mm.retrieve_context("a1", "s1", "peanuts allergic", token_budget=2000)
    assert [t.id for t in ctx.recent_turns] == [turn.id]
    assert [m.id for m in ctx.episodic_memories] == [mid]
    assert [m.id for m in mm.search_memories("a1", "allergic peanuts")] == [mid]
    assert mm.delete_memory("a1", mid) is True
    assert mm.get_memory("a1", mid) is None


def test_from_plain_code() -> None:
    mm = MemoryManager.create(CFG, store=InMemoryStore())
    try:
        roundtrip(mm)
    finally:
        mm.close()
    mm.close()  # twice is fine
    with pytest.raises(ManagerClosedError, match="closed: create a new one") as info:
        mm.get_recent_turns("a1", "s1")
    # one of the package's errors, and still the RuntimeError it was before it had a class
    assert isinstance(info.value, actrone_pg.ActroneError) and isinstance(info.value, RuntimeError)


class CallsBack(InMemoryStore):
    """A store whose L1 read calls the sync manager that runs it, as a careless plug-in might."""

    manager: MemoryManager | None = None

    async def recent_turns(self, *args: Any, **kwargs: Any) -> Any:
        if self.manager is not None:
            self.manager.get_memory("a1", "m1")  # blocking, on the loop that runs this very call
        return await super().recent_turns(*args, **kwargs)


def test_a_call_from_its_own_event_loop_is_a_typed_error() -> None:
    store = CallsBack()
    with create_memory_manager(CFG, store=store) as mm:
        store.manager = mm
        with pytest.raises(ManagerUsageError, match="its own event loop") as info:
            mm.get_recent_turns("a1", "s1")
        assert isinstance(info.value, RuntimeError)
        assert not isinstance(info.value, ManagerClosedError)
        store.manager = None
        assert mm.get_recent_turns("a1", "s1") == []  # the manager still serves


async def test_from_inside_a_running_event_loop() -> None:
    # What a Jupyter cell is: code on a thread whose event loop is running.
    asyncio.get_running_loop()
    coro = asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        asyncio.run(coro)  # what a naive blocking wrapper would do
    coro.close()
    with create_memory_manager(CFG, store=InMemoryStore()) as mm:
        roundtrip(mm)


def test_errors_come_through_unchanged() -> None:
    with create_memory_manager(CFG, store=InMemoryStore()) as mm:
        with pytest.raises(ValidationError, match="token_budget") as info:
            mm.retrieve_context("a1", "s1", "q", token_budget=0)
        assert isinstance(info.value, actrone_pg.ActroneError)
        with pytest.raises(ValidationError):
            mm.store_turn("", "s1", "hi", "hello")
        assert mm.get_recent_turns("a1", "s1") == []  # nothing written


def test_a_failed_create_raises_its_error_and_leaves_no_thread() -> None:
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(actrone_pg.ConfigurationError, match="config"):
        MemoryManager.create("not a config")  # type: ignore[arg-type]
    leftover = [
        t
        for t in threading.enumerate()
        if t.ident not in before and t.name == "actrone-pg-sync-loop"
    ]
    assert leftover == []


def test_close_stops_the_loop_thread() -> None:
    mm = MemoryManager.create(CFG, store=InMemoryStore())
    thread = mm._runner._thread
    assert thread.is_alive()
    mm.close()
    assert not thread.is_alive()
    assert mm._runner.loop.is_closed()


class BlockingRead(SlowStore):
    """A store whose L1 read says when it has started, then takes its time."""

    def __init__(self) -> None:
        super().__init__(InMemoryStore(), delay=30.0)
        self.started = threading.Event()

    async def recent_turns(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        return await super().recent_turns(*args, **kwargs)


def test_close_while_another_thread_waits_ends_its_call() -> None:
    store = BlockingRead()
    mm = MemoryManager.create(CFG, store=store)
    outcome: list[BaseException] = []

    def wait_for_turns() -> None:
        try:
            mm.get_recent_turns("a1", "s1")
        except BaseException as exc:
            outcome.append(exc)

    # a daemon thread: if the call were left waiting for a stopped loop, the test fails below
    waiter = threading.Thread(target=wait_for_turns, daemon=True)
    waiter.start()
    assert store.started.wait(timeout=30)
    mm.close()
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], CancelledError)


def test_many_threads_at_once() -> None:
    threads, turns_each = 8, 25
    with create_memory_manager(CFG.replace(max_session_turns=1000), store=InMemoryStore()) as mm:

        def work(i: int) -> int:
            for j in range(turns_each):
                mm.store_turn("a1", f"s{i}", f"question {j}", f"answer {j}")
                mm.inject_memory("a1", f"fact {i} {j}")
            return len(mm.get_recent_turns("a1", f"s{i}", limit=1000))

        with ThreadPoolExecutor(threads) as pool:
            counts = list(pool.map(work, range(threads)))
        assert counts == [turns_each] * threads
        assert mm.count_memories("a1") == threads * turns_each
        # each session's turns in the order its thread wrote them
        turns = mm.get_recent_turns("a1", "s3", limit=1000)
        assert [t.user_message for t in turns] == [f"question {j}" for j in range(turns_each)]


@pytest.mark.postgres
async def test_postgres_from_a_running_loop_and_threads(
    postgres_dsn: str, scratch_schema: str
) -> None:
    # The connection pool belongs to the manager's own loop, not to the caller's.
    cfg = MemoryConfig(
        backend="postgres",
        postgres_dsn=postgres_dsn,
        postgres_schema=scratch_schema,
        embedding_provider="hashing",
    )
    with create_memory_manager(cfg) as mm:
        roundtrip(mm)
        with ThreadPoolExecutor(4) as pool:
            turns = list(
                pool.map(lambda i: mm.store_turn("a2", "s", f"q{i}", f"a{i}").id, range(20))
            )
        assert {t.id for t in mm.get_recent_turns("a2", "s")} == set(turns)


def test_the_readme_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    match = re.search(r"### Without `await`.*?```python\n(.*?)```", readme, re.S)
    assert match is not None
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")
    exec(compile(match.group(1), "README sync example", "exec"), {"__name__": "sync_example"})
    assert capsys.readouterr().out == "['Plan dinner?']\n"
