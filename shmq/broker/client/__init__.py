"""What the broker knows of its clients (RocketMQ's ``broker/client``): shared-memory
slots, the online consumers of each group, orderly consumers' queue locks."""
