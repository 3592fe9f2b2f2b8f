"""The layers of :class:`actrone_pg.manager.MemoryManager`, one concern a module.

Each module holds one layer, a class the next one builds on; :mod:`actrone_pg.manager` puts them
together and says which is which. Nothing here is public: import from :mod:`actrone_pg`.
"""
