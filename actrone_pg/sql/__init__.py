"""The long statements a store runs, kept in ``.sql`` files beside this module (none today).

Files are read once (and cached) by :func:`load`. A file may contain ``{schema}`` placeholders,
which the caller fills with :class:`psycopg.sql.Identifier` (literal braces must therefore be
written ``{{`` and ``}}``). A test fails if a file here is never loaded by the package.

Functions and views installed in the database are not here: each migration that creates or
changes one carries its own pinned copy (``actrone_pg/migrations/sql/``), so the migrations
never depend on the library's current SQL and each object has exactly one source at head (the
copy of the newest revision that touched it); a test refuses a ``CREATE`` here.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["load", "names"]


@functools.cache
def load(name: str) -> str:
    """The text of ``<name>.sql`` (without the extension)."""
    if not name.isidentifier():
        raise ValueError(f"not a SQL file name: {name!r}")
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


def names() -> list[str]:
    """Every SQL file shipped in this package, without the extension (sorted)."""
    return sorted(
        entry.name.removesuffix(".sql")
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".sql")
    )
