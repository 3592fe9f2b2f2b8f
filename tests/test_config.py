"""MemoryConfig: defaults, environment, validation (spec §2, §3.8)."""

from __future__ import annotations

import pytest

import actrone_pg
from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ConfigurationError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("ACTRONE_"):
            monkeypatch.delenv(key)


def test_defaults_match_the_spec() -> None:
    c = MemoryConfig()
    assert actrone_pg.MemoryConfig is MemoryConfig
    assert (c.backend, c.postgres_dsn, c.postgres_schema, c.postgres_auto_migrate) == (
        "memory", None, "actrone", True,
    )  # fmt: skip
    assert (c.redis_url, c.qdrant_url, c.qdrant_api_key) == (
        "redis://localhost:6379", "http://localhost:6333", None,
    )  # fmt: skip
    assert (c.embedding_provider, c.max_session_turns, c.session_ttl_hours) == ("local", 50, 24)
    assert (c.relevance_threshold, c.max_episodic_memories, c.hybrid_retrieval) == (None, 500, True)
    assert (c.rrf_k, c.rrf_weights) == (60, (1.0, 1.0, 1.0))
    assert (c.relevance_weight, c.recency_weight) == (0.7, 0.3)
    assert (c.rerank_enabled, c.rerank_top_k) == (False, 20)
    assert (c.budget_fraction_session, c.budget_fraction_episodic) == (0.35, 0.25)


def test_environment_sets_every_kind_of_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTRONE_RERANK_ENABLED", "true")
    monkeypatch.setenv("ACTRONE_RERANK_TOP_K", "7")
    monkeypatch.setenv("ACTRONE_RRF_WEIGHTS", "[1, 1, 0.3]")
    monkeypatch.setenv("ACTRONE_RELEVANCE_THRESHOLD", "0.5")
    monkeypatch.setenv("ACTRONE_BACKEND", "postgres")
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", "postgresql://x@y/z")
    c = MemoryConfig()
    assert c.rerank_enabled is True
    assert c.rerank_top_k == 7
    assert c.rrf_weights == (1.0, 1.0, 0.3)
    assert c.relevance_threshold == 0.5
    assert c.backend == "postgres"
    assert c.postgres_dsn == "postgresql://x@y/z"


def test_code_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTRONE_MAX_SESSION_TURNS", "5")
    assert MemoryConfig(max_session_turns=9).max_session_turns == 9
    assert MemoryConfig().max_session_turns == 5


def test_from_env_with_explicit_mapping() -> None:
    c = MemoryConfig.from_env({"ACTRONE_RRF_K": "10", "ACTRONE_QDRANT_API_KEY": "none"})
    assert c.rrf_k == 10 and c.qdrant_api_key is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"relevance_weight": 0.6}, "relevance_weight"),
        ({"relevance_weight": 0.5, "recency_weight": 0.4}, "relevance_weight"),
        ({"budget_fraction_session": 0.0}, "budget_fraction_session"),
        ({"budget_fraction_session": 1.0}, "budget_fraction_session"),
        (
            {"budget_fraction_session": 0.7, "budget_fraction_episodic": 0.4},
            "budget_fraction_episodic",
        ),
        ({"max_session_turns": 0}, "max_session_turns"),
        ({"max_episodic_memories": 0}, "max_episodic_memories"),
        ({"rrf_k": 0}, "rrf_k"),
        ({"rerank_top_k": 0}, "rerank_top_k"),
        ({"relevance_threshold": 0.0}, "relevance_threshold"),
        ({"relevance_threshold": 1.0}, "relevance_threshold"),
        ({"backend": "sqlite"}, "backend"),
        ({"embedding_provider": "magic"}, "embedding_provider"),
        ({"postgres_schema": "x; drop table y"}, "postgres_schema"),
        ({"postgres_schema": 'a"b'}, "postgres_schema"),
        ({"rrf_weights": (1.0, -1.0, 1.0)}, "rrf_weights"),
        ({"rrf_weights": (1.0, 1.0)}, "rrf_weights"),
        ({"max_session_turns": "ten"}, "max_session_turns"),
        ({"hybrid_retrieval": "yes"}, "hybrid_retrieval"),
        ({"session_ttl_hours": 0}, "session_ttl_hours"),
        ({"no_such_field": 1}, "no_such_field"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        MemoryConfig(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert str(info.value).startswith(field)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("ACTRONE_RERANK_ENABLED", "maybe"),
        ("ACTRONE_RERANK_TOP_K", "twenty"),
        ("ACTRONE_RRF_WEIGHTS", "[1, 1]"),
        ("ACTRONE_RRF_WEIGHTS", "nonsense"),
        ("ACTRONE_RELEVANCE_THRESHOLD", "2"),
    ],
)
def test_invalid_environment_values_fail_at_construction(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigurationError) as info:
        MemoryConfig()
    assert info.value.field == var.removeprefix("ACTRONE_").lower()


def test_replace_validates_again() -> None:
    c = MemoryConfig()
    assert c.replace(rrf_k=5).rrf_k == 5
    with pytest.raises(ConfigurationError):
        c.replace(rrf_k=0)


def test_secrets_are_masked_in_to_dict() -> None:
    c = MemoryConfig(qdrant_api_key="s3cret")
    assert c.to_dict()["qdrant_api_key"] == "***"
    assert c.qdrant_api_key == "s3cret"


def test_readme_documents_every_field() -> None:
    import dataclasses
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for f in dataclasses.fields(MemoryConfig):
        assert f"| `{f.name}` | `ACTRONE_{f.name.upper()}` |" in readme, f.name
