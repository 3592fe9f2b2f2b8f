"""The PostgreSQL store's statement builders, alone: no server, no I/O.

Each builder returns (statement, parameters by name). What is checked here: every placeholder of
the statement has its parameter and every parameter is used; each value is bound once, by name;
no value is ever spelled in the statement's text; and the text of a read is one, whatever the
search (``retrieve()`` plans it), so that it is composed once. That the server
accepts every shape is ``tests/migrations/test_statements.py``; that the SQL ranks as the pipeline
does, the parity and filter tests.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from actrone_pg.filters import FILTERS, MemoryFilter
from actrone_pg.pipeline import SearchRequest
from actrone_pg.ranking import RankingParams
from actrone_pg.stores.postgres import builders
from tests.helpers import filter_examples

psycopg = pytest.importorskip("psycopg")
from psycopg.types.json import Jsonb  # noqa: E402

_NOW = datetime(2026, 5, 1, tzinfo=UTC)
_AGENT = "agent-7f3a"
_EMBEDDER = "embedder-c91e"
_VALUES = filter_examples()


def _request(**changes: Any) -> SearchRequest:
    base = SearchRequest(
        agent_id=_AGENT,
        query="green tea",
        terms=("green", "tea"),
        vector=np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32),
        embedder=_EMBEDDER,
        threshold=0.4,
        limit=25,
        params=RankingParams(),
        now=_NOW,
    )
    return replace(base, **changes)


def _retrieve(
    request: SearchRequest, session: tuple[str, int, float] | None = None
) -> tuple[str, dict[str, Any]]:
    statement, params = builders.retrieve(
        request, schema="mem", terms=list(request.terms), session=session, ef_search=800
    )
    return statement.as_string(None), params


def _placeholders(text: str) -> set[str]:
    assert "%s" not in text, "positional placeholders in a named statement"
    return set(re.findall(r"%\((\w+)\)s", text))


def test_every_key_has_an_example() -> None:
    assert set(_VALUES) == set(FILTERS), "give the new key a value in tests/helpers.py"


@pytest.mark.parametrize("session", [None, ("session-5d2b", 50, 86400.0)])
@pytest.mark.parametrize("packed", [False, True], ids=["every row", "packed"])
@pytest.mark.parametrize("filtered", [False, True], ids=["unfiltered", "filtered"])
def test_retrieve_names_the_agent_first_and_binds_every_value_once(
    session: tuple[str, int, float] | None, packed: bool, filtered: bool
) -> None:
    request = _request(budget=300 if packed else None, max_hits=7 if packed else None)
    if filtered:
        request = replace(request, filter=MemoryFilter(**_VALUES))
    text, params = _retrieve(request, session)
    assert _placeholders(text) == set(params)
    # Called alone, the agent its first argument: Citus delegates the call by it.
    assert text.startswith('SELECT * FROM "mem".retrieve(')
    assert text.index("%(agent)s") < text.index("%(session)s") < text.index("%(embedder)s")
    assert params["agent"] == _AGENT and params["embedder"] == _EMBEDDER
    assert params["terms"] == '{"green","tea"}' and params["limit"] == 25
    assert params["rrf_weights"] == '{"1.0","1.0","1.0"}'
    assert params["threshold"] == 0.4 and params["now"] == _NOW and params["ef_search"] == 800
    assert (params["budget"], params["max_hits"]) == ((300, 7) if packed else (None, None))
    assert (params["session"], params["turn_limit"], params["session_ttl"]) == (
        session or (None, None, None)
    )
    assert (params["filters"] is None) is not filtered
    # No value is spelled in the text: the agent, the embedder, the tags, the session.
    for value in (_AGENT, _EMBEDDER, "tag-a", "session-5d2b", "'pt'"):
        assert value not in text


def test_the_filter_travels_as_one_json_object() -> None:
    _, params = _retrieve(_request(filter=MemoryFilter(**_VALUES)))
    assert isinstance(params["filters"], Jsonb)
    sent = params["filters"].obj
    assert sent == builders.filter_json(MemoryFilter(**_VALUES))
    # The keys retrieve() names travel by name; a key registered besides them, as a condition.
    named = set(_VALUES) & builders.RETRIEVE_KEYS
    assert set(sent) == named | ({"conditions"} if set(_VALUES) - named else set())
    assert named == builders.RETRIEVE_KEYS
    assert sent["tags_any"] == ["tag-a", "tag-b"]  # a tuple as an array
    assert sent["metadata"] == {"lang": "pt"} and sent["min_importance"] == 0.25
    # A timestamp as ISO 8601 with its offset, which timestamptz parses back exactly.
    assert datetime.fromisoformat(sent["created_after"]) == _VALUES["created_after"]
    assert sent["created_after"].endswith("+00:00")


def test_the_text_is_one_whatever_the_search_and_is_composed_once() -> None:
    a = builders.retrieve(_request(), schema="mem", terms=["x"], session=None, ef_search=0)
    b = builders.retrieve(
        _request(
            agent_id="other",
            threshold=0.9,
            now=datetime(2027, 1, 1, tzinfo=UTC),
            filter=MemoryFilter(tags_any=("a",)),
            budget=10,
        ),
        schema="mem",
        terms=["y", "z"],
        session=("s", 5, 60.0),
        ef_search=800,
    )
    assert a[0] is b[0] and a[1] != b[1]


def test_list_memories_builds_its_keyset_and_filter_by_name() -> None:
    statement, params = builders.list_memories(
        "mem", _AGENT, now=_NOW, limit=20, after=None, flt=None
    )
    text = statement.as_string(None)
    assert _placeholders(text) == set(params) == {"agent", "now", "limit"}
    assert "AND TRUE AND TRUE" in text
    after = (_NOW, "m9")
    statement, params = builders.list_memories(
        "mem", _AGENT, now=_NOW, limit=20, after=after, flt=MemoryFilter(session_id="s1")
    )
    text = statement.as_string(None)
    assert _placeholders(text) == set(params)
    assert params == {
        "agent": _AGENT,
        "now": _NOW,
        "limit": 20,
        "after_created_at": _NOW,
        "after_id": "m9",
        "f_session_id": "s1",
    }
    assert 'FROM "mem".memories AS m' in text and _AGENT not in text


def test_array_literals_quote_every_element_and_escape_quotes_and_backslashes() -> None:
    assert builders.array_literal([]) == "{}"
    assert builders.array_literal(["tea", ""]) == '{"tea",""}'
    assert builders.array_literal(['a"b', "c\\d", "{x,y}", "NULL"]) == (
        '{"a\\"b","c\\\\d","{x,y}","NULL"}'
    )
    assert builders.array_literal([0.1, 2.0**60, 4.0]) == '{"0.1","1.152921504606847e+18","4.0"}'


def test_the_ranking_parameters_are_the_params_whether_made_once_or_given_as_a_list() -> None:
    # A manager's ranking parameters are made once for its RankingParams (builders._made), and
    # again for another; weights given as a list (RankingParams built directly) give the same.
    _, made = _retrieve(_request(params=RankingParams(rrf_weights=(1.0, 4.0, 0.1))))
    _, again = _retrieve(_request(params=RankingParams(rrf_weights=(1.0, 4.0, 0.1))))
    _, listed = _retrieve(_request(params=RankingParams(rrf_weights=[1.0, 4.0, 0.1])))  # type: ignore[arg-type]
    for params in (made, again, listed):
        params.pop("vector")  # an array: compared by the statement's other tests
    assert made == again == listed
    assert (made["rrf_weights"], made["rrf_k"], made["hybrid"]) == ('{"1.0","4.0","0.1"}', 60, True)
    assert (made["bm25_k1"], made["bm25_b"], made["relevance_weight"]) == (1.2, 0.3, 0.7)
