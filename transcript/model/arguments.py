"""Checks of a public call's arguments: a value of the wrong type is `InvalidArgument` naming the
parameter, raised before anything is done.

Python's duck typing would let a wrong value travel until something deep inside fails with a
`TypeError` or `AttributeError`; a caller of this library gets a `TranscriptError` instead. `True` is
no number here (a flag passed where a count belongs is a mistake), and a string is not a sequence of
items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from transcript.model.errors import InvalidArgument

_T = TypeVar("_T")


def _names(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(t.__name__ for t in types)


def check_type(
    value: object, expected: type | tuple[type, ...], name: str, *, optional: bool = False
) -> None:
    """`value` is an instance of `expected` (None too when `optional`)."""
    if value is None and optional:
        return
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        raise InvalidArgument(f"{name} must be {_names(expected)}, not a bool")
    if not isinstance(value, types):
        none = " or None" if optional else ""
        raise InvalidArgument(f"{name} must be {_names(expected)}{none}, not {type(value).__name__}")


def check_flag(value: object, name: str) -> None:
    """`value` is True or False."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, not {type(value).__name__}")


def check_callable(value: object, name: str) -> None:
    """`value` is None or something that can be called."""
    if value is not None and not callable(value):
        raise InvalidArgument(f"{name} must be callable or None, not {type(value).__name__}")


def check_items(value: object, expected: type[_T] | tuple[type, ...], name: str) -> list[_T]:
    """The items of a list, tuple or other iterable (not a string, bytes or a mapping), each an
    instance of `expected`."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise InvalidArgument(f"{name} must be a list of {_names(expected)}, not {type(value).__name__}")
    items: list[Any] = list(value)
    for index, item in enumerate(items):
        if not isinstance(item, expected):
            raise InvalidArgument(f"{name}[{index}] must be {_names(expected)}, not {type(item).__name__}")
    return items


def check_mapping(value: object, name: str) -> None:
    """`value` is None or a mapping with string keys."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{name} must be a mapping (dict) or None, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidArgument(f"{name} keys must be strings, not {type(key).__name__}")
