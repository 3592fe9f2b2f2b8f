"""The collaborators of :class:`actrone_pg.manager.MemoryManager`, one concern a module.

The manager builds one :class:`~actrone_pg._manager.context.ManagerContext` and hands it to each
collaborator; its public methods are theirs, forwarded (:mod:`actrone_pg._forward`).
Nothing here is public: import from :mod:`actrone_pg`.
"""
