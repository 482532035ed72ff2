"""Consumer offsets (RocketMQ's ``broker/offset``)."""
