"""The PostgreSQL store's lookup caches stay bounded (docs/reliability.md, "Bounded state"):
here without a server, the server's answer stood in for by a function of the tokens."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import pytest

from actrone_pg.stores.postgres import PostgresSettings, lookups
from actrone_pg.stores.postgres.connection import LEXEME_CACHE_SIZE, Database


def _database(monkeypatch: pytest.MonkeyPatch, asked: list[list[str]]) -> Database:
    db = Database(PostgresSettings("postgresql://unused", text_search_config="english"))

    async def fetch(conn: Any, statement: Any, params: Sequence[Any], **_: Any) -> list[Any]:
        config, tokens = params
        asked.append(list(tokens))
        return [{"token": t, "lexeme": None if t == "the" else t[:-1]} for t in tokens]

    monkeypatch.setattr(db, "fetch", fetch)
    return db


async def test_the_lexeme_cache_keeps_the_most_recently_used_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[list[str]] = []
    db = _database(monkeypatch, asked)
    conn: Any = None
    assert await lookups.normalise(db, conn, ["the", "cats", "the"]) == [None, "cat", None]
    # a vocabulary twice the bound, 1,000 tokens a call; "cats" used in every call
    for start in range(0, 2 * LEXEME_CACHE_SIZE, 1000):
        words = [f"w{i}s" for i in range(start, start + 1000)]
        assert await lookups.normalise(db, conn, [*words, "cats"]) == [
            *(w[:-1] for w in words),
            "cat",
        ]
        assert len(db.lexemes) <= LEXEME_CACHE_SIZE
    assert len(db.lexemes) == LEXEME_CACHE_SIZE
    assert "cats" in db.lexemes and "the" not in db.lexemes  # used recently / long ago
    assert "w0s" not in db.lexemes and f"w{2 * LEXEME_CACHE_SIZE - 1}s" in db.lexemes
    asked.clear()
    assert await lookups.normalise(db, conn, ["cats", "the"]) == ["cat", None]
    assert asked == [["the"]]  # only the one the cache let go is asked again
    # what the bound costs: the tokens, their lexemes and the cache's own entries
    size = sys.getsizeof(db.lexemes) + sum(
        sys.getsizeof(k) + sys.getsizeof(v) for k, v in db.lexemes.items()
    )
    print(f"lexeme cache full: {len(db.lexemes)} entries, {size / 1e6:.1f} MB")
