"""Every shipped .sql file is used by the package, and the loader refuses odd names."""

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
    assert sql_files.names() == ["hybrid_search", "pack_positions", "query_terms", "views"]
    assert set(sql_files.names()) <= used, set(sql_files.names()) - used


def test_load_returns_the_file_and_rejects_paths() -> None:
    assert "CREATE OR REPLACE FUNCTION {schema}.hybrid_search(" in sql_files.load("hybrid_search")
    for bad in ("../x", "a/b", "x.sql", ""):
        with pytest.raises(ValueError):
            sql_files.load(bad)
