"""The ``shmq`` command line (import name ``shmq_cli``): a click app, one module per command
group, registered lazily in ``shmq_cli.main`` so a command that needs no numba kernel starts
fast."""
