"""The NameServer: route registry and its server."""
