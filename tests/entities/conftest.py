"""The four services as real processes (the privacy tests' fixture: encryption on unless
the test asks otherwise)."""

from tests.privacy.conftest import suite  # noqa: F401 - a fixture, used by name
