"""Importers for real agent logs: adapters per format, redaction, conversion and the `knowlyr-recorder` CLI."""
