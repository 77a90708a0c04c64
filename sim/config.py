"""Typed, frozen configuration records parsed once from YAML.

A config class is a frozen dataclass whose fields are declared with :func:`param`, which carries
the unit, a one-line doc, bounds and allowed choices. :func:`parse_config` turns a YAML mapping into
an instance and rejects, with a :class:`~sim.errors.ScenarioError` naming the file, the key path and
the allowed values:

* unknown keys (the message lists the known ones),
* wrong types (``expected a number, got 'abc'``),
* out-of-range values (``must be > 0, got -5``),
* values outside a closed set of choices (``allowed: euler, implicit, implicitfast, rk4``),
* vectors of the wrong length, lists longer than their bound, strings longer than their bound,
* integers too large for a float (``10**400`` for a float key).

Every numeric key has a finite range (a lower and an upper bound, ``tests/test_scenario.py`` checks
that no field lacks one) chosen so that the physics and the memory can serve any value in it; every
list and string has a length bound. Error messages quote the offending value shortened
(:func:`short_repr`), so a huge or deeply aliased YAML value cannot blow up the message itself.

The same metadata generates ``docs/scenarios.md`` (see :func:`describe_config`), so the reference
cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from dockbench.sim.errors import ScenarioError

_MISSING = dataclasses.MISSING

#: default length bound of a string key (names, presets, modes) [characters]
MAX_STRING_LENGTH = 1000
#: default length bound of a list key without its own ``length``/``max_length`` [entries]
MAX_LIST_LENGTH = 1000

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = 6
_REPR.maxlevel = 3


def short_repr(value: Any) -> str:
    """``repr(value)`` shortened to a few dozen characters, in time and memory bounded by the
    shortening (a 400-digit integer, a 1 MB string or a deeply aliased YAML structure included)."""
    return _REPR.repr(value)


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
    max_length: int | None = None,
) -> Any:
    """Declare a config field.

    Args:
        default: default value (omit for a required key). Lists are stored as tuples.
        unit: SI unit shown in the docs and in error messages (``"m"``, ``"N/m"``, ``"rad"``).
        doc: one-line description for ``docs/scenarios.md``.
        gt, ge, lt, le: numeric bounds, applied element-wise to vectors. Every numeric field needs a
            lower (gt/ge) and an upper (lt/le) bound.
        length: exact vector length; min_length / max_length: list length bounds (lists default to
            at most :data:`MAX_LIST_LENGTH` entries); for a string, max_length bounds its length
            (default :data:`MAX_STRING_LENGTH`).
    """
    meta = dict(
        unit=unit, doc=doc, gt=gt, ge=ge, lt=lt, le=le, length=length, min_length=min_length, max_length=max_length
    )
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


def _check_bounds(value: float | int, meta: Mapping[str, Any], file: str, key: str) -> None:
    """Raise when ``value`` (a float, or an int compared exactly) is outside the field's bounds."""
    unit = f" {meta['unit']}" if meta.get("unit") else ""
    shown = short_repr(value)
    if meta.get("gt") is not None and not value > meta["gt"]:
        raise ScenarioError(f"must be > {meta['gt']}{unit}, got {shown}", file=file, key=key)
    if meta.get("ge") is not None and not value >= meta["ge"]:
        raise ScenarioError(f"must be >= {meta['ge']}{unit}, got {shown}", file=file, key=key)
    if meta.get("lt") is not None and not value < meta["lt"]:
        raise ScenarioError(f"must be < {meta['lt']}{unit}, got {shown}", file=file, key=key)
    if meta.get("le") is not None and not value <= meta["le"]:
        raise ScenarioError(f"must be <= {meta['le']}{unit}, got {shown}", file=file, key=key)


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
            raise ScenarioError(f"expected true/false, got {short_repr(value)}", file=file, key=key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(f"expected a number, got {short_repr(value)}", file=file, key=key)
        if isinstance(value, int):
            # bounds first, exactly on the integer: a 400-digit integer is out of range, not an
            # OverflowError of float()
            _check_bounds(value, meta, file, key)
            try:
                value = float(value)
            except OverflowError:
                raise ScenarioError(
                    f"integer {short_repr(value)} is too large for a number", file=file, key=key
                ) from None
        if not math.isfinite(value):
            raise ScenarioError(f"must be finite, got {value}", file=file, key=key)
        _check_bounds(value, meta, file, key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"expected an integer, got {short_repr(value)}", file=file, key=key)
        _check_bounds(value, meta, file, key)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ScenarioError(f"expected a string, got {short_repr(value)}", file=file, key=key)
        limit = meta.get("max_length") or MAX_STRING_LENGTH
        if len(value) > limit:
            raise ScenarioError(
                f"string of {len(value)} characters; at most {limit} allowed", file=file, key=key
            )
        return value
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ScenarioError(
                f"got {short_repr(value)}; allowed: {', '.join(str(a) for a in allowed)}", file=file, key=key
            )
        return value
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ScenarioError(f"expected a list, got {short_repr(value)}", file=file, key=key)
        args = get_args(tp)
        if meta.get("length") is not None and len(value) != meta["length"]:
            raise ScenarioError(
                f"expected a list of {meta['length']} values, got {len(value)}", file=file, key=key
            )
        if meta.get("min_length") is not None and len(value) < meta["min_length"]:
            raise ScenarioError(
                f"expected at least {meta['min_length']} entries, got {len(value)}", file=file, key=key
            )
        limit = meta.get("max_length") or MAX_LIST_LENGTH
        if len(value) > limit:
            raise ScenarioError(f"list of {len(value)} entries; at most {limit} allowed", file=file, key=key)
        if len(args) == 2 and args[1] is Ellipsis:
            elem = args[0]
            # the bounds apply to the elements (and the length to each row of a nested list, a matrix)
            sub = {} if dataclasses.is_dataclass(elem) else meta
            return tuple(_convert(v, elem, sub, file, f"{key}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ScenarioError(
                f"expected a list of {len(args)} values, got {len(value)}", file=file, key=key
            )
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_convert(v, a, meta, file, f"{key}[{i}]") for i, (v, a) in pairs)
    if dataclasses.is_dataclass(tp):
        return parse_config(tp, value, file=file, path=key)
    raise TypeError(f"unsupported config field type {tp!r} at {key}")  # programming error


def check_value(cls: type, name: str, value: Any, *, file: str | None = None, key: str | None = None) -> Any:
    """Validate ``value`` as the field ``name`` of the config class ``cls`` (same types, bounds and
    messages as in a scenario file), e.g. a CLI override: ``check_value(SimConfig, "duration", x,
    key="--duration")``. Returns the converted value."""
    f = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if f is None:
        raise TypeError(f"{cls.__name__} has no field {name!r}")  # programming error
    hints = typing.get_type_hints(cls)
    return _convert(value, hints[name], f.metadata, file or "", key or name)


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
        raise ScenarioError(f"expected a mapping, got {short_repr(data)}", file=file, key=path or None)
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in data:
        if key not in known:
            raise ScenarioError(
                f"unknown key {short_repr(key)}; allowed keys: {', '.join(known)}", file=file, key=path or None
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


def _init_fields(cls: type, prefix: str) -> Iterator[tuple[str, Any, bool, Any]]:
    """``(key path, dataclass field, optional, type without None)`` of each init field of ``cls``."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.init:
            optional, tp = _is_optional(hints[f.name])
            yield f"{prefix}{f.name}", f, optional, tp


def describe_config(cls: type, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """Rows ``(key, type/allowed, unit, default, doc)`` for every field of ``cls`` (recursing into
    nested records), used to generate docs/scenarios.md."""
    rows = []
    for key, f, optional, tp in _init_fields(cls, prefix):
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
        elif get_origin(tp) is tuple and get_args(tp)[-1:] == (Ellipsis,):
            lo, hi = f.metadata.get("min_length"), f.metadata.get("max_length") or MAX_LIST_LENGTH
            bounds.append(f"{lo}..{hi} entries" if lo else f"≤ {hi} entries")
        elif tp is str:
            bounds.append(f"≤ {f.metadata.get('max_length') or MAX_STRING_LENGTH} characters")
        if bounds:
            allowed += " (" + ", ".join(bounds) + ")"
        rows.append((key, allowed, f.metadata.get("unit", ""), default, f.metadata.get("doc", "")))
        if dataclasses.is_dataclass(tp):
            rows.extend(describe_config(tp, prefix=key + "."))
        elif get_origin(tp) is tuple and dataclasses.is_dataclass(get_args(tp)[0]):
            rows.extend(describe_config(get_args(tp)[0], prefix=key + "[]."))
    return rows


def walk_fields(cls: type, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(key path, dataclass field, element type)`` of every leaf field of ``cls``, recursing into
    nested records and lists of records; the element type is the scalar type of a number, a vector
    or a matrix (``float`` for ``tuple[tuple[float, ...], ...]``), else the field's type."""
    out = []
    for key, f, _, tp in _init_fields(cls, prefix):
        while get_origin(tp) is tuple:
            args = [a for a in get_args(tp) if a is not Ellipsis]
            if dataclasses.is_dataclass(args[0]):
                break
            tp = args[0]
        if dataclasses.is_dataclass(tp):
            out.extend(walk_fields(tp, key + "."))
        elif get_origin(tp) is tuple:
            out.extend(walk_fields(get_args(tp)[0], key + "[]."))
        else:
            out.append((key, f, tp))
    return out
