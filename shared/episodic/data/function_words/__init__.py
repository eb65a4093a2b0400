"""Function words per language (see README.md here): data, read with importlib.resources."""
