"""clients/stubs/README.md tells a new user what .ci/run installs: the same lines."""

from __future__ import annotations

import pytest

from tests.polyglot.toolchains import GO_PACKAGES, JAVA_PACKAGES, REPO, install_command


def _words(path: str) -> str:
    return " ".join((REPO / path).read_text().replace("\\\n", " ").split())


@pytest.mark.parametrize("packages", [GO_PACKAGES, JAVA_PACKAGES], ids=["go", "java"])
def test_the_readme_recipe_is_what_ci_installs(packages: tuple[str, ...]) -> None:
    # The Go line names golang-github-golang-protobuf-1-5-dev: apt picks 1.3 otherwise.
    assert install_command(packages) in _words("clients/stubs/README.md")
    assert " ".join(packages) in _words(".ci/run")
