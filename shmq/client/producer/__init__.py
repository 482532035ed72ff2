"""Producers (RocketMQ's ``DefaultMQProducer`` and its parts), run in the user's process."""
