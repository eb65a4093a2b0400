"""A dataset name has one grammar (episodic.validation.DATASET_PATTERN), checked for every
RPC, key scope, import and the CLI's integrations (issue 41): a segment of nothing but dots
is refused, so ``ten/../dsB`` can never be a name inside a tenant's prefix."""

from __future__ import annotations

import pytest

from episodic.access import check_scopes
from episodic.errors import InvalidArgument
from episodic.validation import DATASET_PATTERN, MAX_DATASET_CHARS, check_dataset

LEGAL = ["user_42", "acme/user_42", "a.b", "..a", "x.y/z..w", "ops@acme:prod/eu-1"]
ILLEGAL = [
    "ten/../dsB",
    "ten/./dsB",
    "..",
    ".",
    "ten/...",
    "a//b",
    "/a",
    "a/",
    "a b",
    "caf\u00e9",  # not ASCII: no look-alikes, nothing to normalise
    "a\u200bb",  # an invisible character
    "a\nb",
    "ten/dsB\n",  # fullmatch: a trailing newline is not the end of the name
    "x" * (MAX_DATASET_CHARS + 1),
]


@pytest.mark.parametrize("name", LEGAL)
def test_legal_names_pass_everywhere(name: str) -> None:
    assert check_dataset(name) == name
    assert check_scopes([name]) == (name,)
    assert check_scopes([name + "/*"]) == (name + "/*",)


@pytest.mark.parametrize("name", ILLEGAL)
def test_illegal_names_are_refused_everywhere(name: str) -> None:
    assert not (len(name) <= MAX_DATASET_CHARS and DATASET_PATTERN.fullmatch(name))
    with pytest.raises(InvalidArgument, match="dataset"):
        check_dataset(name)
    if name.strip() != name and DATASET_PATTERN.fullmatch(name.strip()):
        # A key's scopes are typed on a command line: surrounding blanks are trimmed.
        assert check_scopes([name]) == (name.strip(),)
        return
    with pytest.raises(InvalidArgument):
        check_scopes([name])
    with pytest.raises(InvalidArgument):
        check_scopes([name + "/*"])
