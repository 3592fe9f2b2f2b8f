"""Every error actrone_pg raises.

The tree::

    ActroneError
    ├── ConfigurationError (also ValueError)   a MemoryConfig field is invalid
    ├── ValidationError (also ValueError)      an argument of a call is invalid
    │   ├── DimensionMismatchError             a vector of the wrong length
    │   └── MemoryNotFoundError                the agent has no such (current) memory
    ├── MissingDependencyError (also ImportError)
    │                                          an optional extra is not installed
    ├── StoreError                             a backend failed
    │   ├── StoreUnavailableError              cannot reach the server (timeout, refused, lost)
    │   │   └── PoolSaturatedError             every pooled connection stayed busy: load, not
    │   │                                      an outage
    │   ├── SchemaError                        schema missing or behind, or no pgvector
    │   └── LockLostError                      a write made under a lock no longer held
    │                                          (the agent was erased meanwhile); nothing written
    ├── EmbedderError                          an embedder failed or returned bad vectors
    │   └── ModelNotAvailableError             an embedding or rerank model cannot be loaded
    ├── RerankerError                          a reranker failed
    ├── ConsolidationError                     turning turns into memories failed this time
    │                                          (nothing was written; it is retried later)
    └── ManagerUsageError (also RuntimeError)  the manager cannot serve a call made this way:
        │                                      a sync manager called from its own event loop
        └── ManagerClosedError                 the (sync) manager was used after close()

A rejected call writes nothing: every ``ValidationError`` is raised before any store is touched.
Every public method of ``MemoryManager`` raises only these: an exception of a store, embedder,
reranker or token counter arrives as the matching class above, the original as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "ActroneError",
    "ConfigurationError",
    "ConsolidationError",
    "DimensionMismatchError",
    "EmbedderError",
    "LockLostError",
    "ManagerClosedError",
    "ManagerUsageError",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "ModelNotAvailableError",
    "PoolSaturatedError",
    "RerankerError",
    "SchemaError",
    "StoreError",
    "StoreUnavailableError",
    "ValidationError",
]


class ActroneError(Exception):
    """Root of every error raised by actrone_pg."""


class ConfigurationError(ActroneError, ValueError):
    """A configuration value is invalid; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ValidationError(ActroneError, ValueError):
    """An argument is invalid. Nothing was written."""


class DimensionMismatchError(ValidationError):
    """A vector's length differs from the embedder's (or the stored vectors') dimensions."""


class MemoryNotFoundError(ValidationError):
    """The agent has no memory with this id (never had, deleted, or expired)."""


class MissingDependencyError(ActroneError, ImportError):
    """An optional dependency is missing; the message gives the pip line that installs it."""

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f'this feature needs the {module!r} package: pip install "actrone-pg[{extra}]"'
        )


class StoreError(ActroneError):
    """A storage backend failed."""


class StoreUnavailableError(StoreError):
    """The backend's server could not be reached within the configured timeout, or was lost
    during the call.

    A write that fails with it may still have been committed (the connection was lost while it
    committed, and the message then says so): retry it with the same id. Writes are idempotent
    by id, so the retry writes it once or finds it written.
    """


class PoolSaturatedError(StoreUnavailableError):
    """Every connection of the store's pool stayed in use by other calls for the whole wait
    (the connect timeout): the process sends more concurrent calls than the pool holds.

    The server is not known to be down, and is not treated as lost; retrying later works,
    as does a larger pool (the message names the setting) or fewer concurrent calls. A
    subclass of :class:`StoreUnavailableError`, so retry code written for it keeps working.
    """


class SchemaError(StoreError):
    """The database schema is missing, out of date, or pgvector is not installed."""


class LockLostError(StoreError):
    """A write made under a lock found the lock no longer held by its writer; nothing was written.

    A consolidation writes under the agent's maintenance lock, and the store checks the lock
    in the same transaction (or script) as the write: once ``erase_agent`` has deleted the lock
    (or it lapsed and another holder took it), the write is refused, so an erasure is never
    undone by a consolidation that was running when it came.
    """


class EmbedderError(ActroneError):
    """An embedder failed or returned unusable vectors."""


class ModelNotAvailableError(EmbedderError):
    """A model could not be found locally nor downloaded."""


class RerankerError(ActroneError):
    """A reranker failed."""


class ConsolidationError(ActroneError):
    """A consolidation could not be done now (a model service failed, the lock is held).

    Nothing was written for the turns concerned; they stay pending and are consolidated later.
    """


class ManagerUsageError(ActroneError, RuntimeError):
    """The manager cannot serve a call made this way; nothing was run.

    :class:`actrone_pg.sync.MemoryManager` raises it when called from inside its own event
    loop (from an embedder, store or reranker it runs): use the async manager there. A
    ``RuntimeError`` too, as these errors were before they had a class of their own.
    """


class ManagerClosedError(ManagerUsageError):
    """The manager was used after :meth:`close`; build a new one. Nothing was run."""
