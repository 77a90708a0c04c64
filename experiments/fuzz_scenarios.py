"""Seeded scenario fuzzer: mutated and adversarial scenarios must give a run or a clear error.

    python experiments/fuzz_scenarios.py --mutations 1500 --seed 7          # + the adversarial list
    python experiments/fuzz_scenarios.py --mutations 0 --adversarial-only   # the adversarial list only
    python experiments/fuzz_scenarios.py --hostile-yaml-only                # bombs, duplicates, YAML 1.1, Unicode
    python experiments/fuzz_scenarios.py --replay 7:123                     # one mutation, in this process

Every case is written as a YAML file, loaded with :func:`sim.scenario.load_scenario` and run with
:func:`sim.loop.run` for ``--duration`` (default 0.05 s) into a temporary ``--out``. Outcomes:

* ``ok``: the run finished (any status but ``error``) and its folder loads complete, with as many
  steps as it recorded;
* ``clean error``: a :class:`~sim.errors.DockbenchError` whose message names the scenario file (and,
  for a :class:`~sim.errors.ScenarioError`, the key);
* ``unnamed error``: a DockbenchError that does not name the file;
* ``traceback``: any other exception, an :class:`~sim.errors.InternalError` (status ``error``), or a
  folder that does not load as it should;
* ``hang``: no answer within ``--timeout`` seconds (the worker process is killed).

Cases run in ``--workers`` worker processes (a hang cannot stop the fuzzer). Mutations: 1–3 per case,
each one of: a leaf or schema key set to an adversarial value (huge, tiny, 400-digit, NaN/Inf,
negative, wrong type, long string, deep list, scaled original), a key deleted, an unknown key added,
a block's type swapped, a block taken from another shipped scenario, a vector lengthened/shortened,
the name replaced. The adversarial list covers the faults of issue 23 and, for every numeric key of
every block of every shipped scenario, a set of extreme values. The hostile-YAML list (issue 36,
:func:`hostile_yaml_cases`, raw text rather than dumped dicts) covers alias bombs in every position
(a scenario's keys, ``plugins:``, a mapping key, ``--set`` values, a campaign's seed, axes, ``set:`` and
its base scenario), duplicate keys (a second ``controller:`` block among them), the YAML 1.1 forms
(``5:00``, ``010``, ``0b1``, ``1_000``, ``yes``/``on``), names of every refused Unicode class and
plugins named without the opt-in: each must be a one-line clean error (a few are ``ok``: the 1.2
reading is the intended one). The same code runs in CI (``tests/test_fuzz.py``) on a few hundred seeded
mutations and the whole hostile-YAML list.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing as mp
import os
import random
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from dockbench.cli import ArgumentParser

REPO = Path(__file__).resolve().parent.parent
SCENARIO_DIR = REPO / "scenarios"

HUGE_INT = 10**400
NUMBERS: tuple[Any, ...] = (0, -1, 1, 1e300, -1e300, 1e-300, -1e-300, HUGE_INT, -HUGE_INT, 2**31, 2**63, 2**64,
                            math.nan, math.inf, -math.inf, 1e6, -1e6, 1e-9, 0.5, 100000)
OTHER: tuple[Any, ...] = (None, True, False, "", "abc", "x" * 5000, "..", "/", [], [1, 2], [[1.0]] * 3, {},
                          {"a": 1}, [[[[[[1]]]]]], "1e3", "nan")


def shipped() -> dict[str, dict]:
    """The shipped scenarios (scenarios/ and its subfolders, e.g. the gravity twins, but not the campaign
    files of scenarios/campaigns/ and the studies of scenarios/studies/) as dicts, by file stem."""
    from dockbench.sim.scenario import NOT_SCENARIO_FOLDERS

    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SCENARIO_DIR.rglob("*.yaml"))
            if p.relative_to(SCENARIO_DIR).parts[0] not in NOT_SCENARIO_FOLDERS}


# --------------------------------------------------------------------------------------- mutations
def _leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _leaf_paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _leaf_paths(v, prefix + (i,))
    return out


def _schema_paths(d: dict) -> list[tuple]:
    """Key paths of the typed blocks' schemas (keys a file may leave out), for the scenario's types."""
    from dockbench.sim.config import walk_fields
    from dockbench.sim.scenario import (
        GateSpec,
        RobotConfig,
        SimConfig,
        StartConfig,
        TelemetryConfig,
        WrenchConfig,
        _registries,
    )

    out = []
    for top, cls in (("robot", RobotConfig), ("sim", SimConfig), ("start", StartConfig), ("wrench", WrenchConfig),
                     ("telemetry", TelemetryConfig)):
        out += [(top, *k.split(".")) for k, _, _ in walk_fields(cls)]
    out += [("gates", 0, k) for k, _, _ in walk_fields(GateSpec)]
    regs = _registries()
    for kind in ("tool", "target", "planner", "controller"):
        block = d.get(kind)
        if isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"] in regs[kind].names():
            cls = regs[kind].get(block["type"]).Config
            out += [(kind, *[p for p in k.replace("[]", "").split(".")]) for k, _, _ in walk_fields(cls)]
    return out


def _set(d: Any, path: tuple, value: Any) -> None:
    node = d
    for k in path[:-1]:
        if isinstance(node, list):
            if not isinstance(k, int) or k >= len(node):
                return
            node = node[k]
        elif isinstance(node, dict):
            if not isinstance(node.get(k), (dict, list)):
                node[k] = {}
            node = node[k]
        else:
            return
    last = path[-1]
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = value


def _get(d: Any, path: tuple) -> Any:
    node = d
    for k in path:
        try:
            node = node[k]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _value(rng: random.Random, original: Any) -> Any:
    r = rng.random()
    if isinstance(original, (int, float)) and not isinstance(original, bool) and r < 0.35:
        try:
            x = float(original) if original else 1.0
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            return rng.choice(NUMBERS)
        return rng.choice([x * 10 ** rng.uniform(-8, 8), -x, x * (1 + 1e-12), x * rng.uniform(0, 3),
                           round(x * rng.uniform(0, 1000))])
    if isinstance(original, list) and original and r < 0.5:
        v = list(original)
        op = rng.randrange(4)
        if op == 0:
            v.append(v[-1])
        elif op == 1:
            v.pop()
        elif op == 2:
            v[rng.randrange(len(v))] = rng.choice(NUMBERS + OTHER)
        else:
            v = v * rng.randint(2, 400)
        return v
    if r < 0.75:
        return rng.choice(NUMBERS)
    return copy.deepcopy(rng.choice(OTHER))


def mutate(d: dict, rng: random.Random, others: dict[str, dict]) -> tuple[dict, list[str]]:
    """1–3 random mutations of the scenario dict ``d`` (a copy); also returns their descriptions."""
    from dockbench.sim.scenario import _registries

    d = copy.deepcopy(d)
    notes = []
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.50:
            paths = _leaf_paths(d) + _schema_paths(d) if rng.random() < 0.7 else _schema_paths(d)
            if not paths:
                continue
            path = rng.choice(paths)
            value = _value(rng, _get(d, path))
            _set(d, path, value)
            notes.append(f"set {'.'.join(map(str, path))} = {_short(value)}")
        elif op < 0.60:
            paths = _leaf_paths(d)
            path = rng.choice(paths)
            parent = _get(d, path[:-1]) if len(path) > 1 else d
            if isinstance(parent, dict) and path[-1] in parent:
                del parent[path[-1]]
                notes.append(f"del {'.'.join(map(str, path))}")
        elif op < 0.67:
            paths = [p for p in _leaf_paths(d) if isinstance(_get(d, p), dict)] + [()]
            path = rng.choice(paths)
            node = _get(d, path) if path else d
            if isinstance(node, dict):
                node[rng.choice(["typo", "k_typo", "extra", "Type", 3, None])] = rng.choice(NUMBERS)
                notes.append(f"unknown key under {'.'.join(map(str, path)) or 'top'}")
        elif op < 0.80:
            kind = rng.choice(["tool", "target", "planner", "controller"])
            names = _registries()[kind].names()
            block = d.get(kind)
            new = {"type": rng.choice(names)}
            if isinstance(block, dict) and rng.random() < 0.5:
                new = {**block, **new}  # keep the keys: usually unknown for the new type
            d[kind] = new
            notes.append(f"{kind}.type = {new['type']}")
        elif op < 0.90:
            other = rng.choice(list(others.values()))
            kind = rng.choice(["robot", "sim", "start", "tool", "target", "planner", "controller", "wrench", "gates"])
            if kind in other:
                d[kind] = copy.deepcopy(other[kind])
                notes.append(f"{kind} from {other.get('name')}")
        elif op < 0.95:
            name = rng.choice(["..", ".", "a/b", "x" * 300, "", " ", "ok name", "nul\0", "tab\tname", "ünï",
                               "C:\\x", 5, None, "<>|"])
            d["name"] = name
            notes.append(f"name = {_short(name)}")
        else:
            kind = rng.choice(["sim", "start", "robot"])
            d[kind] = rng.choice(OTHER)
            notes.append(f"{kind} = {_short(d[kind])}")
    return d, notes


def _short(v: Any) -> str:
    from dockbench.sim.config import short_repr

    return short_repr(v)


# --------------------------------------------------------------------------------------- adversarial
def adversarial_cases() -> list[tuple[str, dict, float | None]]:
    """(label, scenario dict, --duration) of the faults of issue 23 plus, for every numeric key of every
    shipped scenario (present or from its blocks' schemas), a set of extreme values."""
    base = shipped()
    dock = base["iiwa14_docking"]
    cases: list[tuple[str, dict, float | None]] = []

    def case(label: str, src: dict, path: tuple, value: Any, duration: float | None = 0.05) -> None:
        d = copy.deepcopy(src)
        _set(d, path, value)
        cases.append((label, d, duration))

    # the faults the issue lists
    for key in ("timestep", "control_period", "settle_time", "duration"):
        case(f"401-digit sim.{key}", dock, ("sim", key), HUGE_INT)
    case("sim.iterations 2^31", dock, ("sim", "iterations"), 2**31)
    case("control_period 1e300", dock, ("sim", "control_period"), 1e300)
    case("timestep 1e-300", dock, ("sim", "timestep"), 1e-300)
    case("control_period 1e6", dock, ("sim", "control_period"), 1e6)
    case("seat_gap 1e300", dock, ("target", "seat_gap"), 1e300)
    case("bore_length 1e300", dock, ("target", "bore_length"), 1e300)
    case("shaft_length 1e300", dock, ("tool", "shaft_length"), 1e300)
    case("target.segments 100000", dock, ("target", "segments"), 100000)
    case("sim.duration 1e6 (no --duration)", dock, ("sim", "duration"), 1e6, None)
    case("sim.duration 86400 (no --duration)", dock, ("sim", "duration"), 86400.0, None)
    case("name ..", dock, ("name",), "..")
    case("name 300 chars", dock, ("name",), "n" * 300)
    case("belief_offset without position", dock, ("target", "belief_offset"), {"rpy_deg": [1.0, 0.0, 0.0]})
    case("q_init 10 rad", dock, ("robot", "q_init"), [10.0] * 7)
    case("q_init just outside", dock, ("robot", "q_init"), [0.0, 0.0, 0.0, 2.1, 0.0, 0.0, 0.0])
    case("unreachable target", dock, ("target", "pose", "position"), [5.0, 5.0, 5.0])
    case("plate size 0", {**dock, "target": {"type": "plate"}}, ("target", "size"), [0.1, 0.0, 0.01])
    for d in (math.nan, math.inf, -1.0, 0.0, 1e300, HUGE_INT):
        cases.append((f"--duration {d if not isinstance(d, int) else '10**400'}", copy.deepcopy(dock), d))
    # every numeric key of every shipped scenario × extreme values
    values = (HUGE_INT, -HUGE_INT, 1e300, -1e300, 1e-300, 0, -1, math.nan, math.inf, 2**63)
    for name, d in base.items():
        paths = {p for p in _leaf_paths(d) + _schema_paths(d)}
        numeric = []
        for p in sorted(paths, key=lambda p: tuple(map(str, p))):
            v = _get(d, p)
            if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
                    isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v)):
                numeric.append(p)
        for p in numeric:
            for v in values:
                cur = _get(d, p)
                if isinstance(cur, list):
                    val = [v] + list(cur[1:])
                    case(f"{name}: {'.'.join(map(str, p))}[0] = {_short(v)}", d, p, val)
                else:
                    case(f"{name}: {'.'.join(map(str, p))} = {_short(v)}", d, p, v)
    return cases


# --------------------------------------------------------------------------------------- hostile YAML
@dataclasses.dataclass
class Raw:
    """A case given as YAML text (not a dict to dump): ``text`` is the scenario file; ``sets`` are
    ``--set`` strings; with ``campaign`` the text is a campaign file (``{base}`` in it is replaced by
    the path of a base scenario written from ``base_text``, default the docking) and only
    ``load_campaign`` and the trials' scenarios are checked (nothing runs); ``ok`` marks a case that is
    meant to load (YAML 1.2 reads it as intended)."""

    text: str
    sets: tuple[str, ...] = ()
    campaign: bool = False
    base_text: str | None = None
    ok: bool = False


def _bomb(depth: int = 40) -> str:
    """A flow list of ``depth`` anchors, each a list of two aliases of the previous one: 2^depth leaves."""
    return "[" + ", ".join(["&b0 [1.0, 1.0]"] + [f"&b{i} [*b{i - 1}, *b{i - 1}]" for i in range(1, depth)]) + "]"


def _text(d: dict) -> str:
    return yaml.dump(d, Dumper=_NoAliasDumper, allow_unicode=True, sort_keys=False)


def hostile_yaml_cases() -> list[tuple[str, Raw, float | None]]:
    """(label, :class:`Raw`, --duration) of issue 36's hostile YAML: alias bombs in every position,
    duplicate keys, YAML 1.1 forms, names of the refused Unicode classes, plugins without the opt-in."""
    dock = shipped()["iiwa14_docking"]
    text = _text(dock)
    bomb = _bomb()
    cases: list[tuple[str, Raw, float | None]] = []

    def at(path: tuple, raw_value: str) -> str:
        """The docking's text with the value at ``path`` replaced by ``raw_value`` (YAML text)."""
        d = copy.deepcopy(dock)
        _set(d, path, "__RAW__")
        return _text(d).replace("__RAW__", raw_value, 1)

    # alias bombs: every kind of position of a scenario file
    for path in (("name",), ("description",), ("plugins",), ("controller", "k"), ("controller", "type"),
                 ("robot", "q_guess"), ("robot",), ("sim", "seed"), ("sim", "duration"), ("gates",),
                 ("target", "pose", "position"), ("uncertainty",), ("start", "offset"), ("typo_key",)):
        cases.append((f"bomb in {'.'.join(path)}", Raw(at(path, bomb)), 0.05))
    cases.append(("bomb as a mapping key", Raw(f"x: &k {bomb}\n? *k\n: 2\n" + text), 0.05))
    cases.append(("bomb through a merge key <<",
                  Raw(f"anchors: {bomb}\n" + text.replace("controller:\n", "controller:\n  <<: *b39\n", 1)), 0.05))
    cases.append(("a scalar alias", Raw(at(("description",), "*n").replace("name:", "name: &n", 1)), 0.05))
    for key in ("controller.k", "plugins", "name", "gates", "sim.seed"):
        cases.append((f"--set {key}=<bomb>", Raw(text, sets=(f"{key}={bomb}",)), 0.05))
    cases.append(("--set value with a duplicate key", Raw(text, sets=("controller={type: hqp, type: khatib}",)), 0.05))
    cases.append(("--set value 5:00", Raw(text, sets=("controller.k=5:00",)), 0.05))
    cases.append(("--set value 010", Raw(text, sets=("sim.seed=010",)), 0.05))
    cases.append(("--set value of 100 kB", Raw(text, sets=("description=" + "x" * 100_000,)), 0.05))
    # duplicate keys
    cases.append(("a second controller: block (khatib file runs hqp)", Raw(text + "controller:\n  type: hqp\n"), 0.05))
    cases.append(("duplicate controller.k", Raw(at(("controller", "k"), "500\n  k: 800")), 0.05))
    cases.append(("duplicate key in a flow mapping", Raw(at(("start",), "{standoff: 0.1, standoff: 0.2}")), 0.05))
    cases.append(("duplicate name", Raw("name: a\n" + text), 0.05))
    cases.append(("duplicate key in a gate",
                  Raw(at(("gates",), "[{metric: docking.depth, metric: contact.max_force}]")), 0.05))
    # YAML 1.1 forms
    for path, raw, ok in ((("controller", "k"), "5:00", False), (("sim", "seed"), "010", False),
                          (("sim", "seed"), "0b101", False), (("controller", "k"), "1_000", False),
                          (("sim", "duration"), "1:30", False), (("sim", "seed"), "0o17", True),
                          (("sim", "seed"), "0x1F", True), (("telemetry", "enabled"), "yes", False),
                          (("telemetry", "enabled"), "off", False), (("wrench", "gravity_compensation"), "on", True),
                          (("sim", "timestep"), "1e-3", True), (("name",), "2024-01-01", True),
                          (("controller", "k"), "-0_5", False), (("sim", "seed"), "+012", False)):
        cases.append((f"YAML 1.1 form {'.'.join(path)}: {raw}", Raw(at(path, raw), ok=ok), 0.05))
    # names of the refused Unicode classes (as YAML escapes, so the file itself is plain UTF-8)
    for label, raw in (("U+0085 (C1 control)", '"a\\x85b"'), ("only U+200B", '"\\u200b"'),
                       ("only U+FEFF", '"\\ufeff"'), ("U+200B and U+FEFF", '"\\u200b\\ufeff"'),
                       ("U+2028 line separator", '"a\\u2028b"'), ("U+2029 paragraph separator", '"a\\u2029b"'),
                       ("U+E000 private use", '"a\\ue000"'), ("U+0378 unassigned", '"a\\u0378"'),
                       ("U+202E bidi override", '"\\u202egnikcod"'), ("lone surrogate", '"\\ud800x"'),
                       ("NUL", '"a\\0b"'), ("DEL", '"a\\x7fb"'), ("a combining mark alone", '"\\u0301"'),
                       ("only spaces", '"   "'), ("U+3000 ideographic spaces only", '"\\u3000\\u3000"')):
        cases.append((f"name {label}", Raw(at(("name",), raw)), 0.05))
    cases.append(("description with a lone surrogate", Raw(at(("description",), '"x\\udfffy"')), 0.05))
    # code from a scenario file, without the opt-in
    for entry in ("antigravity", "my_plugin.py", "/tmp/evil_plugin.py", "../" * 12 + "tmp/evil_plugin.py",
                  "os.path"):
        cases.append((f"plugins: [{entry}] without the opt-in", Raw(at(("plugins",), f"['{entry}']")), 0.05))
    cases.append(("--set plugins=[x.py] without the opt-in", Raw(text, sets=("plugins=[x.py]",)), 0.05))
    # campaign files (load_campaign and the trials' scenarios; nothing runs)
    camp = 'name: c\nbase: "{base}"\nrepeats: 2\n'
    for label, extra in (("seed", f"seed: {bomb}\n"),
                         ("axis values", f"axes:\n  - key: controller.k\n    values: {bomb}\n"),
                         ("set:", f"set: {{controller.k: {bomb}}}\n"), ("metrics", f"metrics: {bomb}\n")):
        cases.append((f"campaign: bomb in {label}", Raw(camp + extra, campaign=True), None))
    cases.append(("campaign: duplicate seed", Raw(camp + "seed: 1\nseed: 2\n", campaign=True), None))
    cases.append(("campaign: seed 010", Raw(camp + "seed: 010\n", campaign=True), None))
    cases.append(("campaign: base scenario with a bomb",
                  Raw(camp, campaign=True, base_text=at(("controller", "k"), bomb)), None))
    cases.append(("campaign: base scenario with a second controller",
                  Raw(camp, campaign=True, base_text=text + "controller: {type: hqp}\n"), None))
    cases.append(("campaign: set: plugins without the opt-in", Raw(camp + "set: {plugins: [x.py]}\n", campaign=True),
                  None))
    return cases


class _NoAliasDumper(yaml.SafeDumper):
    """Dumps a value shared by two keys twice (a dumped dict with anchors would be refused: no aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _run_raw(raw: Raw, path: Path, out_root: Path, duration: float | None) -> Any:
    """Load (and for a scenario, run) a :class:`Raw` case written to ``path``; returns the RunResult or
    None (a campaign)."""
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario

    if not raw.campaign:
        path.write_text(raw.text, encoding="utf-8")
        return run(load_scenario(path, list(raw.sets) or None), out_root=out_root / "runs", duration=duration)
    from dockbench.sim.campaign.spec import load_campaign
    from dockbench.sim.scenario import scenario_from_dict

    base = path.with_name(path.stem + "_base.yaml")
    base.write_text(raw.base_text if raw.base_text is not None else _text(shipped()["iiwa14_docking"]),
                    encoding="utf-8")
    try:
        path.write_text(raw.text.replace("{base}", str(base)), encoding="utf-8")
        camp = load_campaign(path)
        from dockbench.sim.campaign.runner import _read_base

        data = _read_base(base)
        for t in camp.trials()[:4]:
            scenario_from_dict(t.scenario_data(data), file=str(path))
    finally:
        base.unlink(missing_ok=True)
    return None


# --------------------------------------------------------------------------------------- one case
@dataclasses.dataclass
class Outcome:
    kind: str  # ok | clean error | unnamed error | traceback | hang
    detail: str
    label: str = ""
    seconds: float = 0.0


def run_case(data: Any, out_root: Path, duration: float | None, label: str = "", check_folder: bool = True) -> Outcome:
    """Write ``data`` as a YAML scenario, load it, run it; classify the result (see the module docstring)."""
    from dockbench.sim.errors import DockbenchError, InternalError, ScenarioError, SimulationDiverged
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario
    from dockbench.telemetry.run import Run

    t0 = time.perf_counter()
    out_root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=out_root, suffix=".yaml", prefix="case_")
    os.close(fd)
    path = Path(name)
    try:
        if not isinstance(data, Raw):
            try:
                path.write_text(yaml.dump(data, Dumper=_NoAliasDumper, allow_unicode=True))
            except (yaml.YAMLError, ValueError, UnicodeEncodeError) as exc:
                return Outcome("ok", f"not representable as YAML ({exc})", label)
        file = str(path)
        try:
            if isinstance(data, Raw):
                r = _run_raw(data, path, out_root, duration)
                if r is None:  # a campaign that loaded
                    return Outcome("ok", "campaign loaded", label, time.perf_counter() - t0)
                sc = load_scenario(path, list(data.sets) or None)  # (nothing runs: plugins already imported)
            else:
                sc = load_scenario(path)
                r = run(sc, out_root=out_root / "runs", duration=duration)
        except InternalError as exc:
            return Outcome("traceback", f"InternalError: {exc}", label, time.perf_counter() - t0)
        except ScenarioError as exc:
            named = str(exc).startswith(file + ": ") or (exc.file is not None and exc.file.startswith(file))
            if exc.file is None and "--duration" in str(exc):
                named = True  # a CLI argument, not a file key
            if exc.file is not None and exc.file.startswith(str(path.with_name(path.stem + "_base"))):
                named = True  # a campaign's base scenario
            if "\n" in str(exc):
                return Outcome("unnamed error", f"more than one line: {str(exc)[:300]!r}", label,
                               time.perf_counter() - t0)
            kind = "clean error" if named else "unnamed error"
            return Outcome(kind, str(exc)[:300], label, time.perf_counter() - t0)
        except SimulationDiverged as exc:
            return Outcome("ok", f"diverged: {str(exc)[:200]}", label, time.perf_counter() - t0)
        except DockbenchError as exc:
            kind = "clean error" if (file in str(exc) or "--out" in str(exc)) else "unnamed error"
            return Outcome(kind, f"{type(exc).__name__}: {str(exc)[:300]}", label, time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - this is what the fuzzer counts
            tb = traceback.format_exc().strip().splitlines()
            return Outcome("traceback", f"{type(exc).__name__}: {exc} | {' | '.join(tb[-4:])}", label,
                           time.perf_counter() - t0)
        if check_folder and r.run_dir is not None:
            loaded = Run.load(r.run_dir)
            rows = r.timing["steps"] if sc.telemetry.enabled else 0  # telemetry.enabled: false records no rows
            if loaded.partial or len(loaded.t) != rows:
                return Outcome("traceback", f"folder: partial={loaded.partial} rows={len(loaded.t)} "
                               f"steps={r.timing['steps']} {loaded.problems}", label)
        return Outcome("ok", f"{r.status} {r.verdict}", label, time.perf_counter() - t0)
    finally:
        path.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------- workers
def _worker(conn: Any, out_root: str) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    root = Path(out_root)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        k, data, duration, label = msg
        conn.send(run_case(data, root / f"w{os.getpid()}", duration, label))


class Pool:
    """Worker processes with a per-case timeout (a hung worker is killed and replaced)."""

    def __init__(self, n: int, out_root: Path, timeout: float):
        self.ctx = mp.get_context("spawn")
        self.out_root, self.timeout = out_root, timeout
        self.workers = [self._spawn() for _ in range(n)]

    def _spawn(self) -> tuple[Any, Any]:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, str(self.out_root)), daemon=True)
        p.start()
        return p, parent

    def map(self, cases: list[tuple[str, Any, float | None]], report: Any) -> list[Outcome]:
        results: list[Outcome | None] = [None] * len(cases)
        todo = list(enumerate(cases))
        busy: dict[int, tuple[int, float]] = {}
        while todo or busy:
            for w, (_proc, conn) in enumerate(self.workers):
                if w not in busy and todo:
                    k, (label, data, duration) = todo.pop(0)
                    conn.send((k, data, duration, label))
                    busy[w] = (k, time.perf_counter())
            time.sleep(0.002)
            for w in list(busy):
                proc, conn = self.workers[w]
                k, t0 = busy[w]
                if conn.poll():
                    try:
                        results[k] = conn.recv()
                    except (EOFError, OSError):
                        results[k] = Outcome("traceback", "worker died", cases[k][0])
                        self.workers[w] = self._spawn()
                    del busy[w]
                    report(k, results[k])
                elif not proc.is_alive():
                    results[k] = Outcome("traceback", f"worker died (exit {proc.exitcode})", cases[k][0])
                    self.workers[w] = self._spawn()
                    del busy[w]
                    report(k, results[k])
                elif time.perf_counter() - t0 > self.timeout:
                    proc.kill()
                    proc.join()
                    results[k] = Outcome("hang", f"no answer in {self.timeout:.0f} s", cases[k][0], self.timeout)
                    self.workers[w] = self._spawn()
                    del busy[w]
                    report(k, results[k])
        return [r for r in results if r is not None]

    def close(self) -> None:
        for proc, conn in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def mutation_cases(n: int, seed: int, duration: float) -> list[tuple[str, dict, float]]:
    """``n`` seeded mutations, round-robin over the shipped scenarios (case k of seed s is always the
    same: ``--replay s:k``)."""
    base = shipped()
    names = list(base)
    out = []
    for k in range(n):
        rng = random.Random(f"{seed}:{k}")
        name = names[k % len(names)]
        d, notes = mutate(base[name], rng, base)
        out.append((f"{seed}:{k} {name}: {'; '.join(notes)}", d, duration))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutations", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--adversarial-only", action="store_true")
    ap.add_argument("--no-adversarial", action="store_true")
    ap.add_argument("--hostile-yaml-only", action="store_true",
                    help="only the hostile-YAML list (issue 36: bombs, duplicate keys, YAML 1.1, Unicode, plugins)")
    ap.add_argument("--duration", type=float, default=0.05, help="run length of each case [s]")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a case counts as a hang")
    ap.add_argument("--replay", default=None, help="SEED:K: run one mutation here and print it")
    ap.add_argument("--verbose", action="store_true", help="print every case, not only the failures")
    args = ap.parse_args(argv)

    if args.replay:
        seed, k = args.replay.split(":")
        label, data, duration = mutation_cases(int(k) + 1, int(seed), args.duration)[int(k)]
        print(label)
        print(yaml.safe_dump(data)[:4000])
        with tempfile.TemporaryDirectory() as tmp:
            print(run_case(data, Path(tmp), duration, label))
        return 0
    cases: list[tuple[str, Any, float | None]] = []
    if args.hostile_yaml_only:
        cases += hostile_yaml_cases()
    else:
        if not args.adversarial_only:
            cases += mutation_cases(args.mutations, args.seed, args.duration)
        if not args.no_adversarial:
            cases += adversarial_cases() + hostile_yaml_cases()
    counts: Counter[str] = Counter()
    slow: list[Outcome] = []
    t0 = time.perf_counter()

    def report(k: int, o: Outcome) -> None:
        counts[o.kind] += 1
        if o.kind in ("traceback", "hang", "unnamed error") or args.verbose:
            print(f"[{o.kind}] {o.label}\n    {o.detail}", flush=True)
        if o.seconds > 10:
            slow.append(o)
        done = sum(counts.values())
        if done % 200 == 0:
            print(f"... {done}/{len(cases)} cases, {dict(counts)}, {time.perf_counter() - t0:.0f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="dockbench_fuzz_") as tmp:
        pool = Pool(args.workers, Path(tmp), args.timeout)
        try:
            pool.map(cases, report)
        finally:
            pool.close()
    n = sum(counts.values())
    mutations = 0 if (args.adversarial_only or args.hostile_yaml_only) else args.mutations
    print(f"\n{n} cases ({mutations} mutations of seed {args.seed}, {n - mutations} adversarial) in "
          f"{time.perf_counter() - t0:.0f} s: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for o in slow[:20]:
        print(f"slow ({o.seconds:.1f} s): {o.label}")
    return 1 if counts["traceback"] or counts["hang"] or counts["unnamed error"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
