"""retrieve(): one store call, L1 and L2, in one round trip.

Installs ``retrieve`` as this revision pinned it (``sql/0015_retrieve.sql``): a PL/pgSQL entry
function that reads a session's recent turns and ranks and packs the agent's memories with
``hybrid_search`` and ``pack_positions``, which it calls unchanged (``hybrid_search`` stays the
function to call from psql). The store calls it alone, the agent first, so that on Citus the call
can be delegated whole to the agent's worker; PL/pgSQL also keeps each of its statements' plans
for the session. (On a schema distributed with Citus the store calls 0014's ``agent_retrieve``
instead: Citus cannot run ``hybrid_search``, a SQL function, over distributed tables.)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, install

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

#: retrieve's argument types.
ARGUMENTS = (
    "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
    " double precision, integer, boolean, integer, double precision[], double precision,"
    " double precision, timestamptz, double precision, double precision, bigint, integer"
)


def upgrade() -> None:
    """Install the function."""
    install("0015", "retrieve")


def downgrade() -> None:
    """Drop it (the store of revision 0014 sends its own statements)."""
    drop_function("retrieve", ARGUMENTS)
