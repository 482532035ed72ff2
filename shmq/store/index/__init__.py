"""The IndexFile: messages by key (RocketMQ's ``store/index``)."""
