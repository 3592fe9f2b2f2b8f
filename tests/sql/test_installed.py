"""The functions and views read as installed: the files under ``actrone_pg/migrations/sql/`` are
what the server holds (``\\sf``, ``\\sv`` in psql, the schema's name aside), and the passages
copied in them (the ranking, retrieve's prepared statement) are what ``_render`` writes.

:func:`installed_differences` is shared with the Citus tests, which run it on every node.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg.migrations import _files, _render

_OBJECT = re.compile(r"^CREATE OR REPLACE (FUNCTION|VIEW) \{schema\}\.([a-z_]+)", re.M)


def head_objects() -> dict[str, tuple[str, str]]:
    """``{object: (FUNCTION or VIEW, file text)}`` of the newest file of each object."""
    out = {}
    for name, filename in _render.head_files().items():
        text = _files.read(filename)
        found = _OBJECT.search(text)
        assert found and found[2] == name, filename
        out[name] = (found[1], text)
    return out


def installed_differences(dsn: str, schema: str, *, every_node: bool = False) -> list[str]:
    """What differs between the head files and ``schema``'s functions and views at ``dsn``:
    a missing or extra object, a function whose body (``prosrc``) is not the file's, a view
    whose definition changes when the file's is installed over it. With ``every_node`` (a
    Citus coordinator), each function's body is read on every node."""
    problems = []
    objects = head_objects()
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
            " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        ).fetchone()
        assert row is not None
        vectors = str(row[0])
        present = conn.execute(
            "SELECT p.proname::text, 'FUNCTION' FROM pg_proc AS p JOIN pg_namespace AS n"
            " ON n.oid = p.pronamespace WHERE n.nspname = %s"
            " UNION ALL SELECT c.relname::text, 'VIEW' FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'v'",
            (schema, schema),
        ).fetchall()
        expected = sorted((name, kind) for name, (kind, _) in objects.items())
        if sorted((str(r[0]), str(r[1])) for r in present) != expected:
            problems.append(f"objects: {sorted(present)} != {expected}")
        for name, (kind, text) in objects.items():
            filled = _files.fill(text, schema, vectors)
            if kind == "FUNCTION":
                for where, body in _bodies(conn, schema, name, every_node=every_node):
                    # The server keeps the line breaks after AS $$ and before $$.
                    if body != "\n" + _render.body(filled) + "\n":
                        problems.append(f"{name} on {where}: its body is not the file's")
            else:
                problems.extend(_view_difference(conn, schema, name, filled))
    return problems


def _bodies(
    conn: psycopg.Connection[Any], schema: str, name: str, *, every_node: bool
) -> list[tuple[str, str]]:
    query = sql.SQL(
        "SELECT p.prosrc FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE n.nspname = {} AND p.proname = {}"
    ).format(sql.Literal(schema), sql.Literal(name))
    if not every_node:
        return [("the server", str(r[0])) for r in conn.execute(query).fetchall()]
    rows = conn.execute(
        "SELECT nodeid::text, result FROM run_command_on_all_nodes(%s)", (query.as_string(conn),)
    ).fetchall()
    return [(f"node {r[0]}", str(r[1])) for r in rows]


def _view_difference(
    conn: psycopg.Connection[Any], schema: str, name: str, filled: str
) -> list[str]:
    """The view's definition as installed, against the file's installed over it (rolled back):
    the server stores a view parsed, so the two are compared as it prints them."""
    view = sql.Identifier(schema, name).as_string(conn)
    (before,) = conn.execute("SELECT pg_get_viewdef(%s::regclass)", (view,)).fetchone() or ("",)
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(filled.encode())
            (after,) = conn.execute("SELECT pg_get_viewdef(%s::regclass)", (view,)).fetchone() or (
                "",
            )
    except psycopg.errors.InvalidTableDefinition:
        after = None  # its columns are not the file's
    return [] if before == after else [f"{name}: the view is not the file's"]


def test_every_copy_is_what_render_writes() -> None:
    written = _render.render_all()
    head = _render.head_files()
    assert set(written) == {head["retrieve"]}
    for filename, text in written.items():
        assert _files.read(filename) == text, (
            f"{filename} differs from what `python -m actrone_pg.migrations._render` writes"
        )


def test_the_ranking_is_written_once() -> None:
    objects = head_objects()
    ranking = _render.body(objects["hybrid_search"][1])
    assert ranking.startswith("WITH\n") and ranking.rstrip().endswith("f.id")
    passage = f"{_render.RANKING}\n{ranking}\n{_render.RANKING_END}"
    fusion = "p_rrf_weights[1] / (p_rrf_k + "
    for name, (_, text) in objects.items():
        # Outside the copied passages (and the prepared text written from them), no fusion.
        outside = re.sub(
            r"\$prepare\$PREPARE .*?\$prepare\$", "", text.replace(passage, ""), flags=re.S
        )
        assert (fusion in outside) == (name == "hybrid_search"), name
    assert objects["retrieve"][1].count(passage) == 1


def test_a_changed_ranking_reaches_every_copy_and_renames_the_prepared_statement() -> None:
    objects = head_objects()
    ranking = _render.body(objects["hybrid_search"][1])
    changed = ranking + "\n-- a new channel"
    text = objects["retrieve"][1]
    rendered = _render.render(text, changed)
    assert rendered.count(changed) == 1
    assert "-- a new channel\n" in rendered[rendered.index("$prepare$PREPARE") :]

    def prefix(text: str) -> str:
        (found,) = re.findall(r"'(actrone_[0-9a-f]{12}_)' \|\| v_memories", text)
        return found

    assert prefix(rendered) != prefix(text)
    assert _render.render(rendered, ranking) == text  # and back


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


def test_a_prepared_statement_names_parameters_by_number_and_tables_by_shard() -> None:
    statement = (
        "SELECT m.id FROM {schema}.memories AS m JOIN {schema}.turns AS t ON true"
        " WHERE m.agent_id = p_agent_id AND NOT m.id = ANY (p_excluded)"
        " AND {schema}.pack_positions(p_limit) IS NOT NULL LIMIT p_limit"
    )
    text = _render.prepared(_FUNCTION, statement)
    assert text.startswith("$prepare$PREPARE %1$I (text, integer, text[]) AS\n")
    assert text.endswith("\n$prepare$")
    assert "FROM %2$s AS m JOIN %3$s AS t" in text
    assert "m.agent_id = $1 AND NOT m.id = ANY ($3)" in text
    assert "{schema}.pack_positions($2)" in text and text.count("$2") == 2
    assert "p_" not in text
    assert _render.execute_call(_FUNCTION, "v_other") == (
        "format('EXECUTE %I(%L, %L, %L)', v_other, p_agent_id, p_limit, p_excluded)"
    )


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1 FROM {schema}.agents",  # a table with no shard name among the arguments
        "SELECT p_other",  # not the function's
        "SELECT 'a%b'",  # would be read by format()
        "SELECT $prepare$x$prepare$",  # would end the quoted statement
    ],
)
def test_a_prepared_statement_refuses_what_format_cannot_carry(statement: str) -> None:
    with pytest.raises(ValueError):
        _render.prepared(_FUNCTION, statement)


def test_retrieve_prepares_the_whole_call_and_executes_it_in_the_same_order() -> None:
    text = head_objects()["retrieve"][1]
    prepare = text[text.index("$prepare$PREPARE") : text.rindex("$prepare$")]
    types = prepare.split(" AS\n")[0]
    # 21 parameters, p_content, p_candidates, p_excluded, p_n_docs, p_total_length, p_doc_freqs
    assert types.count(",") == 26
    assert {int(n) for n in re.findall(r"%(\d)\$s", prepare)} == set(range(2, 8))
    assert not re.search(r"\bp_[a-z_]+", prepare)
    (call,) = re.findall(r"v_call := format\('EXECUTE %I\(([%L, ]+)\)', ([^;]+)\);", text)
    placeholders, arguments = call
    names = [a.strip() for a in arguments.split(",")]
    assert names[0] == "v_statement"
    assert names[1:] == [name for name, _ in _render._declared(text)]
    assert placeholders.count("%L") == len(names) - 1 == types.count(",") + 1


@pytest.mark.postgres
def test_the_server_holds_the_files(postgres_dsn: str, postgres_schema: str) -> None:
    assert installed_differences(postgres_dsn, postgres_schema) == []


@pytest.mark.postgres
def test_a_changed_body_is_seen(postgres_dsn: str, scratch_schema: str) -> None:
    from actrone_pg import migrations

    migrations.migrate(postgres_dsn, scratch_schema)
    assert installed_differences(postgres_dsn, scratch_schema) == []
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        s = sql.Identifier(scratch_schema)
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}.query_terms(p_query text) RETURNS text[]"
                " LANGUAGE sql AS $$ SELECT ARRAY[p_query] $$"
            ).format(s)
        )
        conn.execute(sql.SQL("DROP VIEW {}.recent_turns").format(s))
        conn.execute(sql.SQL("CREATE VIEW {}.recent_turns AS SELECT * FROM {}.turns").format(s, s))
    assert installed_differences(postgres_dsn, scratch_schema) == [
        "query_terms on the server: its body is not the file's",
        "recent_turns: the view is not the file's",
    ]


def test_a_later_revision_s_copy_becomes_the_head(monkeypatch: pytest.MonkeyPatch) -> None:
    # How pinning goes on after the baseline: a revision lists its own copies of what it
    # changes; the newest copy of each object is the head, the baseline's stay as they were.
    baseline = _files.revision("0024")
    later = _files.Revision(
        revision="0025",
        down_revision="0024",
        tables=(),
        objects=("0025_hybrid_search.sql", "0025_retrieve.sql"),
        citus=(),
    )
    monkeypatch.setattr(_files, "manifest", lambda: (baseline, later))
    head = _render.head_files()
    assert head["hybrid_search"] == "0025_hybrid_search.sql"
    assert head["retrieve"] == "0025_retrieve.sql"
    assert head["agent_write"] == "0024_agent_write.sql"
    assert len(head) == len(baseline.objects)
