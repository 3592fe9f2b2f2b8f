"""The PostgreSQL store's statement builders, alone: no server, no I/O.

Each builder returns (statement, parameters by name). What is checked here: every placeholder of
the statement has its parameter and every parameter is used; each value is bound once, by name,
however often the statement uses it; no value is ever spelled in the statement's text; and the
text depends only on the shape of the call (which filter keys, packed or not, an HNSW index or
not), so that it is composed once. That the server accepts every shape is
``tests/migrations/test_pinned.py``; that the SQL ranks as the pipeline does, the parity and
filter tests.
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


def _build(request: SearchRequest, ann: int | None = None) -> tuple[str, dict[str, Any]]:
    statement, params = builders.search(
        request, schema="mem", vector_schema="ext", terms=list(request.terms), ann_dimensions=ann
    )
    return statement.as_string(None), params


def _placeholders(text: str) -> set[str]:
    assert "%s" not in text, "positional placeholders in a named statement"
    return set(re.findall(r"%\((\w+)\)s", text))


def test_every_key_has_an_example() -> None:
    assert set(_VALUES) == set(FILTERS), "give the new key a value in tests/helpers.py"


@pytest.mark.parametrize("packed", [False, True], ids=["every row", "packed"])
@pytest.mark.parametrize("shape", ["exact", "ann", "filtered"])
def test_every_placeholder_has_its_parameter_and_every_parameter_is_used(
    packed: bool, shape: str
) -> None:
    request = _request(budget=300 if packed else None)
    if shape == "filtered":
        request = replace(request, filter=MemoryFilter(**_VALUES))
    text, params = _build(request, ann=384 if shape == "ann" else None)
    assert _placeholders(text) == set(params)
    assert ("budget" in params) is packed and ("max_hits" in params) is packed
    assert ("ann_limit" in params) is (shape == "ann")
    # hybrid_search's arguments, by name: the request's values, each once.
    assert params["agent"] == _AGENT and params["embedder"] == _EMBEDDER
    assert params["terms"] == ["green", "tea"] and params["limit"] == 25
    assert params["threshold"] == 0.4 and params["now"] == _NOW
    assert params["content"] is False
    # No value is spelled in the text: the agent, the embedder, the tags, the session.
    for value in (_AGENT, _EMBEDDER, "tag-a", "session-5d2b", "'pt'"):
        assert value not in text


def test_a_filter_binds_each_value_once_however_often_the_statement_uses_it() -> None:
    text, params = _build(_request(filter=MemoryFilter(**_VALUES)))
    # The filter's conditions go into three places of the CTEs (the probe, the selective path,
    # the one pass), each value under one name.
    assert text.count("%(f_tags_any)s") == 3
    filtered = {k: v for k, v in params.items() if k.startswith("f_")}
    assert set(filtered) == {"f_" + k for k in _VALUES}
    assert filtered["f_tags_any"] == ["tag-a", "tag-b"]  # a tuple as an array
    assert isinstance(filtered["f_metadata"], Jsonb) and filtered["f_metadata"].obj == {
        "lang": "pt"
    }
    assert (
        params["f_min_importance"] == 0.25 and params["f_created_after"] == _VALUES["created_after"]
    )
    assert params["indexed"] is True and params["sample"] == 256


def test_which_path_a_filter_may_take_follows_its_keys() -> None:
    # content_types, session_id and min_importance have no index: always the one pass.
    assert not builders.served_by_an_index(MemoryFilter(session_id="s", min_importance=0.1))
    assert builders.served_by_an_index(MemoryFilter(session_id="s", tags_any=("a",)))
    _, params = _build(_request(filter=MemoryFilter(content_types=("fact",))))
    assert params["indexed"] is False


def test_the_text_depends_on_the_shape_only_and_is_composed_once() -> None:
    a = builders.search(
        _request(), schema="mem", vector_schema="ext", terms=["x"], ann_dimensions=None
    )
    b = builders.search(
        _request(agent_id="other", threshold=0.9, now=datetime(2027, 1, 1, tzinfo=UTC)),
        schema="mem",
        vector_schema="ext",
        terms=["y", "z"],
        ann_dimensions=None,
    )
    assert a[0] is b[0] and a[1] != b[1]
    first = _build(_request(filter=MemoryFilter(tags_any=("a",))))[0]
    other = _build(_request(filter=MemoryFilter(tags_any=("b", "c"))))[0]
    assert first == other
    assert _build(_request(filter=MemoryFilter(tags_all=("a",))))[0] != first
    assert _build(_request(), ann=384)[0] != _build(_request())[0]


def test_the_hnsw_scan_overfetches_and_names_its_dimension() -> None:
    text, params = _build(_request(limit=500), ann=384)
    assert params["ann_limit"] == 600  # ANN_OVERFETCH 1.2 × the limit
    # The dimension is the indexed expression's type modifier, the one literal of the scan.
    assert 'vector(384)) OPERATOR("ext".<#>) %(vector)s::"ext".vector(384)' in text


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


@pytest.mark.parametrize("session", [None, ("session-5d2b", 50, 86400.0)])
def test_retrieve_names_the_agent_first_and_binds_every_value_once(
    session: tuple[str, int, float] | None,
) -> None:
    statement, params = builders.retrieve(
        _request(budget=300, max_hits=7), schema="mem", terms=["green", "tea"], session=session
    )
    text = statement.as_string(None)
    assert _placeholders(text) == set(params)
    # Called alone, the agent its first argument: Citus delegates the call by it.
    assert text.startswith('SELECT * FROM "mem".retrieve(%(agent)s, %(session)s,')
    assert params["agent"] == _AGENT and params["terms"] == ["green", "tea"]
    assert (params["budget"], params["max_hits"]) == (300, 7)
    assert (params["session"], params["turn_limit"], params["session_ttl"]) == (
        session or (None, None, None)
    )
    for value in (_AGENT, _EMBEDDER, "session-5d2b"):
        assert value not in text


# -- a schema distributed with Citus ---------------------------------------------------------


@pytest.mark.parametrize("inputs", ["exact", "given"])
def test_agent_retrieve_is_retrieve_with_candidates_and_statistics(inputs: str) -> None:
    given = inputs == "given"
    candidates = ["m1", "m2"] if given else None
    stats = (12, 340, [3, 1]) if given else None
    session = ("session-5d2b", 50, 86400.0)
    request = _request(budget=300)
    statement, params = builders.agent_retrieve(
        request,
        schema="mem",
        terms=["green", "tea"],
        session=session,
        candidates=candidates,
        stats=stats,
    )
    text = statement.as_string(None)
    assert _placeholders(text) == set(params)
    # Called alone, the agent first: the form Citus delegates to the agent's worker.
    assert text.startswith('SELECT * FROM "mem".agent_retrieve(%(agent)s, %(session)s,')
    _, retrieve_params = builders.retrieve(
        request, schema="mem", terms=["green", "tea"], session=session
    )
    assert {k: v for k, v in params.items() if k in retrieve_params} == retrieve_params
    assert params["candidates"] == candidates
    assert (params["n_docs"], params["total_length"], params["doc_freqs"]) == (
        stats or (None, None, None)
    )
    for value in (_AGENT, _EMBEDDER, "session-5d2b", "m1"):
        assert value not in text


def test_filtered_inputs_are_the_filtered_ctes_alone_with_the_filters_values() -> None:
    flt = MemoryFilter(**_VALUES)
    request = _request(filter=flt)
    statement, params = builders.filtered_inputs(
        request, schema="mem", vector_schema="ext", terms=["green", "tea"]
    )
    text = statement.as_string(None)
    used = _placeholders(text)
    assert used == set(params)
    assert {"f_" + key.name for key, _ in flt} <= used and "agent" in used
    assert text.startswith("WITH ") and "AS ids" in text and "AS dfs" in text
    assert "hybrid_search" not in text and "agent_retrieve" not in text
    # The same CTEs, and values, as the one-statement filtered search.
    search_text, search_params = _build(request)
    assert text[len("WITH ") : text.index(" SELECT (SELECT fc.ids")] in search_text
    assert np.array_equal(params["vector"], search_params["vector"])
    plain = used - {"vector"}
    assert {k: getattr(params[k], "obj", params[k]) for k in plain} == {
        k: getattr(search_params[k], "obj", search_params[k]) for k in plain
    }
    with pytest.raises(AssertionError):
        builders.filtered_inputs(_request(), schema="mem", vector_schema="ext", terms=[])


def test_ann_ids_are_the_hnsw_scan_alone() -> None:
    statement, params = builders.ann_ids(
        _request(), schema="mem", vector_schema="ext", dimensions=384
    )
    text = statement.as_string(None)
    assert _placeholders(text) == set(params) == {"agent", "embedder", "vector", "ann_limit"}
    assert text.startswith('SELECT ARRAY(SELECT a.id FROM "mem".memories')
    assert '"ext".vector(384)' in text
    search_text, search_params = _build(_request(), ann=384)
    assert params["ann_limit"] == search_params["ann_limit"] > _request().limit
    assert text[len("SELECT ") : -len(" AS ids")] in search_text
