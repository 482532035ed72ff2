"""A client's data paths to a broker: shared memory on the broker's host (rings and the
store's mapped files), RocketMQ's send and pull codes over TCP elsewhere."""
