"""The broker's Prometheus endpoint (RocketMQ 5's ``metricsExporterType=PROM``): a process of
the broker's group that reads the shared counters and tables at scrape time."""
