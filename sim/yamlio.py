"""The one YAML reader of dockbench's input files: scenario files, campaign files (and their base
scenarios) and ``--set`` values.

A shared file must not hang a run, exhaust its memory or say one thing and run another, so this reader is
stricter than ``yaml.safe_load``:

* **No aliases** (``*name``). An alias re-uses a node; nested aliases ("billion laughs") make a few hundred
  bytes expand to billions of nodes when the value is copied, compared or printed. No shipped file uses
  them; an alias is an error naming its line (an anchor ``&name`` alone is harmless and accepted).
* **No duplicate keys.** ``yaml.safe_load`` keeps the last of two equal keys silently (a second
  ``controller:`` block replaces the first); here it is an error naming both lines.
* **YAML 1.2 scalars** (the core schema): ``true``/``false``, ``null``/``~``, decimal, ``0o`` octal and
  ``0x`` hex integers, decimal floats (``1e-3`` included), ``.inf``/``.nan``; everything else is a string.
  Plain scalars that YAML 1.1 reads as a *different* number are refused, so that no reader can disagree
  with what the author meant: sexagesimal ``5:00`` (1.1: 300), a leading zero ``010`` (1.1: octal 8),
  ``0b101`` and ``1_000``. YAML 1.1's ``yes``/``no``/``on``/``off`` are strings (a boolean key then says
  it expected a boolean).
* **Bounded**: at most :data:`MAX_BYTES` of UTF-8 text and :data:`MAX_DEPTH` levels of nesting; no lone
  surrogate (``"\\ud800"``) in any string.

Every error is one :class:`~sim.errors.ScenarioError` line naming the file and the line (and the key,
where there is one).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from dockbench.sim.errors import ScenarioError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode
from yaml.resolver import BaseResolver

try:  # libyaml's event parser (about 2× faster); the Python composer above it keeps the checks below
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    from yaml.parser import Parser as _ParserPy
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, _ParserPy):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            _ParserPy.__init__(self)


#: largest YAML text read [bytes] (a scenario or campaign file; sim/scenario.py MAX_FILE_BYTES)
MAX_BYTES = 1 << 20
#: deepest nesting of mappings and lists (the shipped files use at most 5)
MAX_DEPTH = 50
#: longest ``--set`` value [characters]
MAX_VALUE_CHARS = 64 * 1024

_TAG = "tag:yaml.org,2002:"

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_CORE = (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
              r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
)

# plain scalars YAML 1.1 reads as another number than YAML 1.2 does: (pattern, what 1.1 makes of it)
_AMBIGUOUS = (
    (re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$"), "a base-60 (sexagesimal) number"),
    (re.compile(r"^[-+]?0[0-9_]+$"), "an octal number (a leading zero)"),
    (re.compile(r"^[-+]?0b[01_]+$"), "a binary number"),
    (re.compile(r"^[-+]?(?:[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?|[0-9]+\.[0-9_]*_[0-9_]*)(?:[eE][-+]?[0-9]+)?$"),
     "a number with '_' separators"),
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _yaml11_value(text: str) -> str:
    """What YAML 1.1 (``yaml.safe_load``) reads ``text`` as, for the message."""
    if len(text) > 40:
        return "a number"
    try:
        return repr(yaml.safe_load(text))
    except Exception:  # noqa: BLE001 - only for a message
        return "a number"


class _Resolver(BaseResolver):
    pass


for _name, _pattern, _first in _CORE:
    _Resolver.add_implicit_resolver(_TAG + _name, re.compile(_pattern), list(_first))


class _Constructor(SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        value = str(self.construct_scalar(node))
        sign = -1 if value.startswith("-") else 1
        digits = value.lstrip("-+")
        try:
            if digits.startswith("0o"):
                return sign * int(digits[2:], 8)
            if digits.startswith("0x"):
                return sign * int(digits[2:], 16)
            return sign * int(digits)
        except ValueError as exc:  # e.g. more than Python's 4300 digits
            raise yaml.constructor.ConstructorError(None, None, f"integer not accepted ({str(exc)[:80]})",
                                                    node.start_mark) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            return super().construct_mapping(node, deep=deep)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a plain name or number, not a list or mapping", key_node.start_mark
                )
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None,
                    f"duplicate key {_short(key)} (first at line {seen[key]}, again at line {line}); a key may "
                    "appear once per mapping (YAML keeps only the last, silently)",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_Constructor.add_constructor(_TAG + "int", _Constructor.construct_yaml_int)
# tags of YAML 1.1 that the core schema does not have are strings or errors: no timestamps, sets, pairs
for _tag in ("timestamp", "set", "omap", "pairs", "binary", "merge", "value"):
    _Constructor.yaml_constructors.pop(_TAG + _tag, None)


class _Loader(Composer, _Parser, _Constructor, _Resolver):
    """The Python composer over libyaml's events (an alias is an error where it appears, the nesting
    is counted), the 1.2 resolver and the duplicate-refusing constructor."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None,
                f"alias *{_short_text(event.anchor)} not accepted: dockbench files do not use YAML aliases "
                "(they can expand to billions of values); write the value out",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_scalar_node(self, anchor: Any) -> ScalarNode:
        event = self.peek_event()
        if _SURROGATE.search(event.value):
            ch = _SURROGATE.search(event.value).group()
            raise yaml.composer.ComposerError(
                None, None, f"a lone surrogate (U+{ord(ch):04X}) is not text", event.start_mark
            )
        if event.tag is None and event.implicit[0]:  # a plain (unquoted, untagged) scalar
            for pattern, what in _AMBIGUOUS:
                if pattern.match(event.value):
                    raise yaml.composer.ComposerError(
                        None, None,
                        f"{_short_text(event.value)} is ambiguous: YAML 1.1 reads it as {what}, "
                        f"{_yaml11_value(event.value)}, YAML 1.2 as the string {_short_text(event.value)!r}; "
                        "write the number in decimal without separators, or quote the string",
                        event.start_mark,
                    )
        return super().compose_scalar_node(anchor)


def _short_text(text: Any, limit: int = 40) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: Any) -> str:
    from dockbench.sim.config import short_repr

    return short_repr(value)


def _one_line(exc: yaml.YAMLError) -> str:
    """A PyYAML error as one line: ``line L, column C: problem (context at line …)``."""
    if isinstance(exc, yaml.MarkedYAMLError):
        parts = []
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        if exc.problem:
            parts.append(str(exc.problem))
        if exc.context:
            ctx = str(exc.context)
            if exc.context_mark is not None and exc.context_mark is not mark:
                ctx += f" at line {exc.context_mark.line + 1}"
            parts.append(f"({ctx})")
        return where + " ".join(parts)
    return " ".join(str(exc).split())


def load_yaml(text: str, *, file: str | Path | None, key: str | None = None, what: str = "YAML",
              max_chars: int = MAX_BYTES) -> Any:
    """Parse ``text`` (one document) under the rules of the module docstring.

    Args:
        file, key: where the text came from, for the error (a file name, ``--set``).
        what: what the text is, for the size message. max_chars: its longest length.

    Raises:
        ScenarioError: one line naming ``file`` (and ``key``), the line and column, and the problem.
    """
    file = None if file is None else str(file)
    if not isinstance(text, str):
        raise ScenarioError(f"expected text, got {type(text).__name__}", file=file, key=key)
    if len(text) > max_chars:
        raise ScenarioError(f"{len(text)} characters; {what} is at most {max_chars}", file=file, key=key)
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(getattr(exc, "problem", "") or ""):
            # PyYAML ≥ 6.0.4's own scanner limit (1000 flow levels) comes before ours: the same refusal
            mark = exc.problem_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
            raise ScenarioError(f"{where}nested more than {MAX_DEPTH} levels deep", file=file, key=key) from None
        syntax = "" if isinstance(exc, (yaml.composer.ComposerError, yaml.constructor.ConstructorError)) else \
            "YAML syntax error: "
        raise ScenarioError(syntax + _one_line(exc), file=file, key=key) from None
    except RecursionError:
        raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=file, key=key) from None
    finally:
        loader.dispose()


def read_yaml_file(path: str | Path, *, what: str = "a scenario file", max_bytes: int = MAX_BYTES) -> Any:
    """Read and parse a YAML file (at most ``max_bytes``, UTF-8) with :func:`load_yaml`.

    Raises:
        ScenarioError: missing, too large, unreadable, not UTF-8, or any rule of :func:`load_yaml`.
    """
    p = Path(path)
    file = str(path)
    if not p.is_file():
        raise ScenarioError(f"file not found (looked at {p.resolve()})", file=file)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise ScenarioError(f"{size} bytes; {what} is at most {max_bytes} bytes", file=file)
        with p.open("rb") as fh:  # read no more than the limit, whatever the file grew to meanwhile
            raw = fh.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise ScenarioError(f"more than {max_bytes} bytes; {what} is at most {max_bytes} bytes", file=file)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read the file: {exc.strerror or exc}", file=file) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{what} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}, {exc.reason}); "
            "save it as UTF-8", file=file) from None
    if "\0" in text:
        raise ScenarioError(f"{what} contains a NUL character (offset {text.index(chr(0))}): not a text file",
                            file=file)
    return load_yaml(text, file=file, what=what, max_chars=max_bytes)
