"""The strict YAML reader of the input files (sim/yamlio.py, issue 36): no aliases, no duplicate keys, YAML
1.2 numbers with the 1.1-ambiguous forms refused, bounded size and depth, one-line errors. The hostile list
end to end (scenario files, --set, campaigns) is ``tests/test_fuzz.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dockbench.sim.errors import ScenarioError
from dockbench.sim.yamlio import MAX_DEPTH, load_yaml, read_yaml_file

from tests.helpers import REPO


def _shipped_yaml() -> list[Path]:
    return sorted(p for d in ("scenarios", "examples", "assets") for p in (REPO / d).rglob("*.yaml"))


def test_every_shipped_yaml_file_reads_as_yaml_safe_load_reads_it() -> None:
    """No shipped file uses an alias, a duplicate key or a 1.1-only scalar: the strict reader changes
    nothing for them (exact: the same parsed values)."""
    files = _shipped_yaml()
    assert len(files) > 40
    for p in files:
        assert read_yaml_file(p) == yaml.safe_load(p.read_text()), p


def _error(text: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        load_yaml(text, file="f.yaml")
    msg = str(exc.value)
    assert msg.startswith("f.yaml: ") and "\n" not in msg and len(msg) < 400, msg
    return msg


def test_a_duplicate_key_names_both_lines() -> None:
    msg = _error("name: a\ncontroller:\n  type: khatib\ncontroller:\n  type: hqp\n")
    assert "line 4, column 1: duplicate key 'controller' (first at line 2, again at line 4)" in msg
    assert "duplicate key 'k'" in _error("c: {k: 1, k: 2}")


def test_an_alias_is_refused_where_it_stands_and_a_lone_anchor_is_harmless() -> None:
    assert "line 2, column 4: alias *a not accepted" in _error("x: &a [1]\ny: *a\n")
    assert load_yaml("x: &a [1]\n", file="f") == {"x": [1]}


@pytest.mark.parametrize("text, value", [
    ("1e-3", 0.001), ("0o17", 15), ("0x1F", 31), ("-5", -5), ("+12", 12), ("0", 0), (".inf", float("inf")),
    ("true", True), ("False", False), ("~", None), ("null", None), ("yes", "yes"), ("on", "on"), ("off", "off"),
    ("2024-01-01", "2024-01-01"), ("1.5", 1.5), ("007.5", 7.5),
])
def test_yaml_1_2_scalars(text: str, value: object) -> None:
    assert load_yaml(f"k: {text}", file="f") == {"k": value}


@pytest.mark.parametrize("text, reading", [
    ("5:00", "base-60"), ("1:30:00", "base-60"), ("010", "octal"), ("-012", "octal"), ("0b101", "binary"),
    ("1_000", "'_' separators"), ("1_000.5", "'_' separators"),
])
def test_yaml_1_1_numbers_that_1_2_reads_otherwise_are_refused(text: str, reading: str) -> None:
    msg = _error(f"k: {text}")
    assert f"{text} is ambiguous: YAML 1.1 reads it as" in msg and reading in msg
    assert load_yaml(f"k: '{text}'", file="f") == {"k": text}  # quoted: a string, as written


def test_size_depth_and_text_limits() -> None:
    assert f"nested more than {MAX_DEPTH} levels deep" in _error("k: " + "[" * 400_000 + "]" * 400_000)
    load_yaml("k: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), file="f")
    assert "at most 10" in str(pytest.raises(ScenarioError, load_yaml, "k: 12345678901", file="f", max_chars=10).value)
    assert "integer not accepted" in _error("k: " + "9" * 5000)
    assert "a key must be a plain name or number" in _error("? [1]\n: 2\n")
    assert "could not determine a constructor" in _error("k: !!python/object:os.system 1")


def test_a_file_that_is_not_utf8_or_too_large(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_bytes(b"name: \xff\n")
    with pytest.raises(ScenarioError, match=r"x\.yaml: a scenario file is not UTF-8 text \(byte 6"):
        read_yaml_file(p)
    p.write_bytes(b"k: a\x00b\n")
    with pytest.raises(ScenarioError, match=r"x\.yaml: a scenario file contains a NUL character \(offset 4\)"):
        read_yaml_file(p)
    p.write_text("k: 1\n")
    with pytest.raises(ScenarioError, match=r"5 bytes; a campaign file is at most 4 bytes"):
        read_yaml_file(p, what="a campaign file", max_bytes=4)
