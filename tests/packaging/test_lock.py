"""The lock files (requirements/, written by `make lock`) match pyproject.toml: every
dependency there is pinned, with hashes, at a version its specifier allows. A dependency
added or tightened without `make lock` fails here, before the image or `make install`
could ship something else."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "requirements"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
# The image leaves out the model hub client (requirements/lock.sh says why).
NOT_IN_IMAGE = frozenset({"huggingface-hub"})


def pins(*names: str) -> dict[str, str]:
    """Package → pinned version of the lock files ``names`` (markers that never match on
    Linux, e.g. ``sys_platform == 'never'``, leave a package out)."""
    found: dict[str, str] = {}
    for name in names:
        text = (LOCKS / name).read_text()
        for block in re.split(r"\n(?=[a-z0-9])", text):
            match = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)(?:\s*;\s*([^\\\n]+))?", block)
            if not match:
                continue
            assert "--hash=sha256:" in block, f"{name}: {match.group(1)} has no hash"
            if match.group(3) and "'never'" in match.group(3):
                continue
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def requirements(extra: str, seen: frozenset[str] = frozenset()) -> list[Requirement]:
    """The requirements of ``extra`` and of the core, with the project's own extras
    (``episodic[server]``) expanded."""
    result = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for text in EXTRAS[extra]:
        req = Requirement(text)
        if canonicalize_name(req.name) == "episodic":
            for inner in req.extras - seen:
                result += requirements(inner, seen | {extra})
        else:
            result.append(req)
    return result


def assert_pinned(
    reqs: list[Requirement], locked: dict[str, str], skip: frozenset[str] = frozenset()
) -> None:
    env = default_environment() | {"python_version": "3.11", "python_full_version": "3.11.2"}
    env |= {"sys_platform": "linux", "platform_machine": "x86_64"}
    for req in reqs:
        name = canonicalize_name(req.name)
        if name in skip or (req.marker and not req.marker.evaluate(env)):
            continue
        assert name in locked, f"{name} is not in the lock: run `make lock`"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"{name}=={locked[name]} does not satisfy {req}: run `make lock`"
        )


def test_make_install_lock_pins_every_dev_dependency() -> None:
    assert_pinned(requirements("dev"), pins("dev.txt"))


@pytest.mark.parametrize("extra", ["embedded", "mcp", "multilingual"])
def test_image_locks_pin_every_server_dependency_and_each_extra(extra: str) -> None:
    assert_pinned(requirements("server"), pins("image-server.txt"), NOT_IN_IMAGE)
    both = pins("image-server.txt", f"image-{extra}.txt")
    assert_pinned(requirements(extra), both, NOT_IN_IMAGE)


def test_the_image_runs_the_versions_the_tests_run() -> None:
    dev = pins("dev.txt")
    for name in (
        "image-server.txt",
        "image-embedded.txt",
        "image-mcp.txt",
        "image-multilingual.txt",
    ):
        for package, version in pins(name).items():
            assert dev.get(package) == version, (
                f"{name}: {package}=={version}, dev.txt: {dev.get(package)}"
            )


def test_build_lock_pins_pip_and_setuptools() -> None:
    build = pins("build.txt")
    assert {"pip", "setuptools"} <= set(build)
    backend = Requirement(PYPROJECT["build-system"]["requires"][0])
    assert backend.specifier.contains(build["setuptools"])
