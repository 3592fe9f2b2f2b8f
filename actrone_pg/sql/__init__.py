"""The long statements a store runs, kept in ``.sql`` files beside this module.

Files are read once (and cached) by :func:`load`, their whole-line ``--`` comments left out (they
are for the reader, not the server). A file may contain ``{name}`` placeholders that the caller
fills with :meth:`psycopg.sql.SQL.format` (identifiers and fragments only: values are named
parameters, ``%(name)s``). A test fails if a file here is missing or never loaded by the package
(:func:`loaded`).

Functions and views installed in the database are not here: each migration that creates or
changes one carries its own copy (``actrone_pg/migrations/sql/``), so the migrations never
depend on the library's current SQL and each object has exactly one source at head (the copy of
the newest revision that touched it); a test refuses a ``CREATE`` here.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["load", "loaded", "names"]

_LOADED: set[str] = set()


@functools.cache
def load(name: str) -> str:
    """The text of ``<name>.sql`` (without the extension), without its comment lines."""
    if not name.isidentifier():
        raise ValueError(f"not a SQL file name: {name!r}")
    text = resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")
    _LOADED.add(name)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def loaded() -> list[str]:
    """The files :func:`load` has read in this process (sorted)."""
    return sorted(_LOADED)


def names() -> list[str]:
    """Every SQL file shipped in this package, without the extension (sorted)."""
    return sorted(
        entry.name.removesuffix(".sql")
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".sql")
    )
