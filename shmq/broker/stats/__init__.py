"""A broker's numbers: runtime info, RocketMQ's stats items, rates, consumers' gets."""
