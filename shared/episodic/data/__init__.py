"""episodic's data files (the irregular English word forms query_focus reads), read with
importlib.resources; a package so that setuptools ships it as one (package data)."""
