"""Topic configs and topic deletion (RocketMQ's ``broker/topic``)."""
