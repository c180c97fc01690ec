"""Typed field readers for JSON request bodies that fail with a 400 naming the field.

JSON booleans are Python ints, so every integer reader rejects ``True``/``False``
explicitly: ``"max_tokens": true`` is a client mistake, not ``1``.
"""

from __future__ import annotations

from typing import Any

from .app import ApiError

Body = dict[str, Any]


def opt_int(body: Body, name: str, default: int | None, minimum: int, maximum: int | None = None) -> int | None:
    """Integer field ``name`` within [minimum, maximum], or ``default`` if absent/null."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(f"'{name}' must be an integer", param=name)
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ApiError(f"'{name}' must be >= {minimum}{upper}, got {value}", param=name)
    return value


def opt_number(body: Body, name: str, minimum: float | None = None, maximum: float | None = None) -> None:
    """Type- and range-check an accepted-but-ignored numeric field (e.g. temperature)."""
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(f"'{name}' must be a number", param=name)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ApiError(f"'{name}' must be between {minimum} and {maximum}, got {value}", param=name)


def opt_bool(body: Body, name: str, default: bool) -> bool:
    """Boolean field ``name``, or ``default`` if absent/null."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(f"'{name}' must be a boolean", param=name)
    return value


def opt_str(body: Body, name: str, default: str | None, choices: tuple[str, ...] | None = None) -> str | None:
    """String field ``name`` (optionally one of ``choices``), or ``default`` if absent/null."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ApiError(f"'{name}' must be a string", param=name)
    if choices is not None and value not in choices:
        raise ApiError(f"'{name}' must be one of {list(choices)}, got {value!r}", param=name)
    return value


def opt_object(body: Body, name: str) -> Body:
    """Object field ``name``, or an empty dict if absent/null."""
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(f"'{name}' must be an object", param=name)
    return value


def require_n_is_one(body: Body) -> None:
    """Reject ``n`` > 1: each server produces exactly one choice per request."""
    value = body.get("n")
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError("'n' must be an integer", param="n")
    if value != 1:
        raise ApiError(f"only n=1 is supported, got n={value}", param="n", code="unsupported_parameter")


def reject_if_set(body: Body, name: str, harmless: tuple[Any, ...] = (None, False, 0, "", [])) -> None:
    """400 if an unsupported option is given a value that would change the response."""
    value = body.get(name)
    if any(value is h or (type(value) is type(h) and value == h) for h in harmless):
        return
    raise ApiError(f"'{name}' is not supported by this server", param=name, code="unsupported_parameter")
