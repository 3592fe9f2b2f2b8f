"""``filters.json_contains`` (the filters' reference for ``metadata``) agrees with ``jsonb @>``."""

from __future__ import annotations

import json

import psycopg
import pytest

from actrone_pg.filters import json_contains

pytestmark = pytest.mark.postgres

CASES = [
    ({"a": 1, "b": 2}, {"a": 1}),
    ({"a": 1}, {"a": 1, "b": 2}),
    ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 1}}}),
    ({"a": [1, 2, 3]}, {"a": [3, 1]}),
    ({"a": [1, 2, 3]}, {"a": [1, 1]}),
    ({"a": [1, 2, 3]}, {"a": 1}),
    ([1, 2, 3], 1),
    ([1, [2]], 2),
    ("x", "x"),
    ({"a": [[1, 2]]}, {"a": [1]}),
    ({"a": [[1, 2]]}, {"a": [[1]]}),
    ({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]}),
    ({"a": 1}, {"a": 1.0}),
    ({"a": True}, {"a": 1}),
    ({"a": 1}, {"a": True}),
    ({"a": "1"}, {"a": 1}),
    ({"a": None}, {"a": None}),
    ({"a": None}, {"a": False}),
    ({"a": []}, {"a": []}),
    ({"a": {}}, {"a": {}}),
    ({"a": {}}, {"a": []}),
    ({}, {}),
    ({"a": 1}, {}),
    ({"a": [1, "x"]}, {"a": ["x"]}),
    ({"a": "x"}, {"a": ["x"]}),
]


def test_json_contains_agrees_with_jsonb_containment(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for container, contained in CASES:
            row = conn.execute(
                "SELECT %s::jsonb @> %s::jsonb", (json.dumps(container), json.dumps(contained))
            ).fetchone()
            assert row is not None
            assert json_contains(container, contained) is row[0], (container, contained)
