"""Transactional messages on the broker (RocketMQ's ``broker/transaction``): the half
table, the records, the scans of the half queue and the check-back service."""
