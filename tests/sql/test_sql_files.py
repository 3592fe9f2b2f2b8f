"""Every shipped .sql file is loaded by the package, none is missing, none installs an object, and
the loader refuses odd names.

The functions and views the migrations install are files of their revisions under
``actrone_pg/migrations/sql/`` (tested in ``tests/sql/test_installed.py``), never here.
"""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

import pytest

import actrone_pg
from actrone_pg import sql as sql_files
from actrone_pg.errors import MissingDependencyError

_CREATE = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|VIEW|PROCEDURE|TRIGGER)\b", re.I)


def _import_the_package() -> None:
    """Import every module of the package that uses the loader: each loads the files it uses as
    it is imported (a missing file fails right there, with FileNotFoundError)."""
    root = Path(actrone_pg.__file__).parent
    for path in root.rglob("*.py"):
        if path.parent.name == "sql" or "actrone_pg import sql" not in path.read_text("utf-8"):
            continue
        name = ".".join(("actrone_pg", *path.relative_to(root).with_suffix("").parts))
        try:
            import_module(name)
        except MissingDependencyError:
            pass  # an extra this environment lacks; its files are checked where it is installed


def test_every_sql_file_is_loaded_and_every_loaded_one_exists() -> None:
    _import_the_package()
    shipped, loaded = set(sql_files.names()), set(sql_files.loaded())
    assert shipped, "the package ships its long statements as .sql files"
    assert shipped == loaded, {"never loaded": shipped - loaded, "missing": loaded - shipped}


def test_a_missing_file_fails_to_load() -> None:
    with pytest.raises(FileNotFoundError):
        sql_files.load("no_such_statement")


def test_comment_lines_are_not_sent() -> None:
    for name in sql_files.names():
        assert not any(line.lstrip().startswith("--") for line in sql_files.load(name).splitlines())


def test_no_sql_file_here_creates_a_database_object() -> None:
    # One source per function or view at head: the copy of the newest revision that touched it.
    assert _CREATE.search("create or replace function f() ...")  # the check can fail
    names = sql_files.names()
    assert names
    for name in names:
        assert not _CREATE.search(sql_files.load(name)), name


def test_load_rejects_paths() -> None:
    for bad in ("../x", "a/b", "x.sql", ""):
        with pytest.raises(ValueError):
            sql_files.load(bad)
