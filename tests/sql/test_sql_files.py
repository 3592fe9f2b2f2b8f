"""Every shipped .sql file is used by the package, none installs an object, and the loader
refuses odd names.

The functions and views the migrations install are pinned per revision under
``actrone_pg/migrations/sql/`` (tested in ``tests/migrations/test_pinned.py``), never here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import actrone_pg
from actrone_pg import sql as sql_files

PACKAGE = Path(actrone_pg.__file__).parent


def test_every_sql_file_is_loaded_somewhere() -> None:
    sources = "\n".join(
        p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") if "sql" != p.parent.name
    )
    used = set(re.findall(r"""load\(\s*["']([a-z_]+)["']\s*\)""", sources))
    assert set(sql_files.names()) <= used, set(sql_files.names()) - used


def test_no_sql_file_here_creates_a_database_object() -> None:
    # One source per function or view at head: the copy of the newest revision that touched it.
    create = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|VIEW|PROCEDURE|TRIGGER)\b", re.I)
    for name in sql_files.names():
        assert not create.search(sql_files.load(name)), name


def test_load_rejects_paths() -> None:
    for bad in ("../x", "a/b", "x.sql", ""):
        with pytest.raises(ValueError):
            sql_files.load(bad)
