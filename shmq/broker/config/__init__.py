"""Broker configuration: broker.conf keys, RocketMQ's keys shmq ignores, run-time
updates, the README's reference, and the runtime tuning table."""
