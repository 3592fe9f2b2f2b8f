"""Storage backends behind one protocol, and the factory that builds one from a config.

The manager names no concrete store: :func:`create_store` imports the backend's module only when it
is asked for, so the core never imports a database driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from actrone_pg.stores.base import MemoryRecord, SearchRequest, Store

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["MemoryRecord", "SearchRequest", "Store", "create_store"]

# backend name -> (module, factory function); each factory takes the MemoryConfig.
_BACKENDS: dict[str, tuple[str, str]] = {
    "memory": ("actrone_pg.stores.memory", "from_config"),
    "postgres": ("actrone_pg.stores.postgres", "from_config"),
    "redis_qdrant": ("actrone_pg.stores.redis_qdrant", "from_config"),
}


def create_store(config: MemoryConfig) -> Store:
    """Build (but do not yet connect) the store that ``config.backend`` names."""
    module_name, factory = _BACKENDS[config.backend]
    module = importlib.import_module(module_name)
    store: Store = getattr(module, factory)(config)
    return store
