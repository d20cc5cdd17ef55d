"""Ember: long-term memory for an agent runtime whose conversations live in PostgreSQL."""

__version__ = "0.1.0"
