"""The parts of the installed SQL that are written from another part of it, and their writer.

The files under ``sql/`` are the text the server installs (:mod:`actrone_pg.migrations._files`).
Two kinds of passage in them are copies, written by this module and checked in as written:

* **The ranking.** Its one source is ``hybrid_search``'s body (the newest ``*_hybrid_search.sql``).
  ``retrieve`` runs it inline, in its own statement, rather than calling
  the SQL function (whose 500 rows would go through a tuplestore of their own, and which Citus
  cannot plan over distributed tables): each holds a copy of the body between the lines
  :data:`RANKING` and :data:`RANKING_END`.
* **retrieve's prepared statement.** Its statement, between :data:`STATEMENT` and
  :data:`STATEMENT_END`, runs as written over the distributed tables; on the worker holding the
  agent's shards the function runs the same statement prepared over those shard tables
  (docs/scale-out.md): the text of that ``PREPARE`` (between ``$prepare$`` quotes, for
  ``format()``), its name's prefix (a digest of that text, so that a session still holding an
  earlier text prepares the new one) and the ``format()`` call that writes its ``EXECUTE`` are
  written from the statement by :func:`prepared` and :func:`execute_call`.

To change the ranking, edit ``hybrid_search``'s file and run ``python -m
actrone_pg.migrations._render``, which writes the copies again; tests/sql/test_installed.py fails
while a copy differs from what this module would write.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from actrone_pg.migrations import _files

__all__ = [
    "PREPARED_TABLES",
    "RANKING",
    "RANKING_END",
    "STATEMENT",
    "STATEMENT_END",
    "execute_call",
    "head_files",
    "prepared",
    "render",
    "render_all",
]

RANKING = "-- ranking: hybrid_search's body, as python -m actrone_pg.migrations._render copies it"
RANKING_END = "-- ranking: end"
STATEMENT = "-- statement: prepared above as python -m actrone_pg.migrations._render writes it"
STATEMENT_END = "-- statement: end"

#: The tables the prepared statement names by their shard on the node (``format()``'s arguments
#: 2 to 7, in this order; argument 1 is the prepared statement's name).
PREPARED_TABLES = ("memories", "turns", "sessions", "agent_stats", "term_stats", "embedders")

_FILE = re.compile(r"^(\d{4})_([a-z_]+)\.sql$")
_PREPARE = re.compile(r"\$prepare\$PREPARE .*?\$prepare\$", re.S)
_NAME = re.compile(r"'actrone_[0-9a-f]{12}_'")
_EXECUTE = re.compile(r"format\('EXECUTE %I\((?:%L, )*%L\)', (v_[a-z_]+)(?:, p_[a-z0-9_]+)*\)")


def head_files() -> dict[str, str]:
    """The newest file of each object the manifest's revisions install: ``{object: file}``."""
    newest: dict[str, str] = {}
    for entry in _files.manifest():
        for filename in entry.objects:
            found = _FILE.match(filename)
            if found:
                newest[found[2]] = filename
    return newest


def body(text: str) -> str:
    """A function's body: its text between ``AS $$`` (or ``AS $fn$``) and the closing quote."""
    opening = re.search(r"\nAS (\$\w*\$)\n", text)
    end = text.rfind("\n" + opening[1]) if opening else -1
    if opening is None or end <= opening.end():
        raise ValueError("no body between AS $$ and $$")
    return text[opening.end() : end]


def render(text: str, ranking: str) -> str:
    """``text`` with its copies written again: each ranking passage from ``ranking`` (the body
    of hybrid_search), and, if it has a statement passage, its prepared statement."""
    pattern = re.compile(rf"^{re.escape(RANKING)}\n.*?^{re.escape(RANKING_END)}$", re.M | re.S)
    text = pattern.sub(lambda _: f"{RANKING}\n{ranking}\n{RANKING_END}", text)
    statements = re.findall(
        rf"^{re.escape(STATEMENT)}\n(.*?)\n{re.escape(STATEMENT_END)}$", text, re.M | re.S
    )
    if not statements:
        return text
    if len(statements) > 1 or len(_PREPARE.findall(text)) != 1 or len(_NAME.findall(text)) != 1:
        raise ValueError("a statement passage is prepared at one $prepare$ text, named once")
    prepare = prepared(text, statements[0])
    text = _PREPARE.sub(lambda _: prepare, text)
    digest = hashlib.sha256(prepare.encode()).hexdigest()[:12]
    text = _NAME.sub(f"'actrone_{digest}_'", text)
    return _EXECUTE.sub(lambda found: execute_call(text, found[1]), text)


def render_all() -> dict[str, str]:
    """``{file: text}`` of every head file that holds a copy, as :func:`render` writes it."""
    head = head_files()
    ranking = body(_files.read(head["hybrid_search"]))
    written = {}
    for filename in head.values():
        text = _files.read(filename)
        if RANKING in text or STATEMENT in text:
            written[filename] = render(text, ranking)
    return written


def prepared(function: str, statement: str) -> str:
    """The ``PREPARE`` text of ``statement``, a statement of ``function`` (a ``CREATE
    FUNCTION`` in PL/pgSQL), quoted for ``format()``.

    Each of the function's parameters and ``p_`` variables (its ``DECLARE``, in order) becomes
    the prepared statement's ``$n`` (parameters first), with its type; each of
    :data:`PREPARED_TABLES`, ``{schema}.<table>``, becomes the ``format()`` argument the
    function passes for it (the name of that table's shard on the node); the statement's name is
    argument 1.
    """
    declared = _declared(function)
    if "%" in statement or "$prepare$" in statement:
        raise ValueError("a prepared statement holds no % and no $prepare$")
    for number, (variable, _) in sorted(enumerate(declared, 1), key=lambda item: -len(item[1][0])):
        statement = re.sub(rf"\b{variable}\b", f"${number}", statement)
    left = re.findall(r"\bp_[a-z0-9_]+\b", statement)
    if left:
        raise ValueError(f"a prepared statement names what the function does not declare: {left}")
    for number, table in enumerate(PREPARED_TABLES, 2):
        statement = re.sub(rf"\{{schema\}}\.{table}\b(?!\()", f"%{number}$s", statement)
    tables = re.findall(r"\{schema\}\.([a-z_]+)\b(?!\()", statement)
    if tables:
        raise ValueError(f"a prepared statement reads tables it has no shard name of: {tables}")
    types = ", ".join(kind for _, kind in declared)
    return f"$prepare$PREPARE %1$I ({types}) AS\n{statement}\n$prepare$"


def execute_call(function: str, name: str) -> str:
    """The ``format()`` call whose value is the ``EXECUTE`` of the prepared statement named by
    variable ``name``, with each of ``function``'s parameters and ``p_`` variables as a literal,
    in the ``$n`` order :func:`prepared` gives them (so the two never disagree)."""
    declared = [variable for variable, _ in _declared(function)]
    placeholders = ", ".join(["%L"] * len(declared))
    arguments = ", ".join([name, *declared])
    return f"format('EXECUTE %I({placeholders})', {arguments})"


def _declared(function: str) -> list[tuple[str, str]]:
    """The parameters, then the ``p_`` variables, of a PL/pgSQL function, with their types."""
    function = function[function.index("CREATE OR REPLACE FUNCTION") :]
    arguments = function[function.index("(") : function.index("\nRETURNS")]
    declare = function[function.index("\nDECLARE\n") : function.index("\nBEGIN\n")]
    found = re.findall(r"^\s+(p_[a-z0-9_]+) ([^,:;\n]+?)\s*(?:,|;|:=|\n|$)", arguments, re.M)
    found += re.findall(r"^\s+(p_[a-z0-9_]+) ([^,:;\n]+?)\s*(?:;|:=)", declare, re.M)
    return [(name, kind.strip()) for name, kind in found]


def main() -> None:
    """Write the copies again (``python -m actrone_pg.migrations._render``)."""
    folder = Path(__file__).resolve().parent / "sql"
    for filename, text in render_all().items():
        path = folder / filename
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
