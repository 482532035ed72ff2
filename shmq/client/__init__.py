"""Clients: producer and consumers over shared-memory rings and the store's mapped files."""
