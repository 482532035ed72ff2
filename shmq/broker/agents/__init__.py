"""The broker's agents: one module per agent process (writer, reput, flush, cleaner,
schedule, HA service and client) and the runner that drives each in its own process."""
