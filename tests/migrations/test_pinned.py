"""Each revision installs the functions and views it pinned, up and down, on a real server.

``LIVE`` says, for every revision, which pinned copy (``migrations/sql/<rev>_<name>.sql``) of
each function and view the schema holds there, as the revisions' docstrings describe them. The
round trip upgrades an empty schema one revision at a time to head and back down to base and
checks at every step that the schema holds exactly those objects, that installing those copies
again changes nothing in the catalog, and that going down restores exactly what the way up had.
"""

from __future__ import annotations

import pkgutil
import re
from dataclasses import replace
from importlib import import_module
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.migrations import _ops
from actrone_pg.migrations._ops import pinned, pinned_body, pinned_names, with_bodies

VERSIONS = Path(migrations.__file__).parent / "versions"

_AT_0003 = {
    "hybrid_search": "0003",
    "query_terms": "0003",
    "session_overview": "0003",
    "recent_turns": "0003",
    "memory_overview": "0003",
}
#: What LIVE holds for one object: the revision whose pinned copy is installed, or, for a copy
#: installed again around a later body (a new ranking: docs/architecture.md, "A new ranking
#: channel"), ``(that revision, {object: the revision whose body its body line takes})``.
Entry = str | tuple[str, dict[str, str]]
_AT_0021: dict[str, Entry] = _AT_0003 | {
    "hybrid_search": "0019",
    "pack_positions": "0010",
    "memory_versions": "0012",
    "memory_lineage": "0012",
    "agent_retrieve": "0021",
    "retrieve": "0019",
}
#: From 0022 on (0023 changes a table's setting, no object).
_AT_0022: dict[str, Entry] = _AT_0021 | {"agent_write": "0022"}
#: revision -> {object: its entry there}
LIVE: dict[str, dict[str, Entry]] = {
    "0001": {},
    "0002": {},
    "0003": _AT_0003,
    "0004": _AT_0003,
    "0005": _AT_0003 | {"hybrid_search": "0005"},
    "0006": _AT_0003 | {"hybrid_search": "0006"},
    "0007": _AT_0003 | {"hybrid_search": "0007"},
    "0008": _AT_0003 | {"hybrid_search": "0008"},
    "0009": _AT_0003 | {"hybrid_search": "0009"},
    "0010": _AT_0003 | {"hybrid_search": "0009", "pack_positions": "0010"},
    "0011": _AT_0003 | {"hybrid_search": "0011", "pack_positions": "0010"},
    "0012": _AT_0003
    | {
        "hybrid_search": "0011",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
    },
    "0013": _AT_0003
    | {
        "hybrid_search": "0013",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
    },
    "0014": _AT_0003
    | {
        "hybrid_search": "0013",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0014",
    },
    "0015": _AT_0003
    | {
        "hybrid_search": "0013",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0014",
        "retrieve": "0015",
    },
    "0016": _AT_0003
    | {
        "hybrid_search": "0016",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0014",
        "retrieve": "0015",
    },
    "0017": _AT_0003
    | {
        "hybrid_search": "0016",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0017",
        "retrieve": "0015",
    },
    "0018": _AT_0003
    | {
        "hybrid_search": "0018",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0018",
        "retrieve": "0018",
    },
    "0019": _AT_0003
    | {
        "hybrid_search": "0019",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0019",
        "retrieve": "0019",
    },
    "0020": _AT_0003
    | {
        "hybrid_search": "0019",
        "pack_positions": "0010",
        "memory_versions": "0012",
        "memory_lineage": "0012",
        "agent_retrieve": "0020",
        "retrieve": "0019",
    },
    "0021": _AT_0021,
    "0022": _AT_0022,
    "0023": _AT_0022,  # a table setting: no object changes
}
#: hybrid_search's argument count at each revision that has it (0006 and 0007 each add one,
#: 0011 two).
ARITY = {
    "0003": 12,
    "0004": 12,
    "0005": 12,
    "0006": 13,
    "0007": 14,
    "0008": 14,
    "0009": 14,
    "0010": 14,
    "0011": 16,
    "0012": 16,
    "0013": 20,
    "0014": 20,
    "0015": 20,
    "0016": 20,
    "0017": 20,
    "0018": 20,
    "0019": 20,
    "0020": 20,
    "0021": 20,
    "0022": 20,
    "0023": 20,
}
#: hybrid_search's SET clauses (0005 adds enable_nestloop, 0009 plan_cache_mode).
_NESTLOOP = ["jit=off", "enable_nestloop=off"]
_GENERIC = [*_NESTLOOP, "plan_cache_mode=force_generic_plan"]
SETTINGS = {
    "0003": ["jit=off"],
    "0004": ["jit=off"],
    "0005": _NESTLOOP,
    "0006": _NESTLOOP,
    "0007": _NESTLOOP,
    "0008": _NESTLOOP,
    "0009": _GENERIC,
    "0010": _GENERIC,
    "0011": _GENERIC,
    "0012": _GENERIC,
    "0013": _GENERIC,
    "0014": _GENERIC,
    "0015": _GENERIC,
    "0016": _GENERIC,
    "0017": _GENERIC,
    "0018": _GENERIC,
    "0019": _GENERIC,
    "0020": _GENERIC,
    "0021": _GENERIC,
    "0022": _GENERIC,
    "0023": _GENERIC,
}


def _copy(entry: Entry) -> str:
    """The revision of the pinned file an entry installs."""
    return entry if isinstance(entry, str) else entry[0]


def _text(name: str, entry: Entry) -> str:
    """The statement an entry installs, its body lines resolved as the migration resolves them."""
    return pinned(entry, name) if isinstance(entry, str) else pinned(entry[0], name, entry[1])


def _chain() -> list[str]:
    """Every shipped revision, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(VERSIONS.parent))
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


# -- without a server ---------------------------------------------------------------------------


def test_live_covers_every_revision_and_every_pinned_copy() -> None:
    chain = _chain()
    assert list(LIVE) == chain
    assert chain[-1] == migrations.head_revision()
    # A copy is live from its own revision on (until a later one replaces it) ...
    for revision, name in pinned_names():
        assert LIVE[revision][name] == revision, (revision, name)
    # ... and every live copy exists.
    assert {(_copy(e), name) for live in LIVE.values() for name, e in live.items()} == set(
        pinned_names()
    )


def test_each_pinned_copy_is_installed_by_its_own_revision_only() -> None:
    calls: dict[str, set[tuple[str, str]]] = {}
    for path in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"):
        text = path.read_text(encoding="utf-8")
        calls[path.name[:4]] = set(
            re.findall(r'(?:install|replace_function)\("(\d{4})", "([a-z_]+)"[,)]', text)
        )
        # Migrations never read the library's current SQL.
        assert "actrone_pg import sql" not in text and "sql_files" not in text, path.name
    for revision, name in pinned_names():
        assert (revision, name) in calls[revision], (revision, name)
    # Every install names a pinned copy of its own revision (upgrade) or of an older one that
    # LIVE says is in place just below it (downgrade).
    chain = _chain()
    for revision, installs in calls.items():
        below = chain[chain.index(revision) - 1]
        for source, name in installs:
            assert source == revision or _copy(LIVE[below][name]) == source, (revision, name)


def test_pinned_copies_are_one_statement_with_identifier_placeholders_only() -> None:
    for revision, name in pinned_names():
        text = pinned(revision, name)
        assert text.startswith(f"-- Pinned by migration {revision}.")
        assert len(re.findall(r"^CREATE OR REPLACE ", text, flags=re.M)) == 1, name
        assert re.search(rf"^CREATE OR REPLACE (FUNCTION|VIEW) {{schema}}\.{name}\b", text, re.M)
        used = set(re.findall(r"(?<!\{)\{([a-z_]*)\}(?!\})", text))
        assert used <= {"schema", "vector_schema"}, (name, used)
    for bad in ("../0003", "0003/x", "x"):
        with pytest.raises(ValueError):
            pinned(bad, "hybrid_search")


# -- on a server ---------------------------------------------------------------------------------


def _fingerprint(conn: psycopg.Connection[Any], schema: str) -> dict[str, Any]:
    """The schema's functions (full definitions), views, columns and indexes."""
    functions = conn.execute(
        "SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)"
        " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %s ORDER BY 1, 2",
        (schema,),
    ).fetchall()
    views = conn.execute(
        "SELECT viewname, definition FROM pg_views WHERE schemaname = %s ORDER BY 1", (schema,)
    ).fetchall()
    columns = conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default, collation_name"
        " FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
        (schema,),
    ).fetchall()
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1", (schema,)
    ).fetchall()
    return {"functions": functions, "views": views, "columns": columns, "indexes": indexes}


def _objects(fingerprint: dict[str, Any]) -> set[str]:
    return {row[0] for row in fingerprint["functions"]} | {row[0] for row in fingerprint["views"]}


def _hybrid_search(conn: psycopg.Connection[Any], schema: str) -> tuple[int, list[str]]:
    row = conn.execute(
        "SELECT p.pronargs, p.proconfig FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %s AND p.proname = 'hybrid_search'",
        (schema,),
    ).fetchone()
    assert row is not None
    return int(row[0]), list(row[1])


def _reinstalled(conn: psycopg.Connection[Any], schema: str, live: dict[str, Entry]) -> Any:
    """The fingerprint after installing ``live``'s copies again (rolled back)."""
    vector_schema = conn.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
        " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    assert vector_schema is not None
    with conn.transaction(force_rollback=True):
        for name, entry in live.items():
            conn.execute(
                sql.SQL(_text(name, entry)).format(
                    schema=sql.Identifier(schema), vector_schema=sql.Identifier(vector_schema[0])
                )
            )
        return _fingerprint(conn, schema)


@pytest.mark.postgres
@pytest.mark.slow
def test_every_revision_holds_what_it_pinned_up_to_head_and_down_to_base(
    postgres_dsn: str, scratch_schema: str
) -> None:
    chain = _chain()
    seen: dict[str, Any] = {}
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for revision in chain:
            migrations.migrate(postgres_dsn, scratch_schema, revision=revision)
            fingerprint = _fingerprint(conn, scratch_schema)
            assert _objects(fingerprint) == set(LIVE[revision]), revision
            assert _reinstalled(conn, scratch_schema, LIVE[revision]) == fingerprint, revision
            if "hybrid_search" in LIVE[revision]:
                arity, settings = _hybrid_search(conn, scratch_schema)
                assert (arity, settings) == (ARITY[revision], SETTINGS[revision]), revision
            seen[revision] = fingerprint
        assert migrations.current_revision(postgres_dsn, scratch_schema) == chain[-1]

        for revision in reversed(chain[:-1]):
            migrations.downgrade(postgres_dsn, scratch_schema, revision=revision)
            assert migrations.current_revision(postgres_dsn, scratch_schema) == revision
            assert _fingerprint(conn, scratch_schema) == seen[revision], revision
        migrations.downgrade(postgres_dsn, scratch_schema, revision="base")
        assert migrations.current_revision(postgres_dsn, scratch_schema) is None
        base = _fingerprint(conn, scratch_schema)
        # Only the version table is left (empty), in the schema the migrations created.
        assert base["functions"] == base["views"] == []
        assert {row[0] for row in base["columns"]} == {migrations.VERSION_TABLE}
        assert [row[0] for row in base["indexes"]] == [migrations.VERSION_TABLE + "_pkc"]

        migrations.migrate(postgres_dsn, scratch_schema)
        assert _fingerprint(conn, scratch_schema) == seen[chain[-1]]


def _store_statements() -> dict[str, str]:
    """Every statement the PostgreSQL store keeps as a module constant, by name."""
    package = import_module("actrone_pg.stores.postgres")
    modules = [package]
    if hasattr(package, "__path__"):  # a package of modules by concern
        modules += [
            import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        ]
    found: dict[str, str] = {}
    for module in modules:
        for name, value in vars(module).items():
            texts = value if isinstance(value, list | tuple) else [value]
            for i, text in enumerate(texts):
                if not isinstance(text, str) or "{s}." not in text:
                    continue
                first = text.split(None, 1)[0].upper()
                if first in {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE"}:
                    found[f"{module.__name__}.{name}[{i}]"] = text
    return found


def _built_statements(schema: str) -> dict[str, tuple[sql.Composed, dict[str, Any]]]:
    """The statements the builders compose, in each of their shapes: a search without a filter,
    with an agent's HNSW index, and with every filter key at once (packed and not); a listing
    without and with a keyset and every filter key."""
    from datetime import UTC, datetime

    import numpy as np

    from actrone_pg.filters import FILTERS, MemoryFilter
    from actrone_pg.pipeline import SearchRequest
    from actrone_pg.ranking import RankingParams
    from actrone_pg.stores.postgres import builders
    from tests.helpers import filter_examples

    now = datetime(2026, 1, 1, tzinfo=UTC)
    values = filter_examples()
    assert set(values) == set(FILTERS), "give the new filter key a value in tests/helpers.py"
    every = MemoryFilter(**values)
    request = SearchRequest(
        agent_id="a",
        query="q",
        terms=("q",),
        vector=np.ones(4, dtype=np.float32),
        embedder="e",
        threshold=0.5,
        limit=10,
        params=RankingParams(),
        now=now,
    )
    out: dict[str, tuple[sql.Composed, dict[str, Any]]] = {}
    for packed in (False, True):
        base = replace(request, budget=100) if packed else request
        for shape, req, ann in (
            ("exact", base, None),
            ("ann", base, 4),
            ("filtered", replace(base, filter=every), None),
        ):
            out[f"search {shape} packed={packed}"] = builders.search(
                req, schema=schema, vector_schema="public", terms=["q"], ann_dimensions=ann
            )
    for session in (None, ("s", 50, 86400.0)):
        out[f"retrieve session={session is not None}"] = builders.retrieve(
            replace(request, budget=100), schema=schema, terms=["q"], session=session
        )
    # A schema distributed with Citus: agent_retrieve (0014) and the router queries before it
    # (on one server they resolve the same way).
    for shape, candidates, stats in (("exact", None, None), ("given", ["m"], (3, 30, [1]))):
        out[f"agent_retrieve {shape}"] = builders.agent_retrieve(
            replace(request, budget=100),
            schema=schema,
            terms=["q"],
            session=("s", 50, 86400.0),
            candidates=candidates,
            stats=stats,
        )
    out["filtered_inputs"] = builders.filtered_inputs(
        replace(request, filter=every), schema=schema, vector_schema="public", terms=["q"]
    )
    out["ann_ids"] = builders.ann_ids(request, schema=schema, vector_schema="public", dimensions=4)
    for after, flt in ((None, None), ((now, "m"), every)):
        out[f"list_memories after={after is not None}"] = builders.list_memories(
            schema, "a", now=now, limit=10, after=after, flt=flt
        )
    return out


@pytest.mark.postgres
def test_head_serves_every_statement_of_the_store(postgres_dsn: str, postgres_schema: str) -> None:
    """The server resolves each of the store's statements against the migrated head.

    PREPARE parses and analyses a statement without running it: a function the head lacks, an
    argument list it does not take, or a column its result does not have fails here. The short
    statements are the module constants (positional parameters); the search and the listing are
    what the builders compose (named parameters, each bound once).
    """
    schema = sql.Identifier(postgres_schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        probes: list[tuple[str, str]] = []
        for name, text in _store_statements().items():
            if "%(" in text:
                continue  # composed by the builders, probed below
            assert "{" not in text.replace("{s}", ""), name
            query = sql.SQL(text).format(s=schema).as_string(conn)
            pieces = query.split("%s")
            probes.append(
                (name, pieces[0] + "".join(f"${i}{p}" for i, p in enumerate(pieces[1:], 1)))
            )
        built = _built_statements(postgres_schema)
        # The functions the migrations install are among what is checked.
        texts = [statement.as_string(conn) for statement, _ in built.values()]
        for function in ("hybrid_search(", "pack_positions("):
            assert any(function in text for text in texts), function
        for (name, (_, params)), query in zip(built.items(), texts, strict=True):
            assert "%s" not in query and "{" not in query.replace("'{}'", ""), name
            numbers = {p: i for i, p in enumerate(params, 1)}
            used = set(re.findall(r"%\((\w+)\)s", query))
            # Every parameter given is used, and every one used is given.
            assert used == set(params), (name, used ^ set(params))
            numbered = re.sub(r"%\((\w+)\)s", lambda m, n=numbers: f"${n[m.group(1)]}", query)
            probes.append((name, numbered))
        for name, query in probes:
            assert "%%" not in query, name
            conn.execute(sql.SQL("PREPARE actrone_probe AS ") + sql.SQL(query))  # type: ignore[arg-type]
            conn.execute("DEALLOCATE actrone_probe")


def test_the_ranking_is_written_once_at_head() -> None:
    """At head the fusion is written in one pinned file: agent_retrieve (0017) and retrieve
    (0018) take hybrid_search's body verbatim instead of a copy of their own."""
    from importlib import resources

    head = LIVE[_chain()[-1]]
    folder = resources.files("actrone_pg.migrations").joinpath("sql")
    raw = {
        name: folder.joinpath(f"{_copy(e)}_{name}.sql").read_text(encoding="utf-8")
        for name, e in head.items()
    }
    fusion = "p_rrf_weights[1] / (p_rrf_k + "
    assert [name for name, text in raw.items() if fusion in text] == ["hybrid_search"]
    body = pinned_body(_copy(head["hybrid_search"]), "hybrid_search")
    assert body.startswith("WITH\n") and body.rstrip().endswith("f.id")
    for entry in ("agent_retrieve", "retrieve"):
        assert body in _text(entry, head[entry]), entry
        assert "{{body" not in _text(entry, head[entry]), entry


def test_a_copy_takes_only_an_older_copys_body() -> None:
    body = pinned_body("0016", "hybrid_search")
    assert with_bodies("0017", "x", "a\n{{body 0016_hybrid_search}}\nb") == f"a\n{body}\nb"
    for line in ("{{body 0018_hybrid_search}}", "{{body 0017_x}}"):
        with pytest.raises(ValueError):
            with_bodies("0017", "x", line)


def test_a_later_revision_installs_an_older_copy_around_its_own_body() -> None:
    # How a new ranking is one new hybrid_search copy: 0019's entry functions, installed again
    # with their body line naming that copy (here 0018's, standing in for a later one).
    for entry in ("retrieve", "agent_retrieve"):
        text = pinned("0019", entry, {"hybrid_search": "0018"})
        assert text == _text(entry, ("0019", {"hybrid_search": "0018"}))  # as LIVE says it
        assert pinned_body("0018", "hybrid_search") in text, entry
        assert pinned_body("0019", "hybrid_search") not in text, entry
    with pytest.raises(ValueError):
        pinned("0019", "hybrid_search", {"hybrid_search": "0018"})  # it has no body line


_FUNCTION = """CREATE OR REPLACE FUNCTION {schema}.f(
    p_agent_id text,
    p_limit integer
)
RETURNS TABLE (id text)
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    p_excluded text[];
    v_other text;
BEGIN
END
$fn$"""


def test_a_prepared_block_names_parameters_by_number_and_tables_by_shard() -> None:
    statement = (
        "SELECT m.id FROM {schema}.memories AS m JOIN {schema}.turns AS t ON true"
        " WHERE m.agent_id = p_agent_id AND NOT m.id = ANY (p_excluded)"
        " AND {schema}.pack_positions(p_limit) IS NOT NULL LIMIT p_limit"
    )
    text = _ops.prepared(_FUNCTION, statement)
    assert text.startswith("$prepare$PREPARE %1$I (text, integer, text[]) AS\n")
    assert text.endswith("\n$prepare$")
    assert "FROM %2$s AS m JOIN %3$s AS t" in text
    assert "m.agent_id = $1 AND NOT m.id = ANY ($3)" in text
    assert "{schema}.pack_positions($2)" in text and text.count("$2") == 2
    assert "p_" not in text


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1 FROM {schema}.agents",  # a table with no shard name among the arguments
        "SELECT p_other",  # not the function's
        "SELECT 'a%b'",  # would be read by format()
        "SELECT $prepare$x$prepare$",  # would end the quoted statement
    ],
)
def test_a_prepared_block_refuses_what_format_cannot_carry(statement: str) -> None:
    with pytest.raises(ValueError):
        _ops.prepared(_FUNCTION, statement)


def test_head_agent_retrieve_prepares_the_whole_call_with_every_parameter() -> None:
    text = pinned("0021", "agent_retrieve")
    prepare = text[text.index("$prepare$PREPARE") : text.rindex("$prepare$")]
    assert prepare.split(" AS\n")[0].count(",") == 24  # 23 parameters, p_content, p_excluded
    assert re.findall(r"%(\d)\$s", prepare) and {
        int(n) for n in re.findall(r"%(\d)\$s", prepare)
    } == set(range(2, 8))
    assert not re.search(r"\bp_[a-z_]+", prepare)
    assert not re.search(r"\{\{(prepared|statement|body)", text)


def test_a_prepared_statement_is_named_by_its_text() -> None:
    # A session that prepared the statement of an earlier ranking runs the new one after a
    # migration that installs 0020's copy around a new body: the names differ.
    def prefix(text: str) -> str:
        (found,) = re.findall(r"'(actrone_[0-9a-f]{12}_)' \|\| v_memories", text)
        return found

    head = pinned("0021", "agent_retrieve")
    assert prefix(head) == prefix(pinned("0021", "agent_retrieve"))
    assert prefix(head) != prefix(pinned("0021", "agent_retrieve", {"hybrid_search": "0018"}))
    assert prefix(head) != prefix(pinned("0020", "agent_retrieve"))
    with pytest.raises(ValueError):
        with_bodies("0020", "x", "{{prepared_name}}")  # a name with no statement


def test_the_execute_passes_the_values_in_the_prepared_order() -> None:
    # 0020 wrote the EXECUTE's argument list by hand; 0021's is written from the same list the
    # PREPARE's $n come from, so a parameter added or moved cannot shift the values.
    text = pinned("0021", "agent_retrieve")
    (call,) = re.findall(r"v_call := format\('EXECUTE %I\(([%L, ]+)\)', ([^;]+)\);", text)
    placeholders, arguments = call
    names = [a.strip() for a in arguments.split(",")]
    assert names[0] == "v_statement"
    assert names[1:] == [name for name, _ in _ops._declared(text)]
    prepare = text[text.index("$prepare$PREPARE") : text.rindex("$prepare$")]
    types = prepare.split(" AS\n")[0]
    assert placeholders.count("%L") == len(names) - 1 == types.count(",") + 1


@pytest.mark.parametrize(
    "text",
    [
        "{{prepared_execute v_name}}",  # an EXECUTE of no statement
        _FUNCTION + "{{statement\nSELECT p_limit\n}}\n{{prepared}}\n{{prepared_name}}\n"
        "{{prepared_execute v_a}}\n{{prepared_execute v_b}}",  # two of one statement
    ],
)
def test_a_prepared_execute_needs_its_one_statement(text: str) -> None:
    with pytest.raises(ValueError):
        with_bodies("0021", "x", text)


def test_a_prepared_execute_lists_the_declared_values() -> None:
    text = _FUNCTION + (
        "\n{{statement\nSELECT p_limit\n}}\n{{prepared}}\n{{prepared_name}}\n"
        "{{prepared_execute v_other}}"
    )
    written = with_bodies("0021", "x", text)
    assert "format('EXECUTE %I(%L, %L, %L)', v_other, p_agent_id, p_limit, p_excluded)" in written
