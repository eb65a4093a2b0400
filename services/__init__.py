"""Deployable services: `python -m services.<name>`."""
