"""The campaign file: one YAML → a list of trials (docs/campaigns.md is the reference).

::

    name: iiwa14_stiffness                 # the output folder's name
    description: Khatib stiffness × lateral belief error
    base: ../iiwa14_docking.yaml           # the base scenario (relative to this file)
    set: {sim.settle_time: 1.5}            # overrides of every trial (sim/overrides.py)
    variants:                              # named cells that change several keys (or the base) at once
      khatib: {}
      hqp: {base: ../iiwa14_docking_hqp.yaml}
    axes:
      - {key: controller.k, values: [100, 300, 1000], name: k}                      # a grid axis
      - {key: target.belief_offset.position[0], range: {start: -0.006, stop: 0.006, num: 5}, name: dx}
      - {key: [controller.k, controller.d], values: [[300, 100], [1000, 280]], name: gains}   # zipped keys
      - {key: uncertainty.sensing_delay, values: [0, 2]}
      - {key: target.belief_offset.rpy_deg[2], uniform: {low: -15, high: 15}, name: yaw}   # random
      - {key: wrench.ft_bias[2], normal: {mean: 0.0, std: 0.5}, seed: 7}                 # random, own seed
    samples: 20                            # draws of the random axes per cell
    repeats: 3                             # runs of each (cell, sample), each with its own sim.seed
    seed: 0                                # the campaign's seed
    telemetry: failures                    # all | failures | none (summaries are always kept)
    telemetry_budget_mb: 900               # stop keeping telemetry beyond this much (compressed)
    metrics: [contact.peak_force_truth, docking.lateral]   # summary.json's key metrics
    figures: {x: dx, y: k}                 # heat-map axes (default: the first two numeric grid axes)

A *cell* is one point of the grid: a variant (if any) and one value of every grid axis; its name joins
the variant and the axes' labels (``hqp/k=300/dx=0.003``). Each cell runs ``samples × repeats`` trials:
sample m draws every random axis, repeat r runs it with its own ``sim.seed`` (which seeds the scenario's
``uncertainty`` block, sim/uncertainty.py).

Seeds (numpy ``SeedSequence``; docs/theory/uncertainty.md): a random axis with seed s_a draws sample m
from ``SeedSequence([campaign seed, s_a], spawn_key=(m,))``; ``sim.seed`` of (m, r) is the first 32-bit
word of ``SeedSequence([campaign seed, 0x5EED], spawn_key=(m, r))``. Both are the same in every cell
(common random numbers: cells are compared on the same draws) unless ``paired: false``, which adds a
stable hash of the cell's name to the spawn key. Nothing depends on the order in which trials run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from dockbench.sim.errors import ScenarioError
from dockbench.sim.overrides import format_path, merge_overrides, parse_path

TOP_KEYS = (
    "name", "description", "base", "set", "variants", "axes", "samples", "repeats", "seed", "paired",
    "telemetry", "telemetry_budget_mb", "metrics", "figures",
)
TELEMETRY_POLICIES = ("all", "failures", "none")
#: default budget of kept (compressed) telemetry [MB]: a 1000-trial campaign stays under 1 GB with its summaries
DEFAULT_BUDGET_MB = 900.0
#: summary.json's key metrics when the campaign names none
DEFAULT_METRICS = (
    "contact.peak_force_truth", "docking.lateral", "docking.tilt_deg", "docking.depth",
    "contact.steady_axial_force_truth", "tracking.pos_rms",
)
_SEED_WORD = 0x5EED
_RANDOM_KINDS = ("uniform", "normal")
_AXIS_KEYS = ("key", "name", "values", "range", "labels", "uniform", "normal", "seed")
MAX_TRIALS = 1_000_000


@dataclass(frozen=True)
class Axis:
    """One axis: grid (``values``) or random (``dist`` with its parameters).

    Attributes:
        name: label and column name.
        keys: the key paths it sets (several: a zipped axis, one value per key).
        values: grid values (each a tuple, one entry per key); empty for a random axis.
        labels: grid labels (cell names).
        dist: ``uniform`` | ``normal`` | None (grid).
        params: the distribution's parameters ({low, high} or {mean, std}).
        seed: the axis' seed (random axes).
    """

    name: str
    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...] = ()
    labels: tuple[str, ...] = ()
    dist: str | None = None
    params: dict[str, float] = field(default_factory=dict)
    seed: int = 0

    @property
    def random(self) -> bool:
        return self.dist is not None

    def draw(self, campaign_seed: int, sample: int, cell_hash: int | None) -> float:
        """Sample ``sample``'s value (independent of every other sample, trial and order)."""
        key = (sample,) if cell_hash is None else (cell_hash, sample)
        rng = np.random.default_rng(np.random.SeedSequence([campaign_seed, self.seed], spawn_key=key))
        if self.dist == "uniform":
            return float(rng.uniform(self.params["low"], self.params["high"]))
        return float(self.params["mean"] + self.params["std"] * rng.standard_normal())


@dataclass(frozen=True)
class Variant:
    """A named cell group: its own base scenario file and/or overrides."""

    name: str
    base: Path
    set: Any = None


@dataclass(frozen=True)
class Trial:
    """One run of the campaign.

    Attributes:
        index: position in the expansion (variants × grid × samples × repeats).
        trial_id: ``<cell folder>/s<sample>r<repeat>``, the trial's folder under ``trials/``.
        cell: the cell's name; variant: its variant ('' without variants).
        sample, repeat: indices.
        params: column → value (grid and random axes; zipped axes one column per key path).
        seed: the trial's ``sim.seed``.
        base: the base scenario file; overrides: key path → value, applied after the campaign's and
            the variant's ``set`` (in order).
    """

    index: int
    trial_id: str
    cell: str
    variant: str
    sample: int
    repeat: int
    params: dict[str, Any]
    seed: int
    base: Path
    set_layers: tuple[Any, ...]
    overrides: dict[str, Any]

    def scenario_data(self, base_data: dict[str, Any]) -> dict[str, Any]:
        """The trial's scenario mapping: the base file's data with every layer of overrides merged."""
        data = base_data
        for layer in self.set_layers:
            data, _ = merge_overrides(data, layer, where="set")
        data, _ = merge_overrides(data, self.overrides, where="axes")
        return data

    def digest(self, base_data: dict[str, Any]) -> str:
        """A hash of the trial's scenario (resume: a trial whose scenario changed runs again)."""
        text = json.dumps(self.scenario_data(base_data), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Campaign:
    """A parsed campaign file (see the module docstring)."""

    name: str
    description: str
    file: Path
    base: Path
    set: Any
    variants: tuple[Variant, ...]
    axes: tuple[Axis, ...]
    samples: int
    repeats: int
    seed: int
    paired: bool
    telemetry: str
    telemetry_budget_mb: float
    metrics: tuple[str, ...]
    figures: dict[str, Any]

    @property
    def grid_axes(self) -> tuple[Axis, ...]:
        return tuple(a for a in self.axes if not a.random)

    @property
    def random_axes(self) -> tuple[Axis, ...]:
        return tuple(a for a in self.axes if a.random)

    @property
    def n_cells(self) -> int:
        n = max(len(self.variants), 1)
        for a in self.grid_axes:
            n *= len(a.values)
        return n

    @property
    def n_trials(self) -> int:
        return self.n_cells * self.samples * self.repeats

    def columns(self) -> list[str]:
        """The parameter columns of results.csv, in axis order."""
        cols = ["variant"] if self.variants else []
        for a in self.axes:
            cols += [a.name] if len(a.keys) == 1 else list(a.keys)
        return cols

    def trials(self) -> list[Trial]:
        """Every trial, in expansion order (variants outermost, then the grid axes, samples, repeats)."""
        out: list[Trial] = []
        variants = self.variants or (Variant("", self.base, None),)
        grid = self.grid_axes
        shape = [len(a.values) for a in grid]
        cells = list(np.ndindex(*shape)) if grid else [()]
        seed_axis = any("sim.seed" in a.keys for a in self.axes)
        for v in variants:
            for idx in cells:
                parts = [v.name] if v.name else []
                params: dict[str, Any] = {"variant": v.name} if self.variants else {}
                grid_over: dict[str, Any] = {}
                for a, k in zip(grid, idx, strict=True):
                    parts.append(f"{a.name}={a.labels[k]}")
                    _put(a, a.values[k], params, grid_over)
                cell = "/".join(parts) or "all"
                cell_hash = None if self.paired else int(hashlib.sha256(cell.encode()).hexdigest()[:8], 16)
                folder = cell_folder(cell)
                for m in range(self.samples):
                    rnd_params = dict(params)
                    over = dict(grid_over)
                    for a in self.random_axes:
                        _put(a, (a.draw(self.seed, m, cell_hash),), rnd_params, over)
                    for r in range(self.repeats):
                        seed = trial_seed(self.seed, m, r, cell_hash)
                        o = dict(over)
                        if not seed_axis:
                            o["sim.seed"] = seed
                        else:
                            seed = int(o.get("sim.seed", seed))
                        out.append(Trial(
                            index=len(out), trial_id=f"{folder}/s{m:03d}r{r:02d}", cell=cell, variant=v.name,
                            sample=m, repeat=r, params=dict(rnd_params), seed=seed, base=v.base,
                            set_layers=tuple(x for x in (self.set, v.set) if x), overrides=o,
                        ))
        return out


def _put(axis: Axis, value: tuple[Any, ...], params: dict[str, Any], over: dict[str, Any]) -> None:
    for key, x in zip(axis.keys, value, strict=True):
        over[key] = x
        params[axis.name if len(axis.keys) == 1 else key] = x


def trial_seed(campaign_seed: int, sample: int, repeat: int, cell_hash: int | None = None) -> int:
    """``sim.seed`` of sample ``sample``, repeat ``repeat`` (a 32-bit word of the campaign's SeedSequence)."""
    key = (sample, repeat) if cell_hash is None else (cell_hash, sample, repeat)
    return int(np.random.SeedSequence([campaign_seed, _SEED_WORD], spawn_key=key).generate_state(1)[0])


def cell_folder(cell: str) -> str:
    """A folder name for a cell: ``/`` → ``__``, characters outside [A-Za-z0-9._=+-] → ``_``."""
    text = cell.replace("/", "__")
    return re.sub(r"[^A-Za-z0-9._=+\-]", "_", text)


#: the longest folder name most file systems take (bytes of one path component)
NAME_MAX = 255
#: the longest campaign name (it is a folder name, and trial paths go below it)
MAX_NAME = 100
#: the deepest nesting a campaign value or a base scenario may have (a scenario needs 6 or so)
MAX_DEPTH = 32


def _folder_key(name: str) -> str:
    """What makes two folder names the same folder (case-insensitive file systems: macOS, Windows)."""
    return name.casefold()


def check_tree(value: Any, file: Path | str, key: str, depth: int = 0, _seen: tuple[int, ...] = ()) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH` or containing itself (YAML anchors can build a
    recursive list: ``&a [*a]``), naming the key path where it happens."""
    if isinstance(value, (dict, list, tuple)):
        if id(value) in _seen:
            raise _err("a recursive value (it contains itself, e.g. through a YAML anchor and alias)", Path(file),
                       key or None)
        if depth >= MAX_DEPTH:
            raise _err(f"nested deeper than {MAX_DEPTH} levels", Path(file), key or None)
        seen = (*_seen, id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            sub = f"{key}[{k}]" if isinstance(k, int) else (f"{key}.{k}" if key else str(k))
            check_tree(v, file, sub, depth + 1, seen)


def read_yaml(path: Path, what: str = "file") -> Any:
    """A YAML file's data, read by the strict reader of the scenario files (``sim.yamlio.read_yaml_file``: at most
    its size, UTF-8, no NUL, no alias, no duplicate key), then checked as a campaign tree (depth, recursion), or
    a ScenarioError naming the file."""
    from dockbench.sim.yamlio import read_yaml_file  # the scenario files' rules (sim/yamlio.py)

    try:
        data = read_yaml_file(path, what=f"the {what}")
    except RecursionError:
        raise _err(f"nested too deep for the YAML reader (at most {MAX_DEPTH} levels)", path) from None
    check_tree(data, path, "")
    return data


def _check_folders(axes: tuple[Axis, ...], variants: list[Variant], file: Path) -> None:
    """Trial folders are injective: two labels of an axis (or two variants) whose folder names are the same
    (characters outside [A-Za-z0-9._=+-] become ``_``; case is ignored, as macOS and Windows do) are refused,
    naming both; a cell folder name must fit a file system's name limit (:data:`NAME_MAX` bytes)."""
    groups: list[tuple[str, list[str], list[str]]] = []
    if variants:
        groups.append(("variants", [v.name for v in variants], [cell_folder(v.name) for v in variants]))
    for i, a in enumerate(axes):
        if not a.random:
            groups.append((f"axes[{i}].labels", list(a.labels), [cell_folder(f"{a.name}={x}") for x in a.labels]))
    for key, labels, folders in groups:
        seen: dict[str, str] = {}
        for label, folder in zip(labels, folders, strict=True):
            other = seen.setdefault(_folder_key(folder), label)
            if other != label:
                raise _err(f"{other!r} and {label!r} give the same trial folder {folder!r} (characters outside "
                           "[A-Za-z0-9._=+-] become '_', and case is ignored); give labels that differ there", file,
                           key)
    longest = sum(max(len(f.encode()) for f in folders) for _, _, folders in groups) + 2 * max(len(groups) - 1, 0)
    if longest > NAME_MAX - len("s000r00"):
        raise _err(f"the longest cell name gives a {longest}-byte folder name; at most {NAME_MAX - 7}: shorten the "
                   "axis names or give short labels", file, "axes")
    # folder names join the parts with "__": a part containing "__" could make two cells one folder
    if any("__" in f for _, _, folders in groups for f in folders):
        seen_cells: dict[str, tuple[str, ...]] = {}
        shapes = [range(len(labels)) for _, labels, _ in groups]
        for idx in np.ndindex(*[len(r) for r in shapes]):
            parts = tuple(groups[g][1][k] for g, k in enumerate(idx))
            name = _folder_key("__".join(groups[g][2][k] for g, k in enumerate(idx)))
            other = seen_cells.setdefault(name, parts)
            if other != parts:
                raise _err(f"cells {'/'.join(other)!r} and {'/'.join(parts)!r} give the same trial folder "
                           f"{name!r} ('/' and '__' both join cell parts); give labels without '__' or '/'",
                           file, "axes")


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_label(v) for v in value)
    return str(value)


# ------------------------------------------------------------------------------------------ parsing
def _err(msg: str, file: Path, key: str | None = None) -> ScenarioError:
    return ScenarioError(msg, file=str(file), key=key)


def _number(x: Any, file: Path, key: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        raise _err(f"expected a finite number, got {x!r}", file, key)
    return float(x)


def _int(x: Any, file: Path, key: str, lo: int, hi: int = MAX_TRIALS) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise _err(f"expected an integer, got {x!r}", file, key)
    if not lo <= x <= hi:
        raise _err(f"must be in [{lo}, {hi}], got {x}", file, key)
    return x


def _check_set(value: Any, file: Path, key: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _err("expected a mapping of key paths (or nested mappings) to values", file, key)
    for k in value:
        if not isinstance(k, str):
            raise _err(f"keys are key paths (strings), got {k!r}", file, key)
        if "." in k or "[" in k:
            try:
                parse_path(k, where=key)
            except ScenarioError as exc:
                raise _err(exc.detail, file, f"{key}.{k}") from None
    return copy.deepcopy(value)


def _range_values(spec: Any, file: Path, key: str) -> list[Any]:
    if not isinstance(spec, dict):
        raise _err("expected {start, stop, num} or {start, stop, step}", file, key)
    unknown = set(spec) - {"start", "stop", "num", "step"}
    if unknown:
        raise _err(f"unknown key(s) {', '.join(sorted(unknown))}; allowed: start, stop, num, step", file, key)
    for k in ("start", "stop"):
        if k not in spec:
            raise _err("required key missing", file, f"{key}.{k}")
    start, stop = _number(spec["start"], file, f"{key}.start"), _number(spec["stop"], file, f"{key}.stop")
    if ("num" in spec) == ("step" in spec):
        raise _err("give exactly one of num (number of values, ends included) and step", file, key)
    if "num" in spec:
        num = _int(spec["num"], file, f"{key}.num", 1, 100_000)
        vals = np.linspace(start, stop, num).tolist() if num > 1 else [start]
        return [float(v) for v in vals]
    step = _number(spec["step"], file, f"{key}.step")
    if step == 0 or (stop - start) * step < 0:
        raise _err(f"step {step} does not lead from {start} to {stop}", file, f"{key}.step")
    n = int(math.floor((stop - start) / step + 1e-9)) + 1
    if n > 100_000:
        raise _err(f"{n} values; at most 100000", file, key)
    if all(isinstance(spec[k], int) and not isinstance(spec[k], bool) for k in ("start", "stop", "step")):
        return [int(spec["start"]) + i * int(spec["step"]) for i in range(n)]
    return [float(start + i * step) for i in range(n)]


def _parse_axis(item: Any, i: int, file: Path) -> Axis:
    where = f"axes[{i}]"
    if not isinstance(item, dict):
        raise _err("expected a mapping with 'key' and one of values, range, uniform, normal", file, where)
    unknown = set(item) - set(_AXIS_KEYS)
    if unknown:
        raise _err(f"unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(_AXIS_KEYS)}", file, where)
    if "key" not in item:
        raise _err("required key missing (a key path, e.g. controller.k, or a list of them)", file, f"{where}.key")
    raw_keys = item["key"] if isinstance(item["key"], list) else [item["key"]]
    keys = []
    for j, k in enumerate(raw_keys):
        if not isinstance(k, str):
            raise _err(f"expected a key path string, got {k!r}", file, f"{where}.key")
        try:
            keys.append(format_path(parse_path(k, where=f"{where}.key")))
        except ScenarioError as exc:
            raise _err(exc.detail, file, f"{where}.key" + (f"[{j}]" if len(raw_keys) > 1 else "")) from None
    if not keys:
        raise _err("an empty list of keys", file, f"{where}.key")
    kinds = [k for k in ("values", "range", *_RANDOM_KINDS) if k in item]
    if len(kinds) != 1:
        raise _err(f"give exactly one of values, range, uniform, normal (got {', '.join(kinds) or 'none'})", file,
                   where)
    kind = kinds[0]
    default_name = keys[0] if len(keys) == 1 else "+".join(k.split(".")[-1] for k in keys)
    name = item.get("name", default_name)
    if not isinstance(name, str) or not name or "/" in name or "=" in name:
        raise _err(f"expected a non-empty string without '/' or '=', got {name!r}", file, f"{where}.name")
    if kind in _RANDOM_KINDS:
        if len(keys) != 1:
            raise _err("a random axis sets one key", file, f"{where}.key")
        if "labels" in item:
            raise _err("labels name grid values; a random axis has none", file, f"{where}.labels")
        spec = item[kind]
        need = ("low", "high") if kind == "uniform" else ("mean", "std")
        if not isinstance(spec, dict) or set(spec) != set(need):
            raise _err(f"expected {{{', '.join(need)}}}", file, f"{where}.{kind}")
        params = {k: _number(spec[k], file, f"{where}.{kind}.{k}") for k in need}
        if kind == "uniform" and not params["low"] < params["high"]:
            raise _err(f"low must be < high, got {params['low']} and {params['high']}", file, f"{where}.uniform")
        if kind == "normal" and not params["std"] > 0:
            raise _err(f"std must be > 0, got {params['std']}", file, f"{where}.normal.std")
        seed = _int(item.get("seed", i), file, f"{where}.seed", 0, 2**63 - 1)
        return Axis(name=name, keys=tuple(keys), dist=kind, params=params, seed=seed)
    if "seed" in item:
        raise _err("seed applies to random axes (uniform, normal)", file, f"{where}.seed")
    if kind == "range":
        if len(keys) != 1:
            raise _err("a range sets one key; zip keys with values: [[a, b], ...]", file, f"{where}.range")
        values = _range_values(item["range"], file, f"{where}.range")
    else:
        values = item["values"]
        if not isinstance(values, list) or not values:
            raise _err("expected a non-empty list", file, f"{where}.values")
    tuples = []
    for j, v in enumerate(values):
        if len(keys) > 1:
            if not isinstance(v, list) or len(v) != len(keys):
                raise _err(f"expected a list of {len(keys)} values (one per key), got {v!r}", file,
                           f"{where}.values[{j}]")
            tuples.append(tuple(v))
        else:
            tuples.append((v,))
    labels = item.get("labels")
    if labels is None:
        labels = [_label(t[0] if len(t) == 1 else list(t)) for t in tuples]
    elif not isinstance(labels, list) or len(labels) != len(tuples):
        raise _err(f"expected a list of {len(tuples)} labels (one per value)", file, f"{where}.labels")
    labels = [str(x) for x in labels]
    if len(set(labels)) != len(labels):
        raise _err(f"labels must differ (they name the cells), got {labels}", file, f"{where}.labels")
    return Axis(name=name, keys=tuple(keys), values=tuple(tuples), labels=tuple(labels))


def load_campaign(path: str | Path) -> Campaign:
    """Read and validate a campaign file (the scenarios of its trials are validated when they are built).

    Raises:
        ScenarioError: naming the file, the key path and what is allowed.
    """
    if "\0" in str(path):
        raise _err("the path contains a NUL character", Path(str(path).replace("\0", "\\0")))
    file = Path(path)
    try:
        found = file.is_file()
    except OSError as exc:  # e.g. a name too long
        raise _err(f"campaign file not readable: {exc.strerror or exc}", file) from None
    if not found:
        raise _err(f"campaign file not found (looked at {file.resolve()})", file)
    return campaign_from_dict(read_yaml(file, "campaign file"), file)


def check_top_level(data: Any, file: Path, what: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
    """A campaign-like file's top level: a mapping (its tree within the depth and size limits), only
    ``allowed`` keys, every ``required`` key present; one-line errors naming the file and the key."""
    if not isinstance(data, dict):
        raise _err(f"the {what} must be a YAML mapping", file)
    check_tree(data, file, "")
    for k in data:
        if k not in allowed:
            raise _err(f"unknown top-level key {k!r}; allowed: {', '.join(allowed)}", file)
    for k in required:
        if k not in data:
            raise _err("required key missing", file, k)


def check_folder_name(name: Any, file: Path, key: str = "name") -> str:
    """``name`` as the folder it becomes: a non-empty string without '/', '\\', a leading '.', control
    characters, and within :data:`MAX_NAME` characters / :data:`NAME_MAX` bytes."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise _err(f"expected a non-empty folder name without '/' or '\\' (not starting with '.'), got {name!r}",
                   file, key)
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _err(f"control characters (NUL, newline, …) cannot be in a folder name, got {name!r}", file, key)
    if len(name) > MAX_NAME or len(name.encode()) > NAME_MAX:
        raise _err(f"at most {MAX_NAME} characters (it is a folder name), got {len(name)}", file, key)
    return name


def campaign_from_dict(data: Any, file: Path) -> Campaign:
    """Validate a campaign mapping (see :func:`load_campaign`)."""
    from dockbench.telemetry.metrics import METRICS

    check_top_level(data, file, "campaign", TOP_KEYS, ("name", "base"))
    name = check_folder_name(data["name"], file)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _err(f"expected a string, got {description!r}", file, "description")

    def base_path(value: Any, key: str) -> Path:
        if not isinstance(value, str) or not value:
            raise _err(f"expected a scenario file path, got {value!r}", file, key)
        if "\0" in value:
            raise _err(f"a path cannot contain a NUL character, got {value!r}", file, key)
        p = Path(value)
        p = p if p.is_absolute() else (file.parent / p)
        try:
            found = p.is_file()
        except OSError as exc:  # e.g. a name too long
            raise _err(f"scenario file not readable: {value} ({exc.strerror or exc})", file, key) from None
        if not found:
            raise _err(f"scenario file not found: {value} (looked at {p.resolve()})", file, key)
        return p

    base = base_path(data["base"], "base")
    set_ = _check_set(data.get("set"), file, "set")
    variants = []
    raw_variants = data.get("variants") or {}
    if not isinstance(raw_variants, dict):
        raise _err("expected a mapping name → {base, set}", file, "variants")
    for vname, v in raw_variants.items():
        key = f"variants.{vname}"
        if not isinstance(vname, str) or not vname or "/" in vname or "=" in vname:
            raise _err(f"variant names are non-empty strings without '/' or '=', got {vname!r}", file, "variants")
        v = v or {}
        if not isinstance(v, dict) or set(v) - {"base", "set"}:
            raise _err("expected a mapping with base and/or set", file, key)
        vbase = base_path(v["base"], f"{key}.base") if "base" in v else base
        variants.append(Variant(vname, vbase, _check_set(v.get("set"), file, f"{key}.set")))
    raw_axes = data.get("axes") or []
    if not isinstance(raw_axes, list):
        raise _err("expected a list of axes", file, "axes")
    axes = tuple(_parse_axis(a, i, file) for i, a in enumerate(raw_axes))
    names = [a.name for a in axes] + (["variant"] if variants else [])
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _err(f"axis names must differ (they name results.csv's columns): {', '.join(dup)}", file, "axes")
    _check_folders(axes, variants, file)
    seen: dict[str, int] = {}
    for i, a in enumerate(axes):
        for k in a.keys:
            if k in seen:
                raise _err(f"key {k} is also set by axes[{seen[k]}]", file, f"axes[{i}].key")
            seen[k] = i
    has_random = any(a.random for a in axes)
    samples = _int(data.get("samples", 1), file, "samples", 1)
    if samples > 1 and not has_random:
        raise _err("samples draws the random axes (uniform, normal); there are none — use repeats for runs with "
                   "different sim.seed", file, "samples")
    repeats = _int(data.get("repeats", 1), file, "repeats", 1)
    seed = _int(data.get("seed", 0), file, "seed", 0, 2**63 - 1)
    paired = data.get("paired", True)
    if not isinstance(paired, bool):
        raise _err(f"expected true/false, got {paired!r}", file, "paired")
    telemetry = data.get("telemetry", "failures")
    if telemetry not in TELEMETRY_POLICIES:
        raise _err(f"got {telemetry!r}; allowed: {', '.join(TELEMETRY_POLICIES)}", file, "telemetry")
    budget = _number(data.get("telemetry_budget_mb", DEFAULT_BUDGET_MB), file, "telemetry_budget_mb")
    if budget < 0:
        raise _err(f"must be >= 0, got {budget}", file, "telemetry_budget_mb")
    metrics = data.get("metrics", list(DEFAULT_METRICS))
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise _err("expected a list of metric names", file, "metrics")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise _err(f"unknown metric(s) {', '.join(unknown)}; see docs/metrics.md", file, "metrics")
    figures = data.get("figures") or {}
    if not isinstance(figures, dict) or set(figures) - {"x", "y", "metric"}:
        raise _err("expected a mapping with x, y (axis names) and metric", file, "figures")
    grid_names = [a.name for a in axes if not a.random]
    for k in ("x", "y"):
        if k in figures and figures[k] not in grid_names:
            raise _err(f"{figures[k]!r} is not a grid axis; grid axes: {', '.join(grid_names) or 'none'}", file,
                       f"figures.{k}")
    if "metric" in figures and figures["metric"] not in METRICS:
        raise _err(f"unknown metric {figures['metric']!r}", file, "figures.metric")
    camp = Campaign(
        name=name, description=description, file=file, base=base, set=set_, variants=tuple(variants), axes=axes,
        samples=samples, repeats=repeats, seed=seed, paired=paired, telemetry=telemetry,
        telemetry_budget_mb=budget, metrics=tuple(metrics), figures=dict(figures),
    )
    if camp.n_trials > MAX_TRIALS:
        raise _err(f"{camp.n_trials} trials; at most {MAX_TRIALS}", file)
    return camp
