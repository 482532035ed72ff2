"""Replication state and failover, kept by the supervisor: the HA status a broker
reports, a SYNC_MASTER's sync state set, a slave's metadata copy, controller mode."""
