"""The ranking reads fewer term frequencies, and retrieve() runs it inline.

Installs three copies this revision pins, the ranking the same bit for bit:

- ``hybrid_search`` (``sql/0018_hybrid_search.sql``): 0016's body, except that a query term no
  document holds (document frequency 0) is not looked up in any candidate's ``term_freqs``, and
  each frequency is read as text (``->>``);
- ``retrieve`` (``sql/0018_retrieve.sql``): 0015's entry function with that body in place of the
  call of ``hybrid_search``, whose 500 ranked rows went through a tuplestore of their own;
- ``agent_retrieve`` (``sql/0018_agent_retrieve.sql``): 0017's, naming 0018's body, so that a
  schema distributed with Citus ranks with the same text.

docs/benchmarks.md, "The ranking's fixed cost, measured by parts", has the measurements and the
structural alternatives tried and dropped (a postings table, the candidates' fields in the
candidate index).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace the three copies (same argument lists: CREATE OR REPLACE)."""
    install("0018", "hybrid_search")
    install("0018", "retrieve")
    install("0018", "agent_retrieve")


def downgrade() -> None:
    """Restore 0016's hybrid_search, 0015's retrieve and 0017's agent_retrieve."""
    install("0016", "hybrid_search")
    install("0015", "retrieve")
    install("0017", "agent_retrieve")
