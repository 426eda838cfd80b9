"""Integrations with agent frameworks (each imports its framework lazily)."""
