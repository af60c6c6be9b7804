"""The server's own endpoints: probes, metrics, load, version, this document, and llama-server's
router endpoints over several models."""
