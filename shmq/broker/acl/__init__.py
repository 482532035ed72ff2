"""RocketMQ 4.9's plain ACL (ACL 1.0): ``plain_acl.yml``'s accounts and whitelists
(``plain_config``, ``plain_file``), the address patterns (``address``), the permission words
(``permission``), the one check every request passes (``validator``: remoting through
``remoting``, gRPC through ``shmq.proxy.authorization``) and the gRPC proxy's own account
(``inner``)."""
