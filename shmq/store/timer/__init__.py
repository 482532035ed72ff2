"""RocketMQ 5's timer store: the TimerLog and the timer wheel (``store/timer``)."""
