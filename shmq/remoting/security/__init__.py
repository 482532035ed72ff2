"""Securing remoting: ACL request signatures (``signature``, ``credentials``) and TLS
(``tls`` the clients' side, ``tls_server`` the servers', ``tls_socket`` a client socket
shared by a reader and writers, ``self_signed`` test-mode certificates)."""
