"""A batch's statements for one agent besides its rows, as one call on the agent's worker.

Installs ``agent_write`` (``sql/0022_agent_write.sql``): the statistics row taken, the writer's
lock checked, the replaced memories deleted, the document frequencies and totals moved, the
recorded analyzer returned, as ``writes.upsert_memories`` runs them. On a distributed schema it
is distributed by its first argument with ``force_delegation``, so that the store's call, made
inside the batch's transaction, runs on the worker holding the agent's shards, over its shard
tables: with the ``COPY`` of the rows, a batch is two hops through the coordinator instead of
five. docs/scale-out.md, "Ingest on the cluster", has what it saves.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

from actrone_pg.migrations._ops import distribute_function, drop_function, install

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None

#: agent_write's argument types.
ARGUMENTS = "text, text[], text[], integer[], integer, bigint, boolean, text, text"


def upgrade() -> None:
    """Install agent_write; on a distributed schema, delegate it inside transaction blocks."""
    install("0022", "agent_write")
    distribute_function(f"agent_write({ARGUMENTS})", force_delegation=True)


def downgrade() -> None:
    """Drop agent_write (the store of 0021 writes with its statements alone)."""
    drop_function("agent_write", ARGUMENTS)
