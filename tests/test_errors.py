"""The error tree: each kind carries the exit code the README documents, one function maps an
exception to it, and the old name `UserError` still catches every kind."""

from __future__ import annotations

import pytest

from sagemeter.errors import (
    EngineError,
    InputError,
    ManyProblems,
    PlatformError,
    SagemeterError,
    TransportError,
    UserError,
    exit_code,
    reworded,
)

DOCUMENTED = [  # README "Exit codes"
    (SagemeterError, 2),
    (InputError, 2),
    (PlatformError, 4),
    (EngineError, 5),
    (TransportError, 6),
]


@pytest.mark.parametrize(("kind", "code"), DOCUMENTED, ids=[k.__name__ for k, _ in DOCUMENTED])
def test_every_kind_maps_to_its_documented_exit_code(kind: type[SagemeterError], code: int) -> None:
    assert exit_code(kind("a message")) == code


def test_many_problems_is_input_and_exits_2() -> None:
    problems = ManyProblems("plan.toml", ["a: bad", "b: bad"])
    assert isinstance(problems, InputError) and exit_code(problems) == 2


def test_anything_else_is_exit_1() -> None:
    assert exit_code(ValueError("not ours")) == 1


@pytest.mark.parametrize("kind", [k for k, _ in DOCUMENTED])
def test_except_user_error_still_catches_every_kind(kind: type[SagemeterError]) -> None:
    assert UserError is SagemeterError
    with pytest.raises(UserError) as caught:
        raise kind("the message a person acts on")
    assert str(caught.value) == "the message a person acts on"


@pytest.mark.parametrize("kind", [k for k, _ in DOCUMENTED])
def test_a_reworded_error_keeps_its_kind(kind: type[SagemeterError]) -> None:
    again = reworded(kind("first"), "first (before that: more)")
    assert type(again) is kind and str(again) == "first (before that: more)"
    assert exit_code(again) == exit_code(kind("x"))


def test_a_plans_problems_keep_the_kind_of_a_failure_among_them() -> None:
    """A plan's checks report every problem at once; when one of them is the cloud failing
    (AccessDenied reading an endpoint), the report exits as a cloud failure (4), not as bad
    input (2); problems that are all input stay input."""
    from sagemeter.experiment.runner import _collect, _Problems, _raise_all

    def denied() -> None:
        raise PlatformError("AccessDenied: sagemaker:DescribeEndpoint")

    def misspelt() -> None:
        raise UserError('arm "a".target: unknown checkpoint')

    mixed = _Problems()
    _collect(mixed, misspelt)
    _collect(mixed, denied)
    with pytest.raises(PlatformError) as raised:
        _raise_all(mixed, "plan.toml")
    assert exit_code(raised.value) == 4
    assert str(raised.value).splitlines() == [
        "plan.toml: 2 problems, one a line:",
        '  arm "a".target: unknown checkpoint',
        "  AccessDenied: sagemaker:DescribeEndpoint",
    ]
    inputs = _Problems()
    _collect(inputs, misspelt)
    with pytest.raises(UserError) as only:
        _raise_all(inputs, "plan.toml")
    assert exit_code(only.value) == 2 and str(only.value) == 'arm "a".target: unknown checkpoint'
