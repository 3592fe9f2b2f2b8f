"""MemoryConfig: defaults, environment, validation (docs/configuration.md)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import actrone_pg
from actrone_pg import _config_values
from actrone_pg.config import MemoryConfig, redact
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
    assert (c.rrf_k, c.rrf_weights) == (60, (1.0, 4.0, 0.1))
    assert (c.bm25_k1, c.bm25_b, c.drop_question_words) == (1.2, 0.3, True)
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
    assert (
        MemoryConfig.from_env({"ACTRONE_DROP_QUESTION_WORDS": "false"}).drop_question_words is False
    )


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
        # "$" matches before a trailing newline: these passed and migrated into "actrone\n".
        ({"postgres_schema": "actrone\n"}, "postgres_schema"),
        ({"postgres_text_search_config": "simple\n"}, "postgres_text_search_config"),
        ({"qdrant_collection_prefix": "actrone\n"}, "qdrant_collection_prefix"),
        ({"postgres_schema": "information_schema"}, "postgres_schema"),
        ({"postgres_schema": "pg_catalog"}, "postgres_schema"),
        ({"postgres_schema": "pg_toast"}, "postgres_schema"),
        ({"postgres_schema": "pg_mine"}, "postgres_schema"),
        ({"postgres_dsn": "localhost"}, "postgres_dsn"),
        ({"postgres_dsn": "http://localhost:5432"}, "postgres_dsn"),
        ({"postgres_dsn": "  "}, "postgres_dsn"),
        ({"rrf_weights": (1.0, -1.0, 1.0)}, "rrf_weights"),
        ({"rrf_weights": (1.0, 1.0)}, "rrf_weights"),
        ({"max_session_turns": "ten"}, "max_session_turns"),
        ({"hybrid_retrieval": "yes"}, "hybrid_retrieval"),
        ({"drop_question_words": 1}, "drop_question_words"),
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
        ("ACTRONE_DROP_QUESTION_WORDS", "perhaps"),
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


def _configuration_doc() -> Any:
    """scripts/configuration_doc.py, the generator of docs/configuration.md, as a module."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "scripts" / "configuration_doc.py"
    spec = importlib.util.spec_from_file_location("configuration_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_guide_documents_every_field() -> None:
    import dataclasses

    generator = _configuration_doc()
    guide = generator.TARGET.read_text()
    for f in dataclasses.fields(MemoryConfig):
        assert f"| `{f.name}` | `ACTRONE_{f.name.upper()}` |" in guide, f.name
    # Each row's meaning is the field's #: comment in actrone_pg/config.py.
    assert "| `rrf_k` | `ACTRONE_RRF_K` | `60` | RRF constant k |" in guide


def test_the_configuration_guide_is_what_the_generator_writes() -> None:
    assert _configuration_doc().TARGET.read_text() == _configuration_doc().render(), (
        "docs/configuration.md is stale: run python scripts/configuration_doc.py"
    )


def test_system_schemas_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match="system schema.*'actrone'"):
        MemoryConfig(postgres_schema="information_schema")
    assert MemoryConfig(postgres_schema="public").postgres_schema == "public"
    assert MemoryConfig(postgres_schema="_pg_like").postgres_schema == "_pg_like"


def test_a_host_alone_is_not_a_dsn_and_the_message_shows_what_one_looks_like(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", "localhost")
    with pytest.raises(ConfigurationError) as info:
        MemoryConfig(backend="postgres")
    assert info.value.field == "postgres_dsn"
    assert "'localhost' is not a PostgreSQL connection string" in str(info.value)
    assert "postgresql://user:password@localhost:5432/dbname" in str(info.value)
    for good in ("postgresql://u:p@h:5432/db", "postgres://h/db", "host=h dbname=d user=u"):
        assert MemoryConfig(postgres_dsn=good).postgres_dsn == good


def test_a_refused_dsn_does_not_echo_its_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        MemoryConfig(postgres_dsn="host=h password=hunter2 oops")
    assert "hunter2" not in str(info.value)


DSN = "postgresql://app:hunter2@db.example:5432/mem?sslmode=require"


def test_repr_and_str_mask_every_secret() -> None:
    c = MemoryConfig(
        postgres_dsn=DSN,
        qdrant_api_key="qkey-123",
        embedding_api_key="sk-456",
        redis_url="redis://default:redispw@cache:6379/0",
    )
    for text in (repr(c), str(c), f"{c}", str(c.to_dict())):
        for secret in ("hunter2", "qkey-123", "sk-456", "redispw"):
            assert secret not in text, (secret, text)
    assert "postgres_dsn='postgresql://app:***@db.example:5432/mem?sslmode=require'" in repr(c)
    assert "redis_url='redis://default:***@cache:6379/0'" in repr(c)
    assert "qdrant_api_key='***'" in repr(c) and "embedding_api_key='***'" in repr(c)
    assert c.postgres_dsn == DSN  # the value itself is untouched
    kv = MemoryConfig(postgres_dsn="host=db password=hunter2 dbname=mem")
    assert "postgres_dsn='host=db password=*** dbname=mem'" in repr(kv)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DSN, "postgresql://app:***@db.example:5432/mem?sslmode=require"),
        ("postgresql://app@db/mem", "postgresql://app@db/mem"),
        ("postgresql://:pw@db/mem", "postgresql://:***@db/mem"),
        ("postgresql://db/m?password=pw&sslmode=require", "postgresql://db/m?password=***&sslmode=require"),
        ("host=db password=pw dbname=mem", "host=db password=*** dbname=mem"),
        ("host=db password = 'p w\\' x' dbname=mem", "host=db password = *** dbname=mem"),
        ("redis://:pw@cache:6379", "redis://:***@cache:6379"),
        ("http://q:6333/?api_key=k", "http://q:6333/?api_key=***"),
        ("at postgresql://u:pw@h/d: refused", "at postgresql://u:***@h/d: refused"),
    ],
)  # fmt: skip
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_config_values, "_warned_env", set())


@pytest.mark.usefixtures("fresh_warnings")
def test_a_misspelled_variable_is_logged_once_with_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ACTRONE_RERANK_ENABLE", "true")
    monkeypatch.setenv("ACTRONE_POSTGRES_SHEMA", "mine")
    monkeypatch.setenv("ACTRONE_ZZZ", "1")
    with caplog.at_level(logging.WARNING, logger="actrone_pg.config"):
        c = MemoryConfig()
        MemoryConfig()  # once per variable, not once per config
    assert c.rerank_enabled is False and c.postgres_schema == "actrone"
    messages = sorted(r.getMessage() for r in caplog.records if r.name == "actrone_pg.config")
    assert messages == [
        "ACTRONE_POSTGRES_SHEMA is not a setting of actrone_pg and is ignored; "
        "did you mean ACTRONE_POSTGRES_SCHEMA?",
        "ACTRONE_RERANK_ENABLE is not a setting of actrone_pg and is ignored; "
        "did you mean ACTRONE_RERANK_ENABLED?",
        "ACTRONE_ZZZ is not a setting of actrone_pg and is ignored; "
        "the settings are listed in docs/configuration.md",
    ]


@pytest.mark.usefixtures("fresh_warnings")
def test_variables_of_the_tests_and_scripts_are_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {
        "ACTRONE_TEST_POSTGRES_DSN": "postgresql://x@y/z",
        "ACTRONE_TEST_MODEL_DIR": "/m",
        "ACTRONE_BENCH_REFERENCE_PYTHON": "/p",
        "ACTRONE_EXPORT_VENV": "/v",
        "ACTRONE_RRF_K": "10",
        "OTHER_RRF_KK": "1",
    }
    with caplog.at_level(logging.WARNING, logger="actrone_pg.config"):
        assert MemoryConfig.from_env(environ).rrf_k == 10
    assert [r for r in caplog.records if r.name == "actrone_pg.config"] == []


@pytest.mark.usefixtures("fresh_warnings")
def test_the_mcp_token_variable_is_not_reported_as_an_unknown_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # It is the documented token of `actrone-pg mcp --transport http`, and it is enforced.
    environ = {"ACTRONE_MCP_TOKEN": "a-token-of-enough-length-123", "ACTRONE_MCP_TOKN": "x"}
    with caplog.at_level(logging.WARNING, logger="actrone_pg.config"):
        MemoryConfig.from_env(environ)
    assert [r.getMessage().split()[0] for r in caplog.records if r.name == "actrone_pg.config"] == [
        "ACTRONE_MCP_TOKN"
    ]


def test_postgres_distribute_takes_three_modes_and_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert MemoryConfig().postgres_distribute == "auto"
    monkeypatch.setenv("ACTRONE_POSTGRES_DISTRIBUTE", "off")
    assert MemoryConfig().postgres_distribute == "off"
    assert MemoryConfig(postgres_distribute="citus").postgres_distribute == "citus"
    with pytest.raises(ConfigurationError, match="postgres_distribute.*choose one of auto, citus"):
        MemoryConfig(postgres_distribute="yes")
