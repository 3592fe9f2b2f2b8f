"""MemoryConfig: every setting of the library, from code or from ``ACTRONE_*`` variables.

A field passed in code wins; otherwise ``ACTRONE_<FIELD_NAME_IN_CAPITALS>`` is read from the
environment; otherwise the default applies. Every value is validated when the object is built,
and an invalid one raises :class:`~actrone_pg.errors.ConfigurationError` naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actrone_pg._config_values import ENV_PREFIX as ENV_PREFIX
from actrone_pg._config_values import resolve
from actrone_pg._redact import redact
from actrone_pg.errors import ConfigurationError
from actrone_pg.ranking import ANALYZERS, CHANNELS, DEFAULT_RRF_WEIGHTS, required_weights

__all__ = [
    "BACKENDS",
    "CONSOLIDATORS",
    "DISTRIBUTE_MODES",
    "EMBEDDING_PROVIDERS",
    "MemoryConfig",
    "default_data_dir",
    "redact",
]

BACKENDS = ("memory", "postgres", "redis_qdrant")
EMBEDDING_PROVIDERS = ("local", "hashing", "onnx", "openai")
#: ``postgres_distribute``: distribute the tables with Citus when the server has it ("auto"),
#: require it ("citus"), or never ("off"). docs/scale-out.md.
DISTRIBUTE_MODES = ("auto", "citus", "off")
CONSOLIDATORS = ("extractive", "llm", "none")

# Every pattern here validates a whole value, so each is used with fullmatch: ``$`` also matches
# before a trailing newline, and "actrone\n" would pass as a schema name.
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_TEXT_SEARCH_CONFIG = re.compile(r"[a-z_][a-z0-9_]*")
_COLLECTION_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Schemas PostgreSQL reserves: pg_catalog, pg_toast, pg_temp_N, ... (any pg_ name) and the SQL
#: standard's information_schema.
_SYSTEM_SCHEMA = re.compile(r"pg_.*|information_schema")
_SECRET_FIELDS = ("qdrant_api_key", "embedding_api_key", "consolidator_api_key")
_URL_FIELDS = (
    "postgres_dsn",
    "redis_url",
    "qdrant_url",
    "embedding_api_url",
    "consolidator_api_url",
)


def default_data_dir() -> str:
    """The per-user directory where the embedded PostgreSQL keeps its data."""
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a core dependency
        return str(Path.home() / ".local" / "share" / "actrone-pg" / "pgdata")
    return str(Path(platformdirs.user_data_dir("actrone-pg")) / "pgdata")


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Settings of a :class:`~actrone_pg.MemoryManager` and its store.

    Every field can also be set by the environment variable ``ACTRONE_<FIELD>`` (for example
    ``ACTRONE_RERANK_ENABLED=true``); a value given in code takes precedence.
    """

    # -- backend selection --
    #: `memory`, `postgres` or `redis_qdrant`; the store `MemoryManager.create()` builds
    backend: str = "memory"
    #: PostgreSQL server; unset starts the embedded server (needs `[embedded]`)
    postgres_dsn: str | None = None
    #: schema holding the tables (a plain identifier)
    postgres_schema: str = "actrone"
    # "auto": on a Citus coordinator the migrations distribute every per-agent table by
    # agent_id (docs/scale-out.md); "citus": require it (a clear error on a plain server);
    # "off": plain tables even on Citus.
    #: on a Citus coordinator the migrations distribute the tables by agent (`auto`); `citus`
    #: requires Citus, `off` keeps plain tables (docs/scale-out.md)
    postgres_distribute: str = "auto"
    #: row-level security per agent: policies keyed on `actrone.agent_id`, set by the store
    #: for every call, on one server or Citus (docs/postgres.md, "Row-level security per agent")
    postgres_row_security: bool = False
    #: `create()` applies pending migrations under an advisory lock
    postgres_auto_migrate: bool = True
    #: where the embedded server keeps its data (a per-user data directory)
    postgres_data_dir: str = field(default_factory=default_data_dir)
    #: connections kept open
    postgres_pool_min_size: int = 1
    #: connections at most
    postgres_pool_max_size: int = 10
    #: seconds to get a connection before `StoreUnavailableError`
    postgres_connect_timeout: float = 5.0
    #: seconds a statement may run
    postgres_statement_timeout: float = 30.0
    # "simple": the lexical index holds the terms of ``text_analyzer``, as every backend does.
    # Any other text search configuration of the server ("german", ...) maps the plain tokens
    # through it instead (PostgreSQL only; rankings then differ from the other backends).
    #: `simple`: terms from `text_analyzer`, as in every backend; another server configuration
    #: (`german`, ...) maps the plain tokens through it instead (PostgreSQL only, no parity)
    postgres_text_search_config: str = "simple"
    # An agent with at least this many memories gets an HNSW index of its own (per embedder of
    # up to 2,000 dimensions), built in the background, and is searched through it: nearly
    # flat latency, recall ~0.97 of the exact scan instead of 1.0, writes to that agent ~15×
    # slower. 0 turns it off. See docs/postgres.md, "Large agents".
    #: an agent with this many memories gets an HNSW index of its own, built in the background, and
    #: is searched through it (recall ≈ 0.97 instead of 1, writes to that agent ~15× slower); `0`
    #: never
    postgres_ann_min_memories: int = 50_000
    #: `hnsw.ef_search` of those scans (1–1000)
    postgres_ann_ef_search: int = 800
    #: Redis for L1 (`redis_qdrant`)
    redis_url: str = "redis://localhost:6379"
    #: Qdrant for L2; `:memory:` or a path uses local mode
    qdrant_url: str = "http://localhost:6333"
    #: Qdrant API key
    qdrant_api_key: str | None = None
    #: prefix of Qdrant collection names
    qdrant_collection_prefix: str = "actrone"
    #: seconds before a Redis call gives up
    redis_timeout: float = 5.0
    #: seconds before a Qdrant call gives up
    qdrant_timeout: float = 10.0
    #: Redis connections at most
    redis_pool_size: int = 20
    # Hours Redis keeps a session's keys past ``session_ttl_hours`` (0: none), so that a
    # sweeper of any process (``actrone-pg sweep``) finds the expired session and consolidates
    # it before it deletes it. Two days: two runs of a daily sweeper (docs/redis_qdrant.md).
    #: hours Redis keeps an expired session for the sweeper to consolidate and delete (`0`: dropped
    #: at the TTL, unconsolidated turns with it)
    redis_session_grace_hours: float = 48.0

    # -- embeddings --
    #: `local` (ONNX model if available, else hashing), `hashing`, `onnx`, `openai`
    embedding_provider: str = "local"
    #: model id or directory (provider default if unset)
    embedding_model: str | None = None
    #: base URL of an OpenAI-compatible server
    embedding_api_url: str | None = None
    #: its API key
    embedding_api_key: str | None = None
    #: dimensions to request from the server
    embedding_dimensions: int | None = None
    #: texts per embedding call
    embedding_batch_size: int = 32
    #: onnxruntime threads (0: its default)
    embedding_threads: int = 0
    #: query embeddings kept (LRU)
    query_cache_size: int = 1024

    # -- L1 --
    #: L1 cap: turns kept and read per session
    max_session_turns: int = 50
    #: L1 expiry after the last write
    session_ttl_hours: float = 24.0

    # -- L2 --
    #: admission cosine; unset: the embedder's calibrated value, else 0.72
    relevance_threshold: float | None = None
    #: L2 candidates considered (nearest first)
    max_episodic_memories: int = 500
    #: RRF of dense + BM25 + recency; `false`: the classic blend
    hybrid_retrieval: bool = True
    #: RRF constant k
    rrf_k: int = 60
    # One weight per ranking of ``ranking.CHANNELS`` (dense, lexical, recency), each channel's
    # measured default (docs/quality.md); a list may stop before the optional channels, which
    # then weigh 0.
    #: multipliers of the dense, lexical, recency contributions (`'[1, 1, 1]'` is unweighted RRF);
    #: chosen in docs/quality.md
    rrf_weights: tuple[float, ...] = DEFAULT_RRF_WEIGHTS
    # How text becomes BM25 terms in every backend: "english" (Snowball English stemming) or
    # "simple" (lower-case tokens). A store records it with its term statistics.
    #: how text becomes BM25 terms in every backend: `english` (Snowball stemming) or `simple`
    #: (lower-case tokens); recorded by the store, `actrone-pg reindex` rebuilds with another
    text_analyzer: str = "english"
    # Index each memory's date too: the day of its ``created_at`` in UTC ("8 May 2023",
    # ``ranking.date_text``) joins its BM25 terms in every backend, never its content or its
    # embedding, so "what did she do in May 2023?" meets what was said then. A store records
    # it with its terms, like ``text_analyzer`` (measured: docs/notes/quality.md, "Round 5"). Like
    # the analyzer, it does not apply under a ``postgres_text_search_config`` other than "simple".
    # Unset (``None``): on for a store that holds no terms yet, and what a store recorded for
    # one that does, so that a store indexed before date terms existed keeps working (without
    # them, saying once how to add them: ``actrone-pg reindex --lexical-dates``).
    #: unset: on for a new store, what an existing store recorded. Each memory's date (its
    #: `created_at`'s day in UTC, written `8 May 2023`) joins its BM25 terms
    #: in every backend, never its content or embedding, so "what did she do in May 2023?" meets
    #: what was said then; recorded with the analyzer (`english+dates`), `actrone-pg reindex
    #: --lexical-dates/--no-lexical-dates` rebuilds (docs/notes/quality.md, Round 5)
    lexical_dates: bool | None = None
    #: BM25 term-frequency saturation
    bm25_k1: float = 1.2
    #: BM25 length normalisation (0: none, 1: full); 0.3 rather than the textbook 0.75, measured on
    #: LoCoMo (docs/quality.md)
    bm25_b: float = 0.3
    # Leave a query's question words ("what", "did", "when", ...: ranking.QUESTION_WORDS) out
    # of its BM25 terms, unless nothing else remains (measured: docs/quality.md).
    #: leave a query's question words (what, when, did, was, ...) out of its BM25 terms, unless
    #: nothing else remains; documents keep every word (docs/quality.md)
    drop_question_words: bool = True
    # Hybrid ranking: a memory scores at least this share of the fused score of the memory
    # written just before it in its session, among the best ``pipeline.NEIGHBOUR_POOL`` (an
    # answer turn rises with the turn it answers); 0 turns it off (measured: docs/quality.md).
    #: opt-in, hybrid ranking only (0.9 measured best): a memory scores at least this share of the
    #: fused score of the memory written just before it in its session (among the best 100), so an
    #: answer rises with the turn it answers; 0 turns it off (docs/quality.md)
    neighbour_weight: float = 0.0
    #: classic blend: weight of cosine
    relevance_weight: float = 0.7
    #: classic blend: weight of recency (the two sum to 1.0)
    recency_weight: float = 0.3
    #: cross-encoder rerank of the top of the fused ranking
    rerank_enabled: bool = False
    #: candidates sent to the reranker
    rerank_top_k: int = 20
    #: cross-encoder model id or directory
    rerank_model: str = "Xenova/ms-marco-MiniLM-L-6-v2"

    # -- consolidation (conversations become memories, docs/lifecycle.md) --
    # "extractive" (deterministic, no service), "llm" (an OpenAI-compatible chat model) or
    # "none" (no consolidation; the sweeper then deletes expired sessions without reading them).
    #: what turns sessions into memories: `extractive` (no service), `llm`, `none`
    consolidator: str = "extractive"
    #: consolidate a session in the background after this many new turns (0: never by itself)
    consolidate_after_turns: int = 20
    #: at most one background consolidation of a session per this many seconds
    consolidate_cooldown_seconds: float = 300.0
    #: the `llm` consolidator's OpenAI-compatible server (its `/v1` URL)
    consolidator_api_url: str | None = None
    #: the `llm` consolidator's chat model
    consolidator_model: str | None = None
    #: its bearer token (masked in `repr`)
    consolidator_api_key: str | None = None
    #: seconds per chat request
    consolidator_timeout: float = 60.0
    #: attempts per chat request
    consolidator_retries: int = 3

    # -- budget --
    #: L1 share of the token budget
    budget_fraction_session: float = 0.35
    #: L2 share of the token budget
    budget_fraction_episodic: float = 0.25

    # -- reading (spec §9.6) --
    # Memories whose ``sensitivity`` is listed come back from every read with the content
    # ``"[redacted: <sensitivity>]"``; the stored memory is unchanged
    # (``ACTRONE_REDACT_SENSITIVITIES='["secret", "pii"]'`` or ``secret,pii``).
    #: memories of these sensitivities are read back as `[redacted: <sensitivity>]` (JSON list or
    #: `a,b`)
    redact_sensitivities: tuple[str, ...] = ()

    # -- input limits --
    # Longest message, memory or query accepted, in characters (longer ones are rejected).
    #: longest message, memory or query accepted
    max_text_chars: int = 200_000

    # -- observability --
    # Spans and latency histograms through OpenTelemetry when ``opentelemetry-api`` is
    # installed (the ``[otel]`` extra); the application's tracer and meter providers decide
    # where they go. Off, the manager never imports opentelemetry.
    #: spans and latency histograms through OpenTelemetry when `opentelemetry-api` is installed
    #: (`[otel]`; docs/observability.md)
    otel_enabled: bool = True
    # Also record query text, agent, session, memory and turn ids, and exception messages on
    # spans. Memory and turn texts are never recorded.
    #: also record query text, ids and exception messages on spans (never memory or turn texts)
    otel_record_content: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> MemoryConfig:
        """Build a config from ``environ`` (default ``os.environ``) with ``overrides`` on top."""
        return _build(cls, overrides, os.environ if environ is None else environ)

    @property
    def session_ttl_seconds(self) -> float:
        """``session_ttl_hours`` in seconds, as the stores take it."""
        return self.session_ttl_hours * 3600.0

    def replace(self, **changes: Any) -> MemoryConfig:
        """A copy with ``changes`` applied (validated again; the environment is not re-read)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values.update(changes)
        return _build(type(self), values, {})

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (secrets masked: API keys, passwords in DSNs and URLs)."""
        out = dataclasses.asdict(self)
        for key in _SECRET_FIELDS:
            if out.get(key):
                out[key] = "***"
        for key in _URL_FIELDS:
            if out.get(key):
                out[key] = redact(out[key])
        return out

    def __repr__(self) -> str:
        # Written by hand (the dataclass keeps it) so that a config printed or logged shows no
        # API key and no password.
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"{type(self).__name__}({fields})"


# The dataclass machinery generated a typed ``__init__``; keep it, and make the public constructor
# layer the environment under the explicit keywords before calling it.
_raw_init = MemoryConfig.__init__


def _public_init(self: MemoryConfig, **kwargs: Any) -> None:
    values = resolve(type(self), kwargs, os.environ)
    _raw_init(self, **values)


MemoryConfig.__init__ = _public_init  # type: ignore[method-assign]


def _build(
    cls: type[MemoryConfig], explicit: Mapping[str, Any], environ: Mapping[str, str]
) -> MemoryConfig:
    obj = cls.__new__(cls)
    _raw_init(obj, **resolve(cls, explicit, environ))
    return obj


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot hold the actrone tables, or ``None`` if it can.

    The one rule for a schema name, used by the config and by the migrations: a plain lower-case
    identifier that is not one of the server's own schemas.
    """
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        return (
            f"{schema!r} is not a plain identifier (lower-case letters, digits and underscores, "
            "starting with a letter or underscore, at most 63 characters)"
        )
    if _SYSTEM_SCHEMA.fullmatch(schema):
        return (
            f"{schema!r} is a PostgreSQL system schema (pg_* and information_schema are the "
            "server's own); choose a schema of your own, such as the default 'actrone'"
        )
    return None


def _validate(cfg: MemoryConfig) -> None:
    def fail(field_name: str, message: str) -> None:
        raise ConfigurationError(field_name, message)

    if cfg.backend not in BACKENDS:
        fail("backend", f"unknown backend {cfg.backend!r}; choose one of {', '.join(BACKENDS)}")
    if cfg.embedding_provider not in EMBEDDING_PROVIDERS:
        fail(
            "embedding_provider",
            f"unknown provider {cfg.embedding_provider!r}; "
            f"choose one of {', '.join(EMBEDDING_PROVIDERS)}",
        )
    problem = schema_problem(cfg.postgres_schema)
    if problem is not None:
        fail("postgres_schema", problem)
    if cfg.postgres_distribute not in DISTRIBUTE_MODES:
        fail(
            "postgres_distribute",
            f"unknown mode {cfg.postgres_distribute!r}; "
            f"choose one of {', '.join(DISTRIBUTE_MODES)}",
        )
    if not _TEXT_SEARCH_CONFIG.fullmatch(cfg.postgres_text_search_config):
        fail(
            "postgres_text_search_config",
            f"{cfg.postgres_text_search_config!r} is not a plain identifier",
        )
    if not _COLLECTION_PREFIX.fullmatch(cfg.qdrant_collection_prefix):
        fail("qdrant_collection_prefix", "use letters, digits, '_' or '-' (at most 64)")
    if cfg.postgres_dsn is not None:
        _validate_dsn(cfg.postgres_dsn)
    for name in (
        "max_session_turns",
        "max_episodic_memories",
        "rrf_k",
        "rerank_top_k",
        "postgres_pool_min_size",
        "postgres_pool_max_size",
        "embedding_batch_size",
        "query_cache_size",
        "max_text_chars",
        "redis_pool_size",
    ):
        if getattr(cfg, name) < 1:
            fail(name, f"must be at least 1, got {getattr(cfg, name)}")
    if cfg.embedding_threads < 0:
        fail("embedding_threads", "must be 0 (let onnxruntime decide) or a positive count")
    if cfg.embedding_dimensions is not None and cfg.embedding_dimensions < 1:
        fail("embedding_dimensions", "must be at least 1")
    if cfg.postgres_pool_max_size < cfg.postgres_pool_min_size:
        fail("postgres_pool_max_size", "must be at least postgres_pool_min_size")
    if cfg.consolidator not in CONSOLIDATORS:
        fail(
            "consolidator",
            f"unknown consolidator {cfg.consolidator!r}; choose one of {', '.join(CONSOLIDATORS)}",
        )
    if cfg.consolidator == "llm":
        for name in ("consolidator_api_url", "consolidator_model"):
            if not (getattr(cfg, name) or "").strip():
                fail(name, "is required with consolidator='llm' (an OpenAI-compatible server)")
    if not (math.isfinite(cfg.neighbour_weight) and 0.0 <= cfg.neighbour_weight <= 1.0):
        fail("neighbour_weight", f"must be between 0 (off) and 1, got {cfg.neighbour_weight}")
    if cfg.consolidate_after_turns < 0:
        fail("consolidate_after_turns", "must be 0 (never by itself) or a number of turns")
    if cfg.consolidate_cooldown_seconds < 0:
        fail("consolidate_cooldown_seconds", "must be at least 0")
    if not (math.isfinite(cfg.redis_session_grace_hours) and cfg.redis_session_grace_hours >= 0):
        fail(
            "redis_session_grace_hours",
            f"must be 0 (none) or a number of hours, got {cfg.redis_session_grace_hours}",
        )
    if cfg.consolidator_retries < 1:
        fail("consolidator_retries", f"must be at least 1, got {cfg.consolidator_retries}")
    if cfg.postgres_ann_min_memories < 0:
        fail("postgres_ann_min_memories", "must be 0 (never) or a number of memories")
    if not 1 <= cfg.postgres_ann_ef_search <= 1000:
        fail("postgres_ann_ef_search", f"must lie in [1, 1000], got {cfg.postgres_ann_ef_search}")
    for name in (
        "session_ttl_hours",
        "postgres_connect_timeout",
        "postgres_statement_timeout",
        "redis_timeout",
        "qdrant_timeout",
        "consolidator_timeout",
    ):
        if getattr(cfg, name) <= 0:
            fail(name, f"must be greater than 0, got {getattr(cfg, name)}")
    if cfg.relevance_threshold is not None and not (0.0 < cfg.relevance_threshold < 1.0):
        fail("relevance_threshold", f"must lie in (0, 1), got {cfg.relevance_threshold}")
    if cfg.text_analyzer not in ANALYZERS:
        choices = " or ".join(ANALYZERS)
        fail("text_analyzer", f"unknown analyzer {cfg.text_analyzer!r}; choose {choices}")
    if not (math.isfinite(cfg.bm25_k1) and cfg.bm25_k1 > 0.0):
        fail("bm25_k1", f"must be greater than 0, got {cfg.bm25_k1}")
    if not (0.0 <= cfg.bm25_b <= 1.0):
        fail("bm25_b", f"must lie in [0, 1], got {cfg.bm25_b}")
    least = required_weights()
    if not least <= len(cfg.rrf_weights) <= len(CHANNELS):
        names = ", ".join(c.name for c in CHANNELS[:least])
        names += "".join(f"[, {c.name}]" for c in CHANNELS[least:])
        count = f"{least}" if least == len(CHANNELS) else f"{least} to {len(CHANNELS)}"
        fail("rrf_weights", f"expected {count} weights ({names}), got {cfg.rrf_weights}")
    if any(w < 0 for w in cfg.rrf_weights) or not any(w > 0 for w in cfg.rrf_weights):
        fail("rrf_weights", f"weights must be ≥ 0 with at least one > 0, got {cfg.rrf_weights}")
    for name in ("relevance_weight", "recency_weight"):
        if not (0.0 <= getattr(cfg, name) <= 1.0):
            fail(name, f"must lie in [0, 1], got {getattr(cfg, name)}")
    if not math.isclose(cfg.relevance_weight + cfg.recency_weight, 1.0, abs_tol=1e-9):
        fail(
            "relevance_weight",
            f"relevance_weight + recency_weight must equal 1.0, got "
            f"{cfg.relevance_weight} + {cfg.recency_weight}",
        )
    for name in ("budget_fraction_session", "budget_fraction_episodic"):
        if not (0.0 < getattr(cfg, name) < 1.0):
            fail(name, f"must lie in (0, 1), got {getattr(cfg, name)}")
    if cfg.budget_fraction_session + cfg.budget_fraction_episodic > 1.0 + 1e-9:
        fail(
            "budget_fraction_episodic",
            "budget_fraction_session + budget_fraction_episodic must be at most 1.0",
        )
    if not cfg.rerank_model.strip():
        fail("rerank_model", "must name a model id or directory")


DSN_EXAMPLES = (
    "a URI such as postgresql://user:password@localhost:5432/dbname or key=value pairs such as "
    "'host=localhost port=5432 dbname=actrone user=actrone'; leave it unset for the embedded server"
)


def _validate_dsn(dsn: str) -> None:
    """Refuse a ``postgres_dsn`` that is no connection string, before anything connects.

    Without this, ``ACTRONE_POSTGRES_DSN=localhost`` fails later with an error about the
    schema. psycopg's own parser (libpq's rules) is used where installed; it is imported here,
    only for a DSN that is set, so the memory backend still needs no driver.
    """
    shown = redact(dsn)
    if not dsn.strip():
        raise ConfigurationError("postgres_dsn", f"is empty; expected {DSN_EXAMPLES}")
    try:
        from psycopg import conninfo
    except ImportError:
        words = dsn.split()
        if re.match(r"postgres(ql)?://", dsn) or (words and all("=" in w for w in words)):
            return
        reason = "neither a postgresql:// URI nor key=value pairs"
    else:
        try:
            conninfo.conninfo_to_dict(dsn)
            return
        except Exception as exc:  # psycopg.ProgrammingError, raised for any unparsable string
            reason = redact(str(exc).strip())
    raise ConfigurationError(
        "postgres_dsn",
        f"{shown!r} is not a PostgreSQL connection string ({reason}); expected {DSN_EXAMPLES}",
    )
