"""The recall service."""
