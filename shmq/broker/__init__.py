"""The broker process group: supervisor, agents (writer, reput, flush) and control server."""
