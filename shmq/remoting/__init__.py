"""Control-plane framing (RocketMQ RemotingCommand over TCP), request and response codes."""
