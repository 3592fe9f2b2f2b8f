"""``actrone-pg bench``: ingest, retrieval latency and candidate recall, with an optional reference.

The library never imports this package (``actrone-pg eval`` borrows its reference environment
and :func:`~actrone_pg.bench.reference.run_driver`); it is the command's code, kept apart:

- :mod:`~actrone_pg.bench.workload`: the synthetic data, the timed run and the recall check
  (no terminal output, shared by the command and the tests);
- :mod:`~actrone_pg.bench.command`: the command's options, progress and tables;
- :mod:`~actrone_pg.bench.reference`: the reference system (actrone-memory 0.3.0) in its own
  virtual environment, driven through :mod:`~actrone_pg.bench.reference_driver`, a script that
  only that environment runs.

What each number means: ``docs/benchmarks.md``.
"""
