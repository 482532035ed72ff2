"""The broker's request processors, one per RocketMQ processor (send, pull, reply,
end transaction, admin, and the control plane's client and consumer management), run by
the supervisor's servers; each gets a narrow broker context, never the supervisor."""
