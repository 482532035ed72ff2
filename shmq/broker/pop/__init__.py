"""RocketMQ 5's POP consumption in the broker: checkpoints, acks, revive."""
