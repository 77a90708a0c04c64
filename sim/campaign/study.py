"""Robust gain tuning over a campaign (docs/tuning.md is the reference): a *study* is a campaign, a search
space over scenario keys and an objective computed from the campaign's per-trial results; Optuna proposes
the candidates and keeps the study in a SQLite file in the study folder.

::

    name: fr3_keyed_khatib                 # the study folder's name
    label: Khatib                          # the law's name in a --compare table (default: name)
    campaign:                              # a campaign (docs/campaigns.md), inline or a file path
      base: ../keyed/fr3_keyed_khatib.yaml
      axes: [{key: target.belief_offset.position.0, values: [-0.006, 0.006], name: dx}]
      telemetry: none
    search:                                # what the tuner may change: scenario key paths
      - {key: controller.k, type: float, low: 400, high: 2000, log: true}
      - {key: controller.d, type: float, low: 200, high: 1200}
      - {key: controller.feedforward, type: categorical, choices: [hybrid, velocity]}
    objectives:                            # one (single objective), or several: lexicographic or pareto
      - {stat: success_wilson_low, direction: maximize}
      - {stat: p95, metric: contact.peak_force_truth, direction: minimize, scale: 25.0}
    mode: lexicographic
    constraints:                           # feasible when every one holds
      - {stat: success_rate, min: 1.0}
      - {stat: max, metric: contact.peak_force_truth, max: 25.0}
    prune: true                            # stop a candidate's campaign once a constraint cannot hold
    candidates: 12                         # the budget
    sampler: {type: tpe, seed: 0, startup: 4}
    start:                                 # optional: candidates evaluated first (e.g. the shipped gains or a
      - {controller.k: 1000, controller.d: 700}   #   previous study's best); keys left out are sampled

Study folder ``<out>/<name>/``: ``study.yaml`` (a copy), ``study.db`` (Optuna's RDB storage: SQLite; open it
with ``optuna-dashboard sqlite:///study.db``), ``shipped/`` (the campaign with the scenario's own values),
``candidates/c0000/`` … (each candidate's campaign: an ordinary campaign folder), ``candidates.csv`` and
``study.json`` (every candidate's parameters, statistics, objective values and state; the best).

Resuming after any kill: candidates are evaluated one at a time; a candidate that was RUNNING when the
driver died is evaluated again with its stored parameters in its own campaign folder, whose finished trials
the campaign tool keeps (nothing lost, no candidate asked twice). The sampler is re-seeded per candidate
from (study seed, candidate number), so a resumed study proposes what an uninterrupted one would have.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import hashlib
import io
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from dockbench.sim.campaign.spec import (
    Campaign,
    _err,
    _int,
    _number,
    campaign_from_dict,
    check_folder_name,
    check_top_level,
    load_campaign,
    read_yaml,
)
from dockbench.sim.campaign.stats import quantiles, wilson_interval
from dockbench.sim.errors import DockbenchError, ScenarioError

TOP_KEYS = ("name", "label", "description", "campaign", "search", "objectives", "mode", "constraints", "prune",
            "candidates", "sampler", "holdout", "envelope", "confirm", "start")
PARAM_TYPES = ("float", "int", "categorical")
#: statistics of a candidate's campaign: success (every gate passed) and quantiles of a metric over its trials
SUCCESS_STATS = ("success_rate", "success_wilson_low")
METRIC_STATS = ("median", "p95", "max", "mean")
STATS = SUCCESS_STATS + METRIC_STATS
DIRECTIONS = ("minimize", "maximize")
MODES = ("lexicographic", "pareto")
SAMPLERS = ("tpe", "cmaes", "nsga2", "random")
#: the secondary term of a lexicographic objective is clipped to [-CAP, CAP] (after its scale)
LEX_CAP = 10.0
#: the study folder's database, lock and records
DB_FILE = "study.db"
MAX_CANDIDATES = 100_000


@dataclass(frozen=True)
class SearchParam:
    """One searched scenario key: ``float`` (``low``, ``high``, ``log``, ``step``), ``int`` (``low``, ``high``,
    ``step``, ``log``) or ``categorical`` (``choices``)."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()
    #: further key paths that take the same value (``key: [a, b]`` in the file: e.g. an isotropic lateral
    #: stiffness); ``key`` names the parameter in the study's database and records
    also: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """Every scenario key path this parameter sets."""
        return (self.key, *self.also)

    @property
    def label(self) -> str:
        """``key``, or ``key = also…`` for tied keys (tables)."""
        return " = ".join(self.keys)

    def distribution(self) -> Any:
        import optuna

        if self.kind == "float":
            return optuna.distributions.FloatDistribution(self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return optuna.distributions.IntDistribution(self.low, self.high, log=self.log, step=self.step or 1)
        return optuna.distributions.CategoricalDistribution(list(self.choices))

    def corners(self) -> list[Any]:
        """The values that validate the key against the scenario schema: the bounds, or every choice."""
        return list(self.choices) if self.kind == "categorical" else [self.low, self.high]


@dataclass(frozen=True)
class Term:
    """A statistic of a candidate's campaign: ``stat`` (:data:`STATS`) of ``metric`` (metric stats only);
    as an objective with a ``direction`` (and, secondary in a lexicographic objective, a ``scale``); as a
    constraint with a ``min`` and/or ``max``."""

    stat: str
    metric: str | None = None
    direction: str = "minimize"
    scale: float = 1.0
    min: float | None = None
    max: float | None = None

    @property
    def label(self) -> str:
        return self.stat if self.metric is None else f"{self.stat}({self.metric})"


@dataclass(frozen=True)
class Study:
    """A parsed study file (see the module docstring)."""

    name: str
    label: str
    description: str
    file: Path
    campaign: Campaign
    search: tuple[SearchParam, ...]
    objectives: tuple[Term, ...]
    mode: str
    constraints: tuple[Term, ...]
    prune: bool
    candidates: int
    sampler: dict[str, Any]
    #: the held-out campaign (the study's campaign with the ``holdout`` axes), None without one
    holdout: Campaign | None = None
    #: the whole envelope (the study's campaign with the ``envelope`` axes: its cases may include the study's
    #: own), None without one
    envelope: Campaign | None = None
    #: how many of the best feasible candidates run on the envelope; the tuned values are the best of them there
    confirm: int = 1
    #: candidates evaluated first, before the sampler proposes any (search key → value; keys left out are
    #: sampled): Optuna's enqueued trials, in order
    start: tuple[dict[str, Any], ...] = ()

    @property
    def directions(self) -> list[str]:
        if len(self.objectives) == 1:
            return [self.objectives[0].direction]
        return [t.direction for t in self.objectives] if self.mode == "pareto" else ["minimize"]

    def fingerprint(self) -> str:
        """What a resumed study must share with the stored one: search space, objectives, constraints, pruning,
        sampler and the campaign's trials (their scenarios' overrides and seeds)."""
        camp = self.campaign
        data = {
            "search": [{k: v for k, v in dataclasses.asdict(p).items() if k != "also" or v} for p in self.search],
            "objectives": [dataclasses.asdict(t) for t in self.objectives], "mode": self.mode,
            "constraints": [dataclasses.asdict(t) for t in self.constraints], "prune": self.prune,
            "sampler": self.sampler,
            "trials": [(t.trial_id, str(t.base), t.set_layers, t.overrides) for t in camp.trials()],
        }
        if self.start:  # a study without one keeps the fingerprint it had before the key existed
            data["start"] = list(self.start)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------ statistics
def success_counts(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(passed, trials) of a campaign's rows: a trial succeeds when its verdict is PASS (every gate)."""
    return sum(r["verdict"] == "PASS" for r in rows), len(rows)


def stat_value(term: Term, rows: list[dict[str, Any]]) -> float | None:
    """``term``'s statistic over a candidate's rows (results.csv's rows, as :func:`run_campaign` returns them):
    the success rate, the Wilson 95% lower bound of it, or the median / p95 (numpy's linear interpolation) /
    max / mean of a metric over the trials where it is finite. None when there is nothing to compute it on."""
    if term.stat in SUCCESS_STATS:
        k, n = success_counts(rows)
        if n == 0:
            return None
        return k / n if term.stat == "success_rate" else wilson_interval(k, n)[0]
    values = [r["metrics"].get(term.metric) for r in rows]
    if term.stat == "mean":
        x = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        return float(np.mean(x)) if x else None
    return quantiles(values)[term.stat]


def wilson_low_step(n: int) -> float:
    """The smallest rise of the Wilson 95% lower bound between k and k + 1 successes of n trials (k = 0 … n-1):
    how far apart two distinct success counts keep a lexicographic objective's first term."""
    lows = [wilson_interval(k, n)[0] for k in range(n + 1)]
    return float(min(b - a for a, b in zip(lows, lows[1:], strict=False)))


def lexicographic_value(primary: Term, secondary: Term, rows: list[dict[str, Any]], n_trials: int) -> float:
    """A scalar (minimised) that orders candidates by ``primary`` (a success statistic, maximised) first and
    ``secondary`` second: ``J = K (1 - s1) + clip(±s2 / scale, -CAP, CAP)`` with ``K = 4 CAP / Δ``, Δ the
    smallest step of s1 over ``n_trials`` (1/n for the rate, :func:`wilson_low_step` for the Wilson bound), so
    one more success always outweighs any change of the secondary term. A missing secondary counts as its
    worst (``CAP``)."""
    s1 = stat_value(primary, rows)
    s1 = 0.0 if s1 is None else s1
    step = 1.0 / n_trials if primary.stat == "success_rate" else wilson_low_step(n_trials)
    big = 4.0 * LEX_CAP / step
    s2 = stat_value(secondary, rows)
    if s2 is None:
        t2 = LEX_CAP
    else:
        sign = 1.0 if secondary.direction == "minimize" else -1.0
        t2 = min(max(sign * s2 / secondary.scale, -LEX_CAP), LEX_CAP)
    return big * (1.0 - s1) + t2


def objective_values(study: Study, rows: list[dict[str, Any]], n_trials: int | None = None) -> list[float]:
    """The values Optuna is told for a finished candidate: one per direction of the study. A missing statistic
    is the worst value (``inf`` minimised, ``-inf`` maximised)."""
    n = n_trials or len(rows)
    if len(study.objectives) > 1 and study.mode == "lexicographic":
        return [lexicographic_value(study.objectives[0], study.objectives[1], rows, n)]
    out = []
    for t in study.objectives:
        v = stat_value(t, rows)
        out.append((math.inf if t.direction == "minimize" else -math.inf) if v is None else float(v))
    return out


def constraint_values(study: Study, rows: list[dict[str, Any]]) -> list[float]:
    """One value per bound of every constraint, Optuna's convention: ≤ 0 holds (``min - x``, ``x - max``);
    a statistic that cannot be computed violates its bounds by 1."""
    out = []
    for t in study.constraints:
        v = stat_value(t, rows)
        for bound, sign in ((t.min, -1.0), (t.max, 1.0)):
            if bound is not None:
                out.append(1.0 if v is None else sign * (v - bound))
    return out


def can_still_hold(study: Study, rows: list[dict[str, Any]], n_trials: int) -> bool:
    """False once a constraint can no longer hold whatever the candidate's remaining trials give (the
    pruning test): a minimum success rate or Wilson bound with more failures than it allows, or a maximum of a
    metric's ``max`` that a trial already exceeded. Other constraints (quantiles) are not decided early."""
    k, n = success_counts(rows)
    failures = n - k
    for t in study.constraints:
        if t.stat in SUCCESS_STATS and t.min is not None:
            best = n_trials - failures  # every remaining trial succeeding
            v = best / n_trials if t.stat == "success_rate" else wilson_interval(best, n_trials)[0]
            if v < t.min:
                return False
        if t.stat == "max" and t.max is not None:
            v = stat_value(t, rows)
            if v is not None and v > t.max:
                return False
    return True


# ------------------------------------------------------------------------------------------ parsing
def _term(item: Any, file: Path, where: str, role: str) -> Term:
    from dockbench.telemetry.metrics import METRICS

    allowed = ("stat", "metric", "direction", "scale") if role == "objective" else ("stat", "metric", "min", "max")
    if not isinstance(item, dict):
        raise _err(f"expected a mapping with {', '.join(allowed)}", file, where)
    unknown = set(item) - set(allowed)
    if unknown:
        raise _err(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(allowed)}", file, where)
    stat = item.get("stat")
    if stat not in STATS:
        raise _err(f"got {stat!r}; allowed: {', '.join(STATS)}", file, f"{where}.stat")
    metric = item.get("metric")
    if stat in SUCCESS_STATS:
        if metric is not None:
            raise _err(f"{stat} is the share of trials that pass every gate; it takes no metric", file,
                       f"{where}.metric")
    else:
        if metric not in METRICS:
            raise _err(f"{stat} needs a metric; got {metric!r}; see docs/metrics.md (e.g. contact.peak_force_truth)",
                       file, f"{where}.metric")
    if role == "objective":
        direction = item.get("direction", "maximize" if stat in SUCCESS_STATS else "minimize")
        if direction not in DIRECTIONS:
            raise _err(f"got {direction!r}; allowed: {', '.join(DIRECTIONS)}", file, f"{where}.direction")
        scale = _number(item.get("scale", 1.0), file, f"{where}.scale")
        if not scale > 0:
            raise _err(f"must be > 0, got {scale}", file, f"{where}.scale")
        return Term(stat, metric, direction=direction, scale=scale)
    lo = None if item.get("min") is None else _number(item["min"], file, f"{where}.min")
    hi = None if item.get("max") is None else _number(item["max"], file, f"{where}.max")
    if lo is None and hi is None:
        raise _err("give min and/or max", file, where)
    if lo is not None and hi is not None and lo > hi:
        raise _err(f"min {lo} > max {hi}", file, where)
    return Term(stat, metric, min=lo, max=hi)


def _param(item: Any, i: int, file: Path) -> SearchParam:
    from dockbench.sim.overrides import format_path, parse_path

    where = f"search[{i}]"
    allowed = ("key", "type", "low", "high", "log", "step", "choices")
    if not isinstance(item, dict):
        raise _err(f"expected a mapping with {', '.join(allowed)}", file, where)
    unknown = set(item) - set(allowed)
    if unknown:
        raise _err(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(allowed)}", file, where)
    raw_keys = item.get("key")
    tied = isinstance(raw_keys, list)
    if not tied:
        raw_keys = [raw_keys]
    if not raw_keys:
        raise _err("expected a scenario key path or a non-empty list of them (tied keys)", file, f"{where}.key")
    keys = []
    for j, key in enumerate(raw_keys):
        at = f"{where}.key[{j}]" if tied else f"{where}.key"
        if not isinstance(key, str) or not key:
            raise _err(f"expected a scenario key path (e.g. controller.k), got {key!r}", file, at)
        try:
            keys.append(format_path(parse_path(key, where=at)))
        except ScenarioError as exc:
            raise _err(exc.detail, file, at) from None
    if len(set(keys)) != len(keys):
        raise _err(f"a tied key is listed twice: {keys}", file, f"{where}.key")
    key, also = keys[0], tuple(keys[1:])
    kind = item.get("type", "categorical" if "choices" in item else "float")
    if kind not in PARAM_TYPES:
        raise _err(f"got {kind!r}; allowed: {', '.join(PARAM_TYPES)}", file, f"{where}.type")
    if kind == "categorical":
        extra = set(item) & {"low", "high", "log", "step"}
        if extra:
            raise _err(f"a categorical parameter takes choices, not {', '.join(sorted(extra))}", file, where)
        choices = item.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _err("expected a non-empty list of values", file, f"{where}.choices")
        for j, c in enumerate(choices):
            if not (c is None or isinstance(c, (bool, int, float, str))):
                raise _err(f"a choice is a number, string, bool or null, got {c!r}", file, f"{where}.choices[{j}]")
        if len({json.dumps(c) for c in choices}) != len(choices):
            raise _err(f"choices must differ, got {choices}", file, f"{where}.choices")
        return SearchParam(key, kind, choices=tuple(choices), also=also)
    if "choices" in item:
        raise _err(f"choices belong to type categorical (this one is {kind})", file, f"{where}.choices")
    for k in ("low", "high"):
        if k not in item:
            raise _err("required key missing", file, f"{where}.{k}")
    if kind == "int":
        lo = _int(item["low"], file, f"{where}.low", -(2**62), 2**62)
        hi = _int(item["high"], file, f"{where}.high", -(2**62), 2**62)
        step = _int(item.get("step", 1), file, f"{where}.step", 1, 2**62)
    else:
        lo, hi = _number(item["low"], file, f"{where}.low"), _number(item["high"], file, f"{where}.high")
        step = None if item.get("step") is None else _number(item["step"], file, f"{where}.step")
        if step is not None and not step > 0:
            raise _err(f"must be > 0, got {step}", file, f"{where}.step")
    if not lo < hi:
        raise _err(f"low must be < high, got {lo} and {hi}", file, where)
    log = item.get("log", False)
    if not isinstance(log, bool):
        raise _err(f"expected true/false, got {log!r}", file, f"{where}.log")
    if log and lo <= 0:
        raise _err(f"a log scale needs low > 0, got {lo}", file, f"{where}.low")
    if log and step not in (None, 1):
        raise _err("a log scale takes no step", file, f"{where}.step")
    return SearchParam(key, kind, lo, hi, log, step if kind == "int" or step is not None else None, also=also)


def _campaign(value: Any, file: Path, name: str) -> Campaign:
    if isinstance(value, str):
        p = Path(value)
        p = p if p.is_absolute() else file.parent / p
        if not p.is_file():
            raise _err(f"campaign file not found: {value} (looked at {p.resolve()})", file, "campaign")
        return load_campaign(p)
    if not isinstance(value, dict):
        raise _err("expected a campaign mapping (docs/campaigns.md) or a campaign file path", file, "campaign")
    data = {"name": name, **value}
    try:
        return campaign_from_dict(data, file)
    except ScenarioError as exc:  # the inline campaign's keys are under campaign.
        key = f"campaign.{exc.key}" if exc.key else "campaign"
        raise ScenarioError(exc.detail, file=str(file), key=key) from None


def load_study(path: str | Path) -> Study:
    """Read and validate a study file: its campaign (docs/campaigns.md), its search space (every key checked
    against the scenario schema at its bounds and choices), objectives, constraints and sampler.

    Raises:
        ScenarioError: one line naming the file, the key path and what is allowed.
    """
    file = Path(path)
    if not file.is_file():
        raise _err(f"study file not found (looked at {file.resolve()})", file)
    data = read_yaml(file, "study file")
    return study_from_dict(data, file)


def study_from_dict(data: Any, file: Path) -> Study:
    """Validate a study mapping (see :func:`load_study`)."""
    check_top_level(data, file, "study", TOP_KEYS, ("name", "campaign", "search", "objectives"))
    name = check_folder_name(data["name"], file)
    label = data.get("label", name)
    description = data.get("description", "")
    for k, v in (("label", label), ("description", description)):
        if not isinstance(v, str):
            raise _err(f"expected a string, got {v!r}", file, k)
    camp = _campaign(data["campaign"], file, name)
    holdout = _extra_campaign(data, file, "holdout")
    envelope = _extra_campaign(data, file, "envelope")
    raw = data["search"]
    if not isinstance(raw, list) or not raw:
        raise _err("expected a non-empty list of {key, type, low, high | choices}", file, "search")
    search = tuple(_param(item, i, file) for i, item in enumerate(raw))
    keys = [k for p in search for k in p.keys]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise _err(f"searched twice: {', '.join(dup)}", file, "search")
    axis_keys = {k for a in camp.axes for k in a.keys}
    for i, p in enumerate(search):
        for k in p.keys:
            if k in axis_keys:
                raise _err(f"{k} is an axis of the campaign; a key is either searched or swept", file,
                           f"search[{i}].key")
    raw_obj = data["objectives"]
    raw_obj = [raw_obj] if isinstance(raw_obj, dict) else raw_obj
    if not isinstance(raw_obj, list) or not raw_obj:
        raise _err("expected an objective {stat, metric?, direction} or a list of them", file, "objectives")
    objectives = tuple(_term(t, file, f"objectives[{i}]", "objective") for i, t in enumerate(raw_obj))
    mode = data.get("mode", "lexicographic")
    if mode not in MODES:
        raise _err(f"got {mode!r}; allowed: {', '.join(MODES)}", file, "mode")
    if len(objectives) > 1 and mode == "lexicographic":
        if len(objectives) != 2:
            raise _err(f"a lexicographic objective has 2 terms (a success statistic, then another), got "
                       f"{len(objectives)}; use mode: pareto for more", file, "objectives")
        first = objectives[0]
        if first.stat not in SUCCESS_STATS or first.direction != "maximize":
            raise _err(f"the first term of a lexicographic objective is a maximised success statistic "
                       f"({', '.join(SUCCESS_STATS)}), got {first.direction} {first.stat}", file, "objectives[0]")
    raw_con = data.get("constraints") or []
    if not isinstance(raw_con, list):
        raise _err("expected a list of {stat, metric?, min?, max?}", file, "constraints")
    constraints = tuple(_term(t, file, f"constraints[{i}]", "constraint") for i, t in enumerate(raw_con))
    prune = data.get("prune", True)
    if not isinstance(prune, bool):
        raise _err(f"expected true/false, got {prune!r}", file, "prune")
    candidates = _int(data.get("candidates", 20), file, "candidates", 1, MAX_CANDIDATES)
    sampler = _sampler(data.get("sampler") or {}, file, multi=len(objectives) > 1 and mode == "pareto")
    confirm = _int(data.get("confirm", 1), file, "confirm", 1, MAX_CANDIDATES)
    if confirm > 1 and envelope is None:
        raise _err("confirm runs the best candidates on the study's envelope: give envelope: {axes: [...]}", file,
                   "confirm")
    if confirm > 1 and len(objectives) > 1 and mode == "pareto":
        raise _err("confirm ranks candidates by one value: a lexicographic or single objective, not pareto", file,
                   "confirm")
    start = _start(data.get("start"), search, file)
    if len(start) > candidates:
        raise _err(f"{len(start)} start candidates but a budget of {candidates} candidates", file, "start")
    study = Study(name, label, description, file, camp, search, objectives, mode, constraints, prune, candidates,
                  sampler, holdout, envelope, confirm, start)
    validate_search(study)
    return study


def _start(raw: Any, search: tuple[SearchParam, ...], file: Path) -> tuple[dict[str, Any], ...]:
    """``start``: a list of mappings from searched keys (each parameter's first key) to values inside its
    bounds or choices; the candidates the study evaluates first."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, dict) and x for x in raw):
        raise _err("expected a list of mappings {searched key: value}", file, "start")
    from dockbench.sim.overrides import format_path, parse_path

    by_key = {k: p for p in search for k in p.keys}  # a tied parameter by any of its keys
    out = []
    for i, item in enumerate(raw):
        params: dict[str, Any] = {}
        for k, v in item.items():
            where = f"start[{i}].{k}"
            try:
                p = by_key.get(format_path(parse_path(str(k), where=where)))
            except ScenarioError:
                p = None
            if p is None:
                raise _err(f"not a searched key; allowed: {', '.join(q.key for q in search)}", file, where)
            if p.key in params:
                raise _err(f"{p.label} given twice", file, where)
            params[p.key] = v
            if p.kind == "categorical":
                if v not in p.choices:
                    raise _err(f"got {v!r}; allowed: {', '.join(map(repr, p.choices))}", file, where)
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (p.kind == "int" and v != int(v)):
                raise _err(f"expected {'an integer' if p.kind == 'int' else 'a number'}, got {v!r}", file, where)
            if not p.low <= v <= p.high:
                raise _err(f"got {v!r}; allowed: {p.low} to {p.high} (the search bounds)", file, where)
        out.append({k: int(v) if by_key[k].kind == "int" else float(v) if by_key[k].kind == "float" else v
                    for k, v in params.items()})
    return tuple(out)


#: the keys of ``holdout`` and ``envelope``: the study's campaign with these instead of its own
EXTRA_CAMPAIGN_KEYS = ("axes", "samples", "seed", "repeats")


def _extra_campaign(data: dict[str, Any], file: Path, key: str) -> Campaign | None:
    """The study's campaign with ``<key>.axes`` (and optionally ``samples``, ``seed``, ``repeats``: random axes
    drawn as in any campaign) instead of its own: ``holdout`` (cases the tuner never saw) or ``envelope`` (the
    whole envelope the study's cases screen). The shipped and the best values run on it after the study."""
    raw = data.get(key)
    if raw is None:
        return None
    if not isinstance(raw, dict) or "axes" not in raw or set(raw) - set(EXTRA_CAMPAIGN_KEYS):
        raise _err(f"expected {{axes: [...]}} with optionally {', '.join(EXTRA_CAMPAIGN_KEYS[1:])} (campaign axes, "
                   "docs/campaigns.md)", file, key)
    value = data["campaign"]
    base = read_yaml(file.parent / value, "campaign file") if isinstance(value, str) else dict(value)
    if not isinstance(base, dict):
        raise _err("the campaign must be a mapping", file, "campaign")
    where = file if isinstance(value, dict) else file.parent / value
    base = {k: v for k, v in base.items() if k not in EXTRA_CAMPAIGN_KEYS}
    base = {**base, **raw, "name": key, "figures": {}}
    if isinstance(value, str):  # the campaign file's base path is relative to that file
        base["base"] = str((where.parent / base["base"]).resolve()) if isinstance(base.get("base"), str) else None
    try:
        return campaign_from_dict(base, where)
    except ScenarioError as exc:
        at = f"{key}.{exc.key}" if exc.key else key
        raise ScenarioError(exc.detail, file=str(file), key=at) from None


def _sampler(raw: Any, file: Path, multi: bool) -> dict[str, Any]:
    allowed = ("type", "seed", "startup", "population")
    if not isinstance(raw, dict):
        raise _err(f"expected a mapping with {', '.join(allowed)}", file, "sampler")
    unknown = set(raw) - set(allowed)
    if unknown:
        raise _err(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: {', '.join(allowed)}", file,
                   "sampler")
    kind = raw.get("type", "nsga2" if multi else "tpe")
    if kind not in SAMPLERS:
        raise _err(f"got {kind!r}; allowed: {', '.join(SAMPLERS)}", file, "sampler.type")
    if kind == "cmaes" and multi:
        raise _err("CMA-ES is single-objective; a pareto study takes nsga2, tpe or random", file, "sampler.type")
    return {"type": kind, "seed": _int(raw.get("seed", 0), file, "sampler.seed", 0, 2**32 - 1),
            "startup": _int(raw.get("startup", 5), file, "sampler.startup", 0, MAX_CANDIDATES),
            "population": _int(raw.get("population", 8), file, "sampler.population", 2, MAX_CANDIDATES)}


def validate_search(study: Study) -> None:
    """Build the scenario of the campaign's first trial with every searched key at each of its bounds (or
    choices): a key the scenario schema does not know, or a bound outside the key's own bounds, is a one-line
    error naming the study file, ``search[i]`` and what the schema said."""
    from dockbench.sim.campaign.runner import _read_base
    from dockbench.sim.scenario import scenario_from_dict

    camp = study.campaign
    firsts = {}
    for t in camp.trials():
        firsts.setdefault(t.variant, t)
    for v, t in firsts.items():
        base = _read_base(t.base)
        for i, p in enumerate(study.search):
            for value in p.corners():
                cand = candidate_campaign(study, {p.key: value}, camp.name)
                trial = next(x for x in cand.trials() if x.variant == v)
                try:
                    scenario_from_dict(trial.scenario_data(base), file=str(t.base))
                except ScenarioError as exc:
                    where = f"{exc.key}: " if exc.key else ""
                    raise _err(f"{p.key} = {value!r} does not validate ({where}{exc.detail})", study.file,
                               f"search[{i}]") from None


def candidate_campaign(study: Study, params: dict[str, Any], name: str) -> Campaign:
    """The study's campaign with ``params`` (key path → value) applied to every trial after the campaign's and
    the variants' ``set`` (the axes' values come last; a searched key is never an axis), named ``name``."""
    camp = study.campaign
    for p in study.search:  # tied keys take the parameter's value
        if p.also and p.key in params:
            params = {**params, **dict.fromkeys(p.also, params[p.key])}
    if camp.variants:
        variants = tuple(dataclasses.replace(v, set={**copy.deepcopy(v.set or {}), **params}) for v in camp.variants)
        return dataclasses.replace(camp, name=name, variants=variants)
    return dataclasses.replace(camp, name=name, set={**copy.deepcopy(camp.set or {}), **params})


# ------------------------------------------------------------------------------------------ Optuna
def _optuna() -> Any:
    from dockbench.sim.extras import require

    optuna = require("optuna", "tune", "robust gain tuning (dockbench tune)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def candidate_seed(seed: int, number: int, salt: int = 0) -> int:
    """The sampler's seed for candidate ``number`` (a 32-bit word of ``SeedSequence([seed, 0x7E5E],
    spawn_key=(number, salt))``; ``salt`` 0 for the candidate's relative sampling, a hash of a parameter's name
    for its independent sampling)."""
    key = (number,) if salt == 0 else (number, salt)
    return int(np.random.SeedSequence([seed, 0x7E5E], spawn_key=key).generate_state(1)[0])


def suggest(trial: Any, p: SearchParam) -> Any:
    """``p``'s value for ``trial`` (the stored one if the trial has it, else proposed by the study's sampler)."""
    if p.kind == "float":
        return trial.suggest_float(p.key, p.low, p.high, log=p.log, step=p.step)
    if p.kind == "int":
        return trial.suggest_int(p.key, p.low, p.high, log=p.log, step=p.step or 1)
    return trial.suggest_categorical(p.key, list(p.choices))


def make_sampler(study: Study) -> Any:
    """A sampler that builds a fresh Optuna sampler for every candidate, seeded by :func:`candidate_seed`: its
    proposals depend on the seed, the candidate's number and the stored history only — not on how many
    processes the study ran in (a resumed study proposes what an uninterrupted one would)."""
    optuna = _optuna()
    cfg = study.sampler
    constraints = _constraints_func if study.constraints and not _HAS_SET_CONSTRAINT(optuna) else None

    def build(seed: int) -> Any:
        s = optuna.samplers
        if cfg["type"] == "tpe":
            return s.TPESampler(seed=seed, n_startup_trials=cfg["startup"], multivariate=True,
                                constraints_func=constraints)
        if cfg["type"] == "cmaes":
            return s.CmaEsSampler(seed=seed, n_startup_trials=cfg["startup"], warn_independent_sampling=False)
        if cfg["type"] == "nsga2":
            return s.NSGAIISampler(seed=seed, population_size=cfg["population"], constraints_func=constraints)
        return s.RandomSampler(seed=seed)

    class PerCandidateSampler(optuna.samplers.BaseSampler):
        """Relative sampling by a sampler seeded for the candidate's number; independent sampling by one seeded
        for (number, parameter name): a parameter's value does not depend on which of the candidate's other
        parameters were already stored (a driver killed half-way through a proposal resumes it unchanged)."""

        def __init__(self) -> None:
            self._cache: dict[tuple[int, str], Any] = {}

        def _for(self, number: int, name: str = "") -> Any:
            key = (number, name)
            if key not in self._cache:
                if len(self._cache) > 64:
                    self._cache.clear()
                salt = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little") if name else 0
                self._cache[key] = build(candidate_seed(cfg["seed"], number, salt))
            return self._cache[key]

        def infer_relative_search_space(self, st: Any, trial: Any) -> Any:
            return self._for(trial.number).infer_relative_search_space(st, trial)

        def sample_relative(self, st: Any, trial: Any, space: Any) -> Any:
            return self._for(trial.number).sample_relative(st, trial, space)

        def sample_independent(self, st: Any, trial: Any, name: str, dist: Any) -> Any:
            return self._for(trial.number, name).sample_independent(st, trial, name, dist)

        def before_trial(self, st: Any, trial: Any) -> None:
            self._for(trial.number).before_trial(st, trial)

        def after_trial(self, st: Any, trial: Any, state: Any, values: Any) -> None:
            self._for(trial.number).after_trial(st, trial, state, values)

        def reseed_rng(self) -> None:  # the seeds are the candidates': nothing to reseed
            pass

    return PerCandidateSampler()


def _constraints_func(trial: Any) -> list[float]:
    return list(trial.user_attrs.get("constraints", [1.0]))


class PruningExecutor:
    """An executor that stops handing out a candidate's trials once ``keep_going(results so far)`` is False
    (the trials in flight are dropped; the campaign records what finished)."""

    def __init__(self, inner: Any, keep_going: Callable[[list[Any]], bool]):
        self.inner, self.keep_going = inner, keep_going
        self.name, self.workers = inner.name, inner.workers
        self.stopped = False

    @property
    def restarts(self) -> int:
        return getattr(self.inner, "restarts", 0)

    def run(self, tasks: Iterable[Any], *args: Any) -> Iterator[Any]:
        seen: list[Any] = []
        gen = self.inner.run(tasks, *args)
        try:
            for res in gen:
                yield res
                seen.append(res)
                if not self.keep_going(seen):
                    self.stopped = True
                    return
        finally:
            gen.close()

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------------------ the driver
@dataclass
class Candidate:
    """One evaluated candidate: its number, parameters, state (COMPLETE, PRUNED), values and statistics."""

    number: int
    params: dict[str, Any]
    state: str
    values: list[float] | None
    constraints: list[float]
    feasible: bool
    stats: dict[str, Any]
    folder: str
    wall_s: float


@dataclass
class StudyReport:
    """What :func:`run_study` did: the folder, every candidate (in number order), the shipped baseline's stats,
    the best candidate (None when none is feasible and complete), the timing."""

    out_dir: Path
    candidates: list[Candidate]
    shipped: dict[str, Any] | None
    best: Candidate | None
    evaluated: int
    resumed: list[int]
    timing: dict[str, Any]
    #: the held-out campaign's stats of the shipped and the best values (``shipped``, ``tuned``), or None
    holdout: dict[str, Any] | None = None
    #: the same on the ``envelope`` campaign, or None
    envelope: dict[str, Any] | None = None
    #: with ``confirm`` > 1: the candidate chosen on the envelope when it is not :attr:`best`, else None
    confirmed: Candidate | None = None

    @property
    def tuned(self) -> Candidate | None:
        """The tuned values: the candidate chosen on the envelope (``confirm``), else the best."""
        return self.confirmed or self.best


def campaign_stats(rows: list[dict[str, Any]], campaign: Campaign) -> dict[str, Any]:
    """The numbers a comparison quotes: trials, passed, success rate with its Wilson 95% interval, median / p95 /
    max peak truth contact force, median time to seat, and the campaign's key metrics' quantiles."""
    k, n = success_counts(rows)
    ci = wilson_interval(k, n)
    out = {"trials": n, "passed": k, "success_rate": k / n if n else None, "wilson95": list(ci) if ci else None,
           "planned": campaign.n_trials}
    for m in dict.fromkeys(("contact.peak_force_truth", "docking.time_to_seat", *campaign.metrics)):
        out[m] = quantiles([r["metrics"].get(m) for r in rows])
    return out


def _stats_of(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    stats = campaign_stats(rows, study.campaign)
    for t in (*study.objectives, *study.constraints):
        stats[t.label] = stat_value(t, rows)
    return stats


def evaluate(study: Study, number: int, params: dict[str, Any], out: Path, executor: Any,
             progress: TextIO | None) -> Candidate:
    """Run (or resume) candidate ``number``'s campaign in ``<out>/candidates/c<number>`` and score it: pruned
    (when the study prunes) once a constraint can no longer hold."""
    from dockbench.sim.campaign.runner import mixed_paths_warning, run_campaign

    name = f"c{number:04d}"
    camp = candidate_campaign(study, params, name)
    n = camp.n_trials

    def keep_going(results: list[Any]) -> bool:
        # the trials run in this session (a resumed candidate's earlier trials are judged with the rest at the end)
        rows = [{"verdict": r.verdict, "metrics": r.metrics or {}} for r in results]
        return can_still_hold(study, rows, n)

    ex = PruningExecutor(executor, keep_going) if study.prune and study.constraints else executor
    folder = out / "candidates"
    t0 = time.perf_counter()
    report = run_campaign(camp, folder, ex, progress=None, figures=False, max_hours=None)
    wall = time.perf_counter() - t0
    if report.interrupted:
        raise KeyboardInterrupt
    rows = report.rows
    cons = constraint_values(study, rows)
    feasible = all(c <= 0 for c in cons)
    pruned = study.prune and bool(study.constraints) and not can_still_hold(study, rows, n)
    finished = len(rows) == n
    if not pruned and not finished:  # trials missing without a reason to prune: an interruption
        raise DockbenchError(f"{report.out_dir}: {len(rows)} of {n} trials finished; rerun to resume")
    values = None if pruned else objective_values(study, rows, n)
    state = "PRUNED" if pruned else "COMPLETE"
    stats = _stats_of(study, rows)
    stats["campaign_wall_s"] = report.summary["timing"]["wall_s"]
    cand = Candidate(number, dict(params), state, values, cons, feasible and not pruned, stats,
                     str(Path("candidates") / name), wall)
    if progress is not None:
        mixed = mixed_paths_warning(report.summary.get("kernels", {}))
        if mixed:
            progress.write(f"candidate {number}: {mixed}\n")
        ci = stats["wilson95"]
        pk = stats["contact.peak_force_truth"]["p95"]
        progress.write(f"candidate {number}: {state.lower()}  {stats['passed']}/{stats['trials']} passed"
                       + (f" (Wilson [{ci[0]:.2f}, {ci[1]:.2f}])" if ci else "")
                       + (f", p95 peak {pk:.2f} N" if pk is not None else "")
                       + (f", value {', '.join(f'{v:.4g}' for v in values)}" if values else "")
                       + f"  {_fmt_params(params)}  ({wall:.0f} s)\n")
        progress.flush()
    return cand


def _fmt_params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def _tell(ostudy: Any, trial: Any, cand: Candidate) -> None:
    """Record ``cand`` on its Optuna trial (constraints and statistics first: the sampler reads them) and
    finish the trial."""
    optuna = _optuna()
    trial.set_user_attr("constraints", cand.constraints)
    trial.set_user_attr("folder", cand.folder)
    trial.set_user_attr("stats", json.loads(json.dumps(cand.stats, default=str)))
    if _HAS_SET_CONSTRAINT(optuna):
        for i, c in enumerate(cand.constraints):
            trial.set_constraint(f"c{i}", c)
    if cand.state == "PRUNED":
        ostudy.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        ostudy.tell(trial, [v if math.isfinite(v) else (1e300 if v > 0 else -1e300) for v in cand.values])


def _HAS_SET_CONSTRAINT(optuna: Any) -> bool:  # noqa: N802 - a feature test
    """Optuna ≥ 5 takes a trial's constraints with Trial.set_constraint (constraints_func is deprecated)."""
    return hasattr(optuna.trial.Trial, "set_constraint")


def _from_frozen(t: Any) -> Candidate:
    stats = t.user_attrs.get("stats", {})
    cons = list(t.user_attrs.get("constraints", []))
    return Candidate(t.number, dict(t.params), t.state.name, list(t.values) if t.values else None, cons,
                     t.state.name == "COMPLETE" and all(c <= 0 for c in cons), stats,
                     t.user_attrs.get("folder", ""), float(stats.get("campaign_wall_s") or 0.0))


def best_candidate(study: Study, cands: list[Candidate]) -> Candidate | None:
    """The best feasible complete candidate (single objective: the lowest/highest value, the lowest number on
    a tie; pareto: the first of the Pareto front in the order of its first objective), or None."""
    ok = [c for c in cands if c.feasible and c.values]
    if not ok:
        return None
    return min(pareto_front(study, ok), key=_rank_key(study))


def _signs(study: Study) -> list[float]:
    """+1 for a minimised value, −1 for a maximised one: a signed value is better when lower."""
    return [1.0 if d == "minimize" else -1.0 for d in study.directions]


def _rank_key(study: Study) -> Callable[[Candidate], tuple[Any, ...]]:
    """The order of candidates by value: the signed values, then the lower number on a tie."""
    sign = _signs(study)
    return lambda c: (tuple(s * v for s, v in zip(sign, c.values, strict=True)), c.number)


def pareto_front(study: Study, cands: list[Candidate]) -> list[Candidate]:
    """The candidates no other candidate dominates (every value as good, one better), in the study's directions."""
    sign = np.array([1.0 if d == "minimize" else -1.0 for d in study.directions])
    vals = [sign * np.array(c.values) for c in cands]
    front = []
    for i, a in enumerate(vals):
        if not any(np.all(b <= a) and np.any(b < a) for j, b in enumerate(vals) if j != i):
            front.append(cands[i])
    return front


def top_candidates(study: Study, cands: list[Candidate], n: int) -> list[Candidate]:
    """The ``n`` best feasible complete candidates of a single-valued study, best first (the first is
    :func:`best_candidate`'s: a single value's Pareto front is its minima, ordered the same way)."""
    return sorted((c for c in cands if c.feasible and c.values), key=_rank_key(study))[:n]


def run_after(study: Study, camp: Campaign, kind: str, best: Candidate | list[Candidate] | None, out: Path,
              executor: Any) -> dict[str, Any]:
    """Run the shipped values and the best candidate's on ``camp`` (the study's ``holdout`` or ``envelope``
    campaign) in ``<out>/<kind>/shipped`` and ``<out>/<kind>/best_cNNNN``: their stats, keyed ``shipped`` and
    ``tuned``, each with its folder. Resumable as any campaign (finished trials are kept).

    With a list of candidates (the ``confirm`` best, best first) each runs on ``camp``; ``tuned`` is the one
    whose trials there meet the study's constraints with the best objective value on them (the screen's order
    on a tie), ``chosen`` its number and ``confirmed`` every candidate's stats by number; with none feasible
    there, the first (``feasible``: False)."""
    from dockbench.sim.campaign.runner import run_campaign

    cands = best if isinstance(best, list) else ([best] if best is not None else [])
    runs = [("shipped", None, dataclasses.replace(camp, name="shipped"))]
    for c in cands:
        runs.append(("tuned", c, candidate_campaign(dataclasses.replace(study, campaign=camp), c.params,
                                                    f"best_c{c.number:04d}")))
    stats: dict[str, Any] = {}
    confirmed: dict[str, Any] = {}
    ranked = []
    for key, cand, c in runs:
        rep = run_campaign(c, out / kind, executor, progress=None, figures=False, max_hours=None)
        if rep.interrupted:
            raise KeyboardInterrupt
        st = _stats_of(study, rep.rows)
        st["folder"] = str(Path(kind) / c.name)
        if cand is None:
            stats[key] = st
            continue
        feasible = all(v <= 0 for v in constraint_values(study, rep.rows))
        value = objective_values(study, rep.rows, camp.n_trials)[0]
        st.update(number=cand.number, feasible=feasible, value=value)
        confirmed[str(cand.number)] = st
        ranked.append((not feasible, _signs(study)[0] * value, len(ranked), st))
    if ranked:
        pick = min(ranked, key=lambda r: r[:3])[3] if any(not r[0] for r in ranked) else ranked[0][3]
        stats["tuned"] = pick
        if isinstance(best, list):
            stats["chosen"] = pick["number"]
            stats["confirmed"] = confirmed
    return stats


def run_study(study: Study, out_root: str | Path = "studies", executor: Any = None, *, candidates: int | None = None,
              shipped: bool = True, fresh: bool = False, progress: TextIO | None = sys.stderr,
              stop_after: int | None = None, holdout: bool = True, envelope: bool = True) -> StudyReport:
    """Run (or resume) ``study`` into ``<out_root>/<study.name>/`` until it holds ``candidates`` (default: the
    study's) finished candidates.

    Args:
        executor: where the candidates' trials run (sim.campaign.executors.make_executor; default the local
            pool); the candidates themselves run one after the other.
        shipped: also run the campaign with the scenarios' own values (``shipped/``), the baseline.
        fresh: delete the study folder first.
        stop_after: evaluate at most this many candidates in this call (tests: a study stopped part way).
        holdout: run the shipped and the best values on the study's held-out campaign (if it has one) at the end.
        envelope: the same on the study's ``envelope`` campaign (if it has one), before the held-out one.

    Raises:
        DockbenchError: the folder holds another study (other search space, objectives or campaign), is in use
            by another driver, or a campaign failed.
    """
    import shutil

    from dockbench.sim.campaign.executors import make_executor
    from dockbench.sim.campaign.runner import CampaignLock, run_campaign

    optuna = _optuna()
    n_wanted = candidates or study.candidates
    out_root = Path(out_root)
    out = out_root / study.name
    if fresh and out.is_dir():
        shutil.rmtree(out)
    if out_root.exists() and not out_root.is_dir():
        raise DockbenchError(f"--out {out_root}: a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DockbenchError(f"--out {out_root}: cannot create the study folder {out}: {exc.strerror or exc}") from None
    lock = CampaignLock(out)
    lock.acquire()
    own = executor is None
    t_start = time.perf_counter()
    try:
        shutil.copyfile(study.file, out / "study.yaml")
        storage = optuna.storages.RDBStorage(f"sqlite:///{(out / DB_FILE).resolve()}",
                                             engine_kwargs={"connect_args": {"timeout": 60}})
        finger = study.fingerprint()
        names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
        if names and study.name not in names:
            raise DockbenchError(f"{out}: {DB_FILE} holds study {sorted(names)}, not {study.name!r}")
        ostudy = optuna.create_study(study_name=study.name, storage=storage, sampler=make_sampler(study),
                                     directions=study.directions, load_if_exists=True)
        stored = ostudy.user_attrs.get("fingerprint")
        if stored is None:
            # a new study: its start candidates are the first ones asked (before the fingerprint is stored no
            # candidate was asked, so the trials already there are start candidates a killed driver enqueued)
            for params in study.start[len(ostudy.get_trials(deepcopy=False)):]:
                ostudy.enqueue_trial(params, skip_if_exists=False)
            ostudy.set_user_attr("fingerprint", finger)
            ostudy.set_user_attr("file", str(study.file))
        elif stored != finger:
            raise DockbenchError(
                f"{out}: the stored study was made from another version of {study.file} (search space, objectives, "
                "constraints, sampler or campaign changed); rerun with --fresh or another --out")
        if executor is None:
            executor = make_executor("local")
        base = None
        if shipped:
            t0 = time.perf_counter()
            rep = run_campaign(dataclasses.replace(study.campaign, name="shipped"), out, executor, progress=None,
                               figures=False, max_hours=None)
            if rep.interrupted:
                raise KeyboardInterrupt
            base = _stats_of(study, rep.rows)
            base["campaign_wall_s"] = rep.summary["timing"]["wall_s"]
            base["wall_s"] = time.perf_counter() - t0
            if progress is not None:
                ci = base["wilson95"]
                pk = base["contact.peak_force_truth"]["p95"]
                progress.write(f"shipped: {base['passed']}/{base['trials']} passed (Wilson [{ci[0]:.2f}, "
                               f"{ci[1]:.2f}])" + (f", p95 peak {pk:.2f} N" if pk is not None else "") + "\n")
        TS = optuna.trial.TrialState
        resumed = []
        evaluated = 0
        walls: list[float] = []

        def budget_left() -> bool:
            return stop_after is None or evaluated < stop_after

        # candidates a killed driver left RUNNING: evaluated again with their stored parameters (their campaign
        # folders keep what finished), in number order
        # (a driver killed while proposing left some parameters unset: the sampler completes them as it would
        # have, since each parameter's proposal depends on the seed, the number and the history only)
        for t in ostudy.get_trials(deepcopy=False, states=(TS.RUNNING,)):
            if not budget_left():
                break
            trial = optuna.trial.Trial(ostudy, t._trial_id)
            params = {p.key: suggest(trial, p) for p in study.search}
            cand = evaluate(study, t.number, params, out, executor, progress)
            _tell(ostudy, trial, cand)
            resumed.append(t.number)
            evaluated += 1
            walls.append(cand.wall_s)
        while budget_left():
            done = len(ostudy.get_trials(deepcopy=False, states=(TS.COMPLETE, TS.PRUNED, TS.FAIL)))
            if done >= n_wanted:
                break
            trial = ostudy.ask()
            params = {p.key: suggest(trial, p) for p in study.search}
            cand = evaluate(study, trial.number, params, out, executor, progress)
            _tell(ostudy, trial, cand)
            evaluated += 1
            walls.append(cand.wall_s)
        cands = [_from_frozen(t) for t in ostudy.get_trials(deepcopy=False)
                 if t.state in (TS.COMPLETE, TS.PRUNED)]
        best = best_candidate(study, cands)
        after: dict[str, dict[str, Any] | None] = {"envelope": None, "holdout": None}
        hold_s = 0.0
        tuned = best  # with confirm > 1: the best of the confirmed candidates on the envelope
        for kind, camp_after in (("envelope", study.envelope if envelope else None),
                                 ("holdout", study.holdout if holdout else None)):
            if camp_after is None or len(cands) < n_wanted:
                continue
            t0 = time.perf_counter()
            confirming = kind == "envelope" and study.confirm > 1
            which = top_candidates(study, cands, study.confirm) if confirming else tuned
            after[kind] = held = run_after(study, camp_after, kind, which, out, executor)
            if confirming and "chosen" in held:
                tuned = next(c for c in cands if c.number == held["chosen"])
            hold_s += time.perf_counter() - t0
            if progress is not None:
                progress.write(("held out: " if kind == "holdout" else "envelope: ") + "; ".join(
                    f"{k} {v['passed']}/{v['trials']} passed, p95 peak {v['contact.peak_force_truth']['p95']}"
                    for k, v in held.items() if k in ("shipped", "tuned")) + "\n")
        wall = time.perf_counter() - t_start
        camp_wall = sum(walls) + (base["wall_s"] if base else 0.0) + hold_s
        timing = {"wall_s": wall, "campaigns_wall_s": camp_wall, "evaluated": evaluated,
                  "study_overhead_s": wall - camp_wall,
                  "study_overhead_share": (wall - camp_wall) / camp_wall if camp_wall > 0 else None,
                  "candidates_per_hour": evaluated / wall * 3600.0 if evaluated and wall > 0 else None,
                  "workers": getattr(executor, "workers", None), "executor": getattr(executor, "name", None)}
        report = StudyReport(out, cands, base, best, evaluated, resumed, timing, after["holdout"], after["envelope"],
                             tuned if tuned is not best else None)
        write_records(study, report)
        return report
    finally:
        if own and executor is not None:
            executor.close()
        lock.release()


def candidates_csv(study: Study, cands: list[Candidate]) -> str:
    """candidates.csv: number, state, feasible, the parameters, the objective values, the statistics."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    keys = [p.key for p in study.search]
    n_val = len(study.directions)
    stat_cols = ["trials", "passed", "success_rate", "wilson_low", "wilson_high", "peak_median", "peak_p95",
                 "peak_max", "time_to_seat_median"]
    w.writerow(["number", "state", "feasible", *keys, *[f"value{i}" for i in range(n_val)], *stat_cols, "folder"])
    for c in cands:
        s = c.stats
        ci = s.get("wilson95") or [None, None]
        pk = s.get("contact.peak_force_truth") or {}
        ts = s.get("docking.time_to_seat") or {}
        vals = (c.values or [None] * n_val)
        row = [c.number, c.state, c.feasible, *[c.params.get(k) for k in keys], *vals, s.get("trials"),
               s.get("passed"), s.get("success_rate"), ci[0], ci[1], pk.get("median"), pk.get("p95"), pk.get("max"),
               ts.get("median"), c.folder]
        w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buf.getvalue()


def write_records(study: Study, report: StudyReport) -> None:
    """study.json and candidates.csv (rewritten from the database after every session)."""
    from dockbench.telemetry.log import atomic_write_text
    from dockbench.telemetry.run import write_json

    out = report.out_dir
    atomic_write_text(out / "candidates.csv", candidates_csv(study, report.candidates))
    write_json(out / "study.json", {
        "study": study.name, "label": study.label, "file": str(study.file), "description": study.description,
        "directions": study.directions, "mode": study.mode,
        "objectives": [dataclasses.asdict(t) for t in study.objectives],
        "constraints": [dataclasses.asdict(t) for t in study.constraints],
        "search": [dataclasses.asdict(p) for p in study.search], "sampler": study.sampler,
        "campaign_trials": study.campaign.n_trials,
        "candidates": [dataclasses.asdict(c) for c in report.candidates],
        "shipped": report.shipped,
        "best": dataclasses.asdict(report.best) if report.best else None,
        "resumed": report.resumed, "timing": report.timing, "holdout": report.holdout, "envelope": report.envelope,
        "tuned": report.tuned.number if report.tuned else None,
    })
