"""The ``shmq`` command line (import name ``shmq_cli``): one module per command group."""
