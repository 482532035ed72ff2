"""Cluster administration (RocketMQ's ``DefaultMQAdminExt``): what ``shmq admin`` runs."""
