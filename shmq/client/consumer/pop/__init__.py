"""RocketMQ 5's POP consumption on the client: ``SimpleConsumer`` (``simple``), the POP
requests (``requests``), the receipt handles they carry (``receipt``), and the messages of
a POP answer, one by one (``messages``) or as columns (``batch``)."""
