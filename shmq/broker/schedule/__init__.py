"""The schedule agent's two sources of due messages: RocketMQ's delay levels and
RocketMQ 5's timer wheel. Run in the schedule agent's process."""
