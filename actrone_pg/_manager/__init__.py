"""The collaborators of :class:`actrone_pg.manager.MemoryManager`, one concern a module.

The manager builds one :class:`~actrone_pg._manager.context.ManagerContext` and hands it to each
collaborator, and each of its public methods hands the call to one of them.
Nothing here is public: import from :mod:`actrone_pg`.
"""
