"""RocketMQ's ``AdminBrokerProcessor`` (and ``Broker2Client``), one object per concept:
topics, queue offset lookups, status (runtime info, HA), lookups of one entry, queue
inspection, and the processor proper (statistics, connections, groups, offsets, config)."""
