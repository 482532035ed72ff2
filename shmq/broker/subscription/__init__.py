"""Subscription groups (RocketMQ's ``broker/subscription``)."""
