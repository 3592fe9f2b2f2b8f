"""The package's shape (docs/architecture.md, "Layers"), read from its source with ``ast``.

A class name defined in two layers makes a traceback ambiguous; a store built as a stack of
mixins hides which module ran; an import circle makes the order modules load in matter.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import actrone_pg

PACKAGE = Path(actrone_pg.__file__).parent

# The one name two modules define on purpose: spec §10's blocking facade of MemoryManager.
SAME_NAME_ON_PURPOSE = {"MemoryManager": {"actrone_pg.manager", "actrone_pg.sync"}}

# Where no class may inherit from the package's own classes: every store.
COMPOSED = ("stores",)


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _imports(name: str, tree: ast.Module, modules: set[str]) -> set[str]:
    """The package's modules ``name`` imports when it loads (not under TYPE_CHECKING, not inside
    functions). Its parent packages are left out: importing a module always loads them."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)

    visit(tree.body)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in modules and m != name and m not in parents}


def test_no_two_modules_define_a_class_of_the_same_name() -> None:
    where: dict[str, set[str]] = defaultdict(set)
    for name, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].add(name)
    twice = {
        cls: sorted(mods)
        for cls, mods in where.items()
        if len(mods) > 1 and SAME_NAME_ON_PURPOSE.get(cls) != mods
    }
    assert twice == {}


def test_no_module_imports_itself_back_through_others() -> None:
    modules = _modules()
    graph = {name: _imports(name, tree, set(modules)) for name, tree in modules.items()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(name: str) -> None:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                circles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name)
    assert circles == []


def test_the_stores_are_composed_not_stacked() -> None:
    """A store is one class holding its state; no class under stores/ inherits from another
    class of the package (a Protocol or an error class is fine)."""
    modules = _modules()
    ours: set[str] = set()
    for tree in modules.values():
        ours.update(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    ours -= {"Protocol"}
    stacked = []
    for name, tree in modules.items():
        rel = name.replace(".", "/").removeprefix("actrone_pg/")
        if not any(rel == c.removesuffix(".py") or rel.startswith(c + "/") for c in COMPOSED):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                inner = [b for b in bases if b in ours and not b.endswith("Error")]
                if inner:
                    stacked.append((name, node.name, inner))
    assert stacked == []


def test_every_store_takes_the_protocols_parameters() -> None:
    """The backends' methods are their modules' functions, forwarded (``actrone_pg._forward``):
    each takes exactly the parameters of the protocol's method, by name and kind."""
    import inspect

    from actrone_pg.stores.base import ContextStore, Store
    from actrone_pg.stores.memory import InMemoryStore
    from actrone_pg.stores.postgres import PostgresStore
    from actrone_pg.stores.redis_qdrant import RedisQdrantStore

    def parameters(method: object) -> list[tuple[str, object]]:
        sig = inspect.signature(method)  # type: ignore[arg-type]
        return [(p.name, p.kind) for p in list(sig.parameters.values())[1:]]

    differ = []
    for protocol in (Store, ContextStore):
        names = [n for n, v in vars(protocol).items() if inspect.isfunction(v) and n[0] != "_"]
        for cls in (InMemoryStore, PostgresStore, RedisQdrantStore):
            if protocol is ContextStore and not hasattr(cls, "fetch_context"):
                continue
            for name in names:
                if parameters(getattr(cls, name)) != parameters(getattr(protocol, name)):
                    differ.append((cls.__name__, name))
    assert differ == []
