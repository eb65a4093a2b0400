"""The summariser service."""
