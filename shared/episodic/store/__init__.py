"""Persistence: engine, schema migrations and the SQL each service runs."""
