"""Distribution with Citus: every per-agent table by agent_id, colocated; agent_retrieve().

On a Citus coordinator (``postgres_distribute``: "auto" finds the citus extension, "citus"
requires it, "off" never), every table with an ``agent_id`` column is distributed by it and
colocated with ``memories`` (each primary key already starts with ``agent_id``, which Citus
requires), and ``embedders`` and ``settings`` become reference tables. Under "auto" a schema that
already holds memories is left on the coordinator (a warning says so): moving its rows is
``actrone-pg migrate --distribute`` (docs/scale-out.md, "From one server").

Installs ``{schema}.agent_retrieve(...)`` as this revision pinned it
(``sql/0014_agent_retrieve.sql``): one store call whole, a session's recent turns and the agent's
packed L2 search (``hybrid_search``'s ranking, ``pack_positions``' packing, the chosen rows), in
one PL/pgSQL function whose first argument is the agent, returning ``retrieve()``'s rows (0015).
On a distributed schema it is distributed by that argument, colocated with ``memories``, so that
the store's call, made alone, runs whole on the worker that holds the agent's shards (Citus can
run neither ``hybrid_search``, a SQL function reading distributed tables with parameters, nor
``retrieve``, which calls it). ``pack_positions`` is created on every node (it is called there).

A later revision that installs a per-agent function distributes it with one call,
``_ops.distribute_function("f(text, ...)")``, a no-op unless the schema is distributed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from actrone_pg.migrations import _citus
from actrone_pg.migrations._ops import (
    distribute_schema,
    drop_function,
    install,
    run,
    schema_name,
)

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

#: agent_retrieve's argument types.
ARGUMENTS = (
    "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
    " double precision, integer, boolean, integer, double precision[], double precision,"
    " double precision, timestamptz, text[], double precision, double precision, bigint,"
    " bigint, integer[], bigint, integer"
)


def upgrade() -> None:
    """Install agent_retrieve; distribute the schema if postgres_distribute says so."""
    install("0014", "agent_retrieve")
    distribute_schema()


def downgrade() -> None:
    """Turn distributed tables back into the coordinator's plain tables; drop agent_retrieve."""
    _citus.undistribute_schema(run, schema_name())
    drop_function("agent_retrieve", ARGUMENTS)
