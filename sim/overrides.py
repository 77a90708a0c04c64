"""Scenario overrides: ``--set path.to.key=value`` and the Python API's deep merge.

An override changes one key of a scenario before it is validated, so an overridden scenario is checked
exactly like the file (the same :class:`~sim.errors.ScenarioError`, naming the file and the key path).

Key paths are dotted, with list indices in brackets or as a numeric segment::

    controller.k=500
    target.belief_offset.position[0]=0.002      # = target.belief_offset.position.0=0.002
    gates[1].max=30
    sim.gravity=[0, 0, -9.81]

(In a YAML flow mapping ``{key: a.b[0]}`` the bracket must be quoted, ``{key: "a.b[0]"}``; ``a.b.0`` needs
no quotes.)

Values are YAML (``500`` is an integer, ``0.5`` a number, ``[1, 2]`` a list, ``null`` null, ``hqp`` a
string); a plain scientific number such as ``1e-3``, which YAML 1.1 reads as a string, is read as a
number. An index may equal the list's length (that appends an entry, e.g. a gate); a list the file does
not give is taken from the schema's default first (``start.offset[2]=0.01`` on a file without
``start.offset`` sets the third entry of ``[0, 0, 0]``).

The Python API takes a mapping: nested mappings are merged key by key (``{"controller": {"k": 500}}``
changes ``k`` and keeps the block's other keys and its ``type``); a key that contains ``.`` or ``[`` is a
path as above (``{"controller.k": 500}``); any other value replaces what was there (lists as a whole).

Changing the ``type`` of a typed block (``tool``, ``target``, ``planner``, ``controller``) keeps the
block's keys that the new type also has and drops the others; each such change is reported as a note
(:func:`merge_overrides` returns them; ``run_docking.py --controller``/``--planner`` print them).
"""

from __future__ import annotations

import copy
import dataclasses
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dockbench.sim.config import short_repr
from dockbench.sim.errors import ScenarioError

#: top-level blocks chosen from a registry by their ``type`` key
TYPED_BLOCKS = ("tool", "target", "planner", "controller")

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")
_INDEX = re.compile(r"\[(\d+)\]")
_FLOAT = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)$")

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """``("gates", 1, "max")`` → ``"gates[1].max"``."""
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out


def parse_path(text: str, where: str = "--set") -> Path:
    """``"target.pose.position[0]"`` → ``("target", "pose", "position", 0)``.

    Raises:
        ScenarioError: an empty path or a malformed segment (``where`` names the option).
    """
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError(f"empty key path in {short_repr(text)}; expected e.g. controller.k", key=where)
    path: list[str | int] = []
    for part in text.strip().split("."):
        if part.isdigit() and path:  # position.0 = position[0] (no brackets to quote in YAML flow style)
            path.append(int(part))
            continue
        m = _SEGMENT.match(part)
        if m is None:
            raise ScenarioError(
                f"bad key path {short_repr(text)}: segment {short_repr(part)} is not a key name optionally followed "
                "by [index] "
                "(e.g. controller.k, target.pose.position[0], gates[1].max)",
                key=where,
            )
        path.append(m.group(1))
        path.extend(int(i) for i in _INDEX.findall(m.group(2)))
    return tuple(path)


def _numbers(value: Any) -> Any:
    """YAML 1.1 reads ``1e-3`` as a string: read such strings (also inside lists and mappings) as numbers."""
    if isinstance(value, str) and _FLOAT.match(value.strip()):
        return float(value)
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    return value


def parse_value(text: str) -> Any:
    """A ``--set`` value: YAML under the rules of the scenario files (sim/yamlio.py: no aliases, no
    duplicate keys, YAML 1.2 numbers, at most 64 kB)."""
    from dockbench.sim.yamlio import MAX_VALUE_CHARS, load_yaml

    return _numbers(load_yaml(text, file=None, key="--set", what="a --set value", max_chars=MAX_VALUE_CHARS))


def parse_assignment(text: str) -> tuple[Path, Any]:
    """``"controller.k=500"`` → (``("controller", "k")``, 500).

    Raises:
        ScenarioError: no ``=``, a bad path or a value that is not YAML (key ``--set``).
    """
    if not isinstance(text, str) or "=" not in text:
        raise ScenarioError(f"expected KEY=VALUE (e.g. controller.k=500), got {short_repr(text)}", key="--set")
    key, _, value = text.partition("=")
    path = parse_path(key)
    try:
        return path, parse_value(value)
    except ScenarioError as exc:  # name the key the value was meant for
        raise ScenarioError(exc.detail, key=f"--set {format_path(path)}") from None


# ----------------------------------------------------------------------------------------- schema
def _config_class(data: Mapping[str, Any], top: str) -> type | None:
    """The config class of the top-level block ``top`` of ``data`` (typed blocks by their current type)."""
    from dockbench.sim import scenario as sc

    fixed = {
        "robot": sc.RobotConfig, "sim": sc.SimConfig, "start": sc.StartConfig, "wrench": sc.WrenchConfig,
        "telemetry": sc.TelemetryConfig, "gates": sc.GateSpec,
    }
    extra = getattr(sc, "EXTRA_BLOCKS", {})
    if top in fixed:
        return fixed[top]
    if top in extra:
        return extra[top]
    if top in TYPED_BLOCKS:
        block = data.get(top)
        type_name = block.get("type") if isinstance(block, Mapping) else None
        if type_name is None and top == "tool":
            type_name = "probe"
        reg = sc._registries()[top]
        if isinstance(type_name, str) and type_name in reg:
            return reg.get(type_name).Config
    return None


def _field_type(cls: type, name: str) -> tuple[Any, Any]:
    """(type hint, default value as plain data) of field ``name`` of the dataclass ``cls``."""
    from dockbench.sim.config import _is_optional, config_to_dict

    for f in dataclasses.fields(cls):
        if f.name == name:
            hint = typing.get_type_hints(cls)[name]
            _, inner = _is_optional(hint)
            if f.default is not dataclasses.MISSING:
                default = config_to_dict(f.default)
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                default = config_to_dict(f.default_factory())  # type: ignore[misc]
            else:
                default = None
            return inner, default
    return None, None


def schema_default(data: Mapping[str, Any], path: Path) -> Any:
    """The schema's default value at ``path`` (plain data), or None when the schema has none there."""
    if not path or not isinstance(path[0], str):
        return None
    cls = _config_class(data, path[0])
    rest = path[1:]
    if path[0] == "gates":  # a list of GateSpec
        if not rest:
            return []
        rest = rest[1:]  # the entry's index
    if cls is None:
        return None
    value: Any = None
    tp: Any = cls
    for seg in rest:
        if isinstance(seg, int):
            if isinstance(value, list) and seg < len(value):
                value = value[seg]
                args = typing.get_args(tp)
                tp = args[0] if args else None
            else:
                return None
            continue
        if not dataclasses.is_dataclass(tp):
            return None
        tp, value = _field_type(tp, seg)
    return copy.deepcopy(value)


# ------------------------------------------------------------------------------------------ merge
def _type_change(kind: str, old: Mapping[str, Any], new_type: Any, notes: list[str]) -> dict[str, Any]:
    """The block ``old`` (a typed block of kind ``kind``) with its type set to ``new_type``: keys the new
    type also has are kept, the others dropped (and reported in ``notes``)."""
    from dockbench.sim.scenario import _registries

    old_type = old.get("type", "probe" if kind == "tool" else None)
    if new_type == old_type:
        return dict(old)
    reg = _registries()[kind]
    if not isinstance(new_type, str) or new_type not in reg:
        return {**old, "type": new_type}  # validation names the unknown type and the known ones
    fields = {f.name for f in dataclasses.fields(reg.get(new_type).Config)}
    kept = {k: v for k, v in old.items() if k != "type" and k in fields}
    dropped = [k for k in old if k != "type" and k not in fields]
    msg = f"{kind}.type {old_type} → {new_type}"
    if kept:
        msg += f": kept {', '.join(kept)}"
    if dropped:
        msg += f"{';' if kept else ':'} dropped {', '.join(dropped)} ({new_type} has no such keys)"
    if not kept and not dropped:
        msg += ": the file set no other keys"
    notes.append(msg)
    return {"type": new_type, **kept}


def set_path(data: dict[str, Any], path: Path, value: Any, notes: list[str], where: str = "--set") -> None:
    """Set ``value`` at ``path`` in the scenario mapping ``data`` (in place). Containers missing on the way
    are created (lists from the schema's default); a typed block's ``type`` change keeps the shared keys.

    Raises:
        ScenarioError: a path through a value that is not a mapping or list, an index out of range.
    """
    if not path or not isinstance(path[0], str):
        raise ScenarioError(f"a key path starts with a key name, got {format_path(path)!r}", key=where)
    if len(path) == 2 and path[0] in TYPED_BLOCKS and path[1] == "type" and isinstance(data.get(path[0]), dict):
        data[path[0]] = _type_change(path[0], data[path[0]], value, notes)
        return
    node: Any = data
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        if isinstance(seg, str):
            if not isinstance(node, dict):
                raise ScenarioError(
                    f"cannot set {format_path(path)}: {format_path(path[:i]) or 'the scenario'} is "
                    f"{_kind(node)}, not a mapping", key=where,
                )
            if last:
                node[seg] = copy.deepcopy(value)
                return
            if node.get(seg) is None:
                default = {"type": "probe"} if (i == 0 and seg == "tool") else schema_default(data, path[: i + 1])
                empty: Any = [] if isinstance(path[i + 1], int) else {}
                node[seg] = default if isinstance(default, (dict, list)) else empty
            node = node[seg]
        else:
            if not isinstance(node, list):
                raise ScenarioError(
                    f"cannot index {format_path(path[:i])} with [{seg}]: it is {_kind(node)}, not a list", key=where
                )
            if seg > len(node):
                raise ScenarioError(
                    f"index {seg} of {format_path(path[:i])} is out of range: the list has {len(node)} entries "
                    f"(an index equal to the length appends one)", key=where,
                )
            if seg == len(node):
                node.append(None if last else ({} if isinstance(path[i + 1], str) else []))
            if last:
                node[seg] = copy.deepcopy(value)
                return
            if node[seg] is None:
                node[seg] = {} if isinstance(path[i + 1], str) else []
            node = node[seg]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"the value {short_repr(value)}"


def _merge(base: Any, over: Any, notes: list[str], top: str | None = None) -> Any:
    """Deep merge of two plain-data trees: mappings key by key, everything else replaced."""
    if isinstance(base, dict) and isinstance(over, Mapping):
        out = dict(base)
        if top in TYPED_BLOCKS and "type" in over:
            out = _type_change(top, out, over["type"], notes)
        for k, v in over.items():
            if top in TYPED_BLOCKS and k == "type":
                continue
            out[k] = _merge(out[k], v, notes) if k in out else copy.deepcopy(_plain(v))
        return out
    return copy.deepcopy(_plain(over))


def _plain(value: Any) -> Any:
    """Config records, typed blocks and tuples as plain YAML data."""
    from dockbench.sim.config import config_to_dict

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "type") and hasattr(value, "config") and len(dataclasses.fields(value)) == 2:
            return {"type": value.type, **config_to_dict(value.config)}  # a TypedBlock
        return config_to_dict(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


Overrides = Mapping[str, Any] | Sequence[str] | None


def merge_overrides(data: Any, overrides: Overrides, where: str = "overrides") -> tuple[Any, list[str]]:
    """Apply ``overrides`` to the scenario mapping ``data`` (not modified; a merged copy is returned).

    Args:
        data: the scenario as read from YAML.
        overrides: a mapping (nested mappings merged, dotted/indexed keys are paths) or a sequence of
            ``"path=value"`` strings (``--set``), applied in order.
        where: what the overrides are called in messages (``--set``, ``overrides``).

    Returns:
        (merged data, notes): one note per typed block whose type changed (kept and dropped keys).
    """
    notes: list[str] = []
    if not overrides:
        return data, notes
    if not isinstance(data, dict):
        return data, notes  # scenario_from_dict reports that the file is not a mapping
    out = copy.deepcopy(data)
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            if not isinstance(key, str):
                raise ScenarioError(f"override keys are strings, got {short_repr(key)}", key=where)
            if "." in key or "[" in key:
                set_path(out, parse_path(key, where), _plain(value), notes, where)
            elif key in out:
                out[key] = _merge(out[key], value, notes, top=key)
            elif key == "tool" and isinstance(value, Mapping):  # the file's tool is the default probe
                out[key] = _merge({"type": "probe"}, value, notes, top=key)
            else:
                out[key] = _merge(None, value, notes, top=key)
        return out, notes
    if isinstance(overrides, str):
        overrides = [overrides]
    for item in _as_list(overrides):
        path, value = parse_assignment(item)
        set_path(out, path, value, notes, where)
    return out, notes


def _as_list(items: Iterable[str]) -> list[str]:
    out = list(items)
    for x in out:
        if not isinstance(x, str):
            raise ScenarioError(f"expected 'path=value' strings, got {short_repr(x)}", key="--set")
    return out
