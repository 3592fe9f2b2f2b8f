"""Evidence retrieval quality on conversations (``actrone-pg eval``, docs/quality.md).

:mod:`~actrone_pg.evaluation.loader` reads LoCoMo and the project's JSON Lines format,
:mod:`~actrone_pg.evaluation.runner` measures configurations through the public API, and
:mod:`~actrone_pg.evaluation.metrics` scores the rankings. docs/quality.md has the measurements.
"""

from __future__ import annotations

from actrone_pg.evaluation.loader import (
    Conversation,
    DialogTurn,
    EvalFormatError,
    Question,
    load_conversations,
    shipped_conversations,
)
from actrone_pg.evaluation.metrics import OVERALL, QueryResult, Scores
from actrone_pg.evaluation.runner import (
    CachingEmbedder,
    ConfigResult,
    EvalConfig,
    EvalReport,
    build_config,
    parse_overrides,
    run_eval,
)

__all__ = [
    "OVERALL",
    "CachingEmbedder",
    "ConfigResult",
    "Conversation",
    "DialogTurn",
    "EvalConfig",
    "EvalFormatError",
    "EvalReport",
    "QueryResult",
    "Question",
    "Scores",
    "build_config",
    "load_conversations",
    "parse_overrides",
    "run_eval",
    "shipped_conversations",
]
