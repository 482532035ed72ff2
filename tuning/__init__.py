"""Host tuning for shmq (import name ``shmq_tuning``): ``shmq tune check`` and ``apply``.

RocketMQ's docs recommend kernel settings (``vm.max_map_count``, ``vm.swappiness``, dirty
page writeback, file and memlock limits, the deadline I/O scheduler) and JVM options
(``-XX:+AlwaysPreTouch``, G1). This package holds those recommendations, adapted to shmq, as
profiles (``profiles/*.toml``, data), and the code that compares a host with a profile and
changes it:

- ``model``: one reported ``Setting`` and the ``Fix`` that ``apply`` would make;
- ``profile``: loading and validating a profile (the data is in ``profiles/``);
- ``host``: reading ``/proc`` and ``/sys`` under a root directory (tests use a fake tree);
- ``kernel``, ``blockdev``, ``shm``, ``runtime``: the checks, one module per kind;
- ``check``: all checks for a profile, a store directory and a broker config;
- ``apply``: writing fixes (or printing them with ``dry_run``) and ``--persist`` files.

The runtime settings themselves (the broker's ``[tuning]`` table) are applied by the broker:
``shmq.broker.config.tuning``, which this package reads and never the other way round.
"""
