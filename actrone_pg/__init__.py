"""actrone_pg: memory for LLM agents, assembled inside a token budget, at home in PostgreSQL.

from actrone_pg import MemoryManager, MemoryConfig

mm = await MemoryManager.create(MemoryConfig())
await mm.store_turn("agent", "session", "hi", "hello!")
await mm.inject_memory("agent", "The user is allergic to peanuts")
ctx = await mm.retrieve_context("agent", "session", "what can I cook?", token_budget=2000)
"""

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import (
    ActroneError,
    ConfigurationError,
    ConsolidationError,
    DimensionMismatchError,
    EmbedderError,
    ManagerClosedError,
    ManagerUsageError,
    MemoryNotFoundError,
    MissingDependencyError,
    ModelNotAvailableError,
    PoolSaturatedError,
    RerankerError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from actrone_pg.manager import MemoryManager, create_memory_manager
from actrone_pg.models import Explain, Memory, MemoryPage, RetrievedContext, SessionInfo, Turn

__version__ = "0.1.0"

__all__ = [
    "ActroneError",
    "ConfigurationError",
    "ConsolidationError",
    "DimensionMismatchError",
    "EmbedderError",
    "Explain",
    "ManagerClosedError",
    "ManagerUsageError",
    "Memory",
    "MemoryConfig",
    "MemoryManager",
    "MemoryNotFoundError",
    "MemoryPage",
    "MissingDependencyError",
    "ModelNotAvailableError",
    "PoolSaturatedError",
    "RerankerError",
    "RetrievedContext",
    "SchemaError",
    "SessionInfo",
    "StoreError",
    "StoreUnavailableError",
    "Turn",
    "ValidationError",
    "create_memory_manager",
]
