"""Typed, frozen configuration records parsed once from YAML.

A config class is a frozen dataclass whose fields are declared with :func:`param`, which carries
the unit, a one-line doc, bounds and allowed choices. :func:`parse_config` turns a YAML mapping into
an instance and rejects, with a :class:`~sim.errors.ScenarioError` naming the file, the key path and
the allowed values:

* unknown keys (the message lists the known ones),
* wrong types (``expected a number, got 'abc'``),
* out-of-range values (``must be > 0, got -5``),
* values outside a closed set of choices (``allowed: euler, implicit, implicitfast, rk4``),
* vectors of the wrong length.

The same metadata generates ``docs/scenarios.md`` (see :func:`describe_config`), so the reference
cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from sim.errors import ScenarioError

_MISSING = dataclasses.MISSING


def param(
    default: Any = _MISSING,
    *,
    unit: str = "",
    doc: str = "",
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    length: int | None = None,
    min_length: int | None = None,
) -> Any:
    """Declare a config field.

    Args:
        default: default value (omit for a required key). Lists are stored as tuples.
        unit: SI unit shown in the docs and in error messages (``"m"``, ``"N/m"``, ``"rad"``).
        doc: one-line description for ``docs/scenarios.md``.
        gt, ge, lt, le: numeric bounds, applied element-wise to vectors.
        length: exact vector length; min_length: minimum list length.
    """
    meta = dict(unit=unit, doc=doc, gt=gt, ge=ge, lt=lt, le=le, length=length, min_length=min_length)
    if default is _MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is float:
        return "a number"
    if tp is int:
        return "an integer"
    if tp is bool:
        return "true/false"
    if tp is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is tuple:
        return "a list"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return str(tp)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _check_bounds(value: float, meta: Mapping[str, Any], file: str, key: str) -> None:
    unit = f" {meta['unit']}" if meta.get("unit") else ""
    if meta.get("gt") is not None and not value > meta["gt"]:
        raise ScenarioError(f"must be > {meta['gt']}{unit}, got {value}", file=file, key=key)
    if meta.get("ge") is not None and not value >= meta["ge"]:
        raise ScenarioError(f"must be >= {meta['ge']}{unit}, got {value}", file=file, key=key)
    if meta.get("lt") is not None and not value < meta["lt"]:
        raise ScenarioError(f"must be < {meta['lt']}{unit}, got {value}", file=file, key=key)
    if meta.get("le") is not None and not value <= meta["le"]:
        raise ScenarioError(f"must be <= {meta['le']}{unit}, got {value}", file=file, key=key)


def _convert(value: Any, tp: Any, meta: Mapping[str, Any], file: str, key: str) -> Any:
    optional, inner = _is_optional(tp)
    if value is None:
        if optional:
            return None
        raise ScenarioError(f"must not be null; expected {_type_name(inner)}", file=file, key=key)
    tp = inner
    origin = get_origin(tp)
    if tp is bool:
        if not isinstance(value, bool):
            raise ScenarioError(f"expected true/false, got {value!r}", file=file, key=key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(f"expected a number, got {value!r}", file=file, key=key)
        value = float(value)
        if not math.isfinite(value):
            raise ScenarioError(f"must be finite, got {value}", file=file, key=key)
        _check_bounds(value, meta, file, key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"expected an integer, got {value!r}", file=file, key=key)
        _check_bounds(value, meta, file, key)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ScenarioError(f"expected a string, got {value!r}", file=file, key=key)
        return value
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ScenarioError(
                f"got {value!r}; allowed: {', '.join(str(a) for a in allowed)}", file=file, key=key
            )
        return value
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ScenarioError(f"expected a list, got {value!r}", file=file, key=key)
        args = get_args(tp)
        if meta.get("length") is not None and len(value) != meta["length"]:
            raise ScenarioError(
                f"expected a list of {meta['length']} values, got {len(value)}", file=file, key=key
            )
        if meta.get("min_length") is not None and len(value) < meta["min_length"]:
            raise ScenarioError(
                f"expected at least {meta['min_length']} entries, got {len(value)}", file=file, key=key
            )
        if len(args) == 2 and args[1] is Ellipsis:
            elem = args[0]
            return tuple(
                _convert(v, elem, meta if not dataclasses.is_dataclass(elem) else {}, file, f"{key}[{i}]")
                for i, v in enumerate(value)
            )
        if len(args) != len(value):
            raise ScenarioError(
                f"expected a list of {len(args)} values, got {len(value)}", file=file, key=key
            )
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_convert(v, a, meta, file, f"{key}[{i}]") for i, (v, a) in pairs)
    if dataclasses.is_dataclass(tp):
        return parse_config(tp, value, file=file, path=key)
    raise TypeError(f"unsupported config field type {tp!r} at {key}")  # programming error


def parse_config(cls: type, data: Any, *, file: str = "<scenario>", path: str = "") -> Any:
    """Parse a YAML mapping ``data`` into the frozen dataclass ``cls``.

    Args:
        cls: a dataclass whose fields were declared with :func:`param`.
        data: the mapping read from YAML (``None`` means "all defaults").
        file: the scenario file name, for messages.
        path: the dotted key path of this mapping, for messages (``"controller"``).

    Raises:
        ScenarioError: unknown key, missing required key, wrong type, out of range.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(f"expected a mapping, got {data!r}", file=file, key=path or None)
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in data:
        if key not in known:
            raise ScenarioError(
                f"unknown key {key!r}; allowed keys: {', '.join(known)}", file=file, key=path or None
            )
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        key = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _convert(data[f.name], hints[f.name], f.metadata, file, key)
        elif f.default is _MISSING and f.default_factory is _MISSING:  # type: ignore[misc]
            raise ScenarioError(f"required key missing ({_type_name(hints[f.name])})", file=file, key=key)
    try:
        obj = cls(**kwargs)
    except ScenarioError as exc:
        if exc.file is None:
            raise ScenarioError(exc.detail, file=file, key=exc.key or path or None) from exc
        raise
    except (ValueError, TypeError) as exc:
        raise ScenarioError(str(exc), file=file, key=path or None) from exc
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ScenarioError as exc:
            key = f"{path}.{exc.key}" if (path and exc.key) else (exc.key or path or None)
            raise ScenarioError(exc.detail, file=file, key=key) from exc
    return obj


def config_to_dict(obj: Any) -> Any:
    """A plain (YAML/JSON-serialisable) copy of a config record, tuples as lists."""
    if dataclasses.is_dataclass(obj):
        return {f.name: config_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [config_to_dict(v) for v in obj]
    return obj


def describe_config(cls: type, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """Rows ``(key, type/allowed, unit, default, doc)`` for every field of ``cls`` (recursing into
    nested records), used to generate docs/scenarios.md."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        key = f"{prefix}{f.name}"
        optional, tp = _is_optional(hints[f.name])
        if f.default is not _MISSING:
            default = repr(config_to_dict(f.default)) if f.default is not None else "null"
        elif f.default_factory is not _MISSING:  # type: ignore[misc]
            default = "(see nested keys)"
        else:
            default = "required"
        allowed = _type_name(tp) + (" or null" if optional else "")
        bounds = [
            f"{op} {f.metadata[name]}"
            for name, op in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))
            if f.metadata.get(name) is not None
        ]
        if f.metadata.get("length"):
            bounds.append(f"length {f.metadata['length']}")
        if bounds:
            allowed += " (" + ", ".join(bounds) + ")"
        rows.append((key, allowed, f.metadata.get("unit", ""), default, f.metadata.get("doc", "")))
        if dataclasses.is_dataclass(tp):
            rows.extend(describe_config(tp, prefix=key + "."))
    return rows
