"""Consumers (RocketMQ's push and lite pull consumers and their parts: rebalance,
process queues, offset stores, listener calls), run in the user's process."""
