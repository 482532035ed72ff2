"""Transactional producers (RocketMQ's ``TransactionMQProducer``) and their value types."""
