"""A policy evaluated over a campaign: every trial of a campaign file run as one episode of the Gymnasium
environment under the policy, recorded as the campaign tool records a trial (docs/gym.md, "Evaluating a
policy over a campaign").

::

    from dockbench.gym_campaign import evaluate_policy

    report = evaluate_policy("scenarios/campaigns/iiwa14_monte_carlo.yaml", "zero", "gym_campaigns", jobs=2)
    report = evaluate_policy(camp, "docs/examples/gym_spiral_baseline.py:SpiralPolicy", "gym_campaigns",
                             allow_plugins=True)
    report = evaluate_policy(camp, my_policy, "gym_campaigns")          # a callable policy(obs) -> action
    report = evaluate_policy(camp, make_policy=lambda env: PPO.load("m.zip"), out_root="gym_campaigns")

The trials are the campaign runner's own (sim/campaign/spec.py: the same trial ids, scenario mappings and
``sim.seed``), and the driver is the campaign runner's (sim/campaign/runner.py :func:`run_campaign` with a
:class:`TrialWorker`): the same folder (``trials/<cell>/s…r…/`` with summary.json, meta.json, telemetry by
the campaign's policy, trial.json), the same results.csv and summary.json, the same executors (inline, a
local process pool, Ray), the same lock and resume. Only the trial differs: instead of ``dockbench.run`` of
the trial's scenario, an episode of :class:`dockbench.gym.DockingEnv` on that scenario (no draws of its
own: the trial's ``sim.seed``; no reward termination: the episode runs the scenario's whole length, the
steps ``dockbench.run`` runs, the last policy period cut short when the run length is not a whole number of
them), scored as a run. With the zero policy in ``impedance`` mode the table is the campaign's, bit for bit
but the timing columns (tests/test_gym_campaign.py).

A *policy* is

* ``"zero"``: the zero action (in ``impedance`` mode the scenario's law alone);
* ``"MODULE:NAME"`` or ``"FILE.py:NAME"``: NAME is imported (Python code: only with ``allow_plugins=True``,
  ``--allow-plugins`` or ``DOCKBENCH_ALLOW_PLUGINS=1``, as the scenario plugins) and called with each trial's
  environment (the unwrapped :class:`~dockbench.gym.DockingEnv`, reset for the trial) to make that trial's
  policy, e.g. ``docs/examples/gym_spiral_baseline.py:SpiralPolicy``;
* a Python object (``policy=``): a callable ``policy(obs) -> action`` or an object with
  ``.predict(obs, deterministic=True)`` returning the action or ``(action, state)`` (stable-baselines3's
  API); or ``make_policy=``, a callable ``make_policy(env) -> policy``. With a process pool or Ray these
  are pickled into each trial's task (define them at module level).

A policy with a ``reset()`` method has it called before each episode. Resume: a finished trial is kept when
its scenario and the policy's *spec* (the string, the action mode, the rate and the environment's options)
are the same; a policy given as a Python object is not resumable (every trial runs again). Changing a
policy's code under the same spec is not seen: pass ``fresh=True`` (``--fresh``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from dockbench.gym import ACTION_MODES, DockingEnv, RewardConfig
from dockbench.sim.campaign.runner import DEFAULT_MAX_HOURS, CampaignReport, TrialWorker, run_campaign
from dockbench.sim.campaign.spec import Campaign, load_campaign
from dockbench.sim.campaign.trial import TrialResult, TrialTask, _worker_name, trial_record
from dockbench.sim.errors import DockbenchError

#: the episode's reward configuration: nothing ends it but the cycle itself (divergence) and its length
FULL_LENGTH = RewardConfig(seat_hold=None, force_limit=math.inf, jam=False)
#: DockingEnv keywords the trial sets itself (the scenario, its draws and its length are the campaign's)
TRIAL_KEYS = ("scenario", "randomize", "max_time", "action_mode", "policy_rate", "record")
#: the file the evaluation writes beside results.csv: which policy made the table
POLICY_FILE = "policy.json"

_FORMS = ("zero (the zero action: in impedance mode the scenario's law alone), MODULE:NAME (e.g. "
          "my_pkg.policies:make_policy) or FILE.py:NAME (e.g. docs/examples/gym_spiral_baseline.py:SpiralPolicy), "
          "where NAME is called with the trial's environment and returns the policy: a callable "
          "policy(obs) -> action or an object with .predict(obs, deterministic=True)")
_SPEC = re.compile(r"^(?P<where>[^:]+):(?P<name>[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# ------------------------------------------------------------------------------------------ the policy
def parse_policy(spec: str, key: str = "--policy") -> tuple[str, str, str]:
    """``(kind, where, name)`` of a policy spec: ``("zero", "", "")``, ``("module", MODULE, NAME)`` or
    ``("file", FILE.py, NAME)``.

    Raises:
        DockbenchError: naming ``key`` and the allowed forms.
    """
    text = spec.strip() if isinstance(spec, str) else spec
    if text == "zero":
        return "zero", "", ""
    m = _SPEC.match(text) if isinstance(text, str) else None
    if m is not None:
        where, name = m.group("where"), m.group("name")
        if where.endswith(".py"):
            return "file", where, name
        if _MODULE.match(where):
            return "module", where, name
    raise DockbenchError(f"{key} {spec!r}: not a policy; give {_FORMS}")


def import_policy(spec: str, allow: bool | None = None, key: str = "--policy") -> Any:
    """The object a ``MODULE:NAME`` / ``FILE.py:NAME`` spec names (the factory), imported with the plugins'
    opt-in (:func:`sim.plugins.plugins_allowed`); None for ``zero``. A module name is looked up on the Python
    path with the working directory first (``docs.examples.gym_spiral_baseline``); a relative file from the
    working directory.

    Raises:
        DockbenchError: a bad spec, no opt-in, a missing module, file or name, or the import raised.
    """
    from dockbench.sim.plugins import _import_file, import_module_from, plugins_allowed

    kind, where, name = parse_policy(spec, key)
    if kind == "zero":
        return None
    if not plugins_allowed(allow):
        raise DockbenchError(
            f"{key} {spec}: a policy named by MODULE:NAME or FILE.py:NAME is Python code and is imported only with "
            "an opt-in: pass --allow-plugins (command line), set DOCKBENCH_ALLOW_PLUGINS=1, or call "
            "evaluate_policy(..., allow_plugins=True)")
    try:
        if kind == "file":
            path = Path(where).expanduser().resolve()
            if not path.is_file():
                raise DockbenchError(f"{key} {spec}: no such file {path}")
            module = _import_file(path)
        else:
            module = import_module_from(where, Path.cwd())
    except DockbenchError:
        raise
    except ModuleNotFoundError as exc:
        raise DockbenchError(f"{key} {spec}: no module named {exc.name!r} (on the Python path or in the working "
                             f"directory {Path.cwd()}); give {_FORMS}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the policy's own code raised on import
        raise DockbenchError(f"{key} {spec}: importing {where} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise DockbenchError(f"{key} {spec}: {where} has no {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise DockbenchError(f"{key} {spec}: {name} is a {type(obj).__name__}, not callable; give {_FORMS}")
    return obj


class ZeroPolicy:
    """The zero action of ``env`` (``impedance``: no offset, the law's own gains; ``setpoint``: half of
    ``force_max``; ``torque``: no torque)."""

    def __init__(self, env: DockingEnv):
        self.action = np.zeros(env.action_space.shape)

    def __call__(self, obs: Any) -> np.ndarray:
        return self.action


def as_action_fn(policy: Any) -> Any:
    """``obs → action`` of a policy: its ``predict(obs, deterministic=True)`` (the first element when it
    returns ``(action, state)``, as stable-baselines3 does), else the policy itself when callable.

    Raises:
        DockbenchError: neither.
    """
    predict = getattr(policy, "predict", None)
    if callable(predict):
        def act(obs: Any) -> Any:
            out = predict(obs, deterministic=True)
            return out[0] if isinstance(out, tuple) else out

        return act
    if callable(policy):
        return policy
    raise DockbenchError(f"the policy is a {type(policy).__name__}: neither callable (policy(obs) -> action) nor "
                         "an object with .predict(obs, deterministic=True)")


# ------------------------------------------------------------------------------------------ one trial
class TrialEnv(DockingEnv):
    """:class:`DockingEnv` on one trial's scenario as the campaign gives it: no draws (the episode's
    ``sim.seed`` is the trial's), the model from the worker's assembly cache, and the length of the
    scenario's run — ``steps_for(duration, control period)`` control steps, t = 0 … duration, as
    ``dockbench.run`` runs it (the last policy period is cut short when that is not a whole number of them).

    It works through DockingEnv's internals (``_draw``, ``_build``, ``_max_time``, ``n_steps`` after ``reset``):
    tests/test_gym_campaign.py (the zero policy is the campaign's run, bit for bit) fails when they change."""

    def __init__(self, scenario: Any, cache: Any = None, **kwargs: Any):
        kwargs.setdefault("reward", FULL_LENGTH)
        super().__init__(scenario, randomize={}, max_time=None, **kwargs)
        self._cache = cache
        self.run_steps = 0
        self._build = self._build_trial

    def _draw(self) -> dict[str, Any]:
        return {"sim.seed": self.base_scenario.sim.seed}

    def _build_trial(self, scenario: Any) -> Any:
        from dockbench.sim.loop import build, steps_for

        setup = build(scenario, assembly=self._cache.get(scenario) if self._cache is not None else None)
        T_c = scenario.sim.control_period
        self.run_steps = steps_for(setup.duration, T_c)
        self._max_time = self.run_steps * T_c  # the cycle is made for at least the run's steps
        return setup

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        out = super().reset(seed=seed, options=options)
        if self.n_steps < self.run_steps:  # pragma: no cover - DockingEnv sizes its cycle from max_time
            raise RuntimeError(f"the episode's cycle has {self.n_steps} steps, the run {self.run_steps}")
        self.n_steps = self.run_steps
        return out

    def result(self) -> Any:
        """The episode as a scored run (:class:`~sim.loop.RunResult`, no folder written: ``save_run(None)``; the
        campaign writes the trial's folder), also when it diverged (scored up to the failing step). Ends the
        episode."""
        from dockbench.sim.errors import InternalError, SimulationDiverged

        try:
            return self.save_run(None)
        except (SimulationDiverged, InternalError) as exc:  # recorded and scored up to the failing step
            if exc.result is None:
                raise
            return exc.result


@dataclass
class PolicyTask(TrialTask):
    """A campaign trial's task with the policy (picklable: a spec string, or a picklable object).

    Attributes:
        policy: ``"zero"``, ``"MODULE:NAME"`` / ``"FILE.py:NAME"`` (a factory ``NAME(env)``) or a policy object.
        factory: ``policy`` is a Python factory ``policy(env) -> policy``.
        action_mode, policy_rate, env_kwargs: the environment's (:class:`DockingEnv`).
        allow: the plugins' opt-in for a spec's import in the worker.
    """

    policy: Any = "zero"
    factory: bool = False
    action_mode: str = "impedance"
    policy_rate: float | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    allow: bool | None = None


_CACHE: Any = None  # the worker's AssemblyCache (as sim.campaign.trial's)
_FACTORIES: dict[str, Any] = {}  # spec → imported factory (a worker imports a policy's module once)


def _policy_for(task: PolicyTask, env: DockingEnv) -> Any:
    if isinstance(task.policy, str):
        if task.policy not in _FACTORIES:
            _FACTORIES[task.policy] = import_policy(task.policy, task.allow)
        make = _FACTORIES[task.policy]
        policy = ZeroPolicy(env) if make is None else make(env)
    else:
        policy = task.policy(env) if task.factory else task.policy
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset()
    return policy


def run_policy_trial(task: PolicyTask) -> TrialResult:
    """One trial as an episode of the policy (never raises for a trial's own failure: it is recorded, as
    :func:`sim.campaign.trial.run_trial` records one). Timing: ``loop_s`` is the time in the control cycle,
    ``policy_s`` (trial.json) the time in the policy's calls."""
    global _CACHE
    t0 = time.perf_counter()
    from dockbench.sim.errors import ScenarioError
    from dockbench.sim.model_cache import AssemblyCache
    from dockbench.sim.scenario import scenario_from_dict

    if _CACHE is None:
        _CACHE = AssemblyCache()
    worker = _worker_name()

    def failed(status: str, message: str, error: str = "") -> TrialResult:
        return TrialResult(task.trial_id, status, "FAIL", message, worker=worker, error=error,
                           timing={"trial_s": time.perf_counter() - t0})

    try:
        scenario = scenario_from_dict(task.scenario, file=task.file)
        hits = _CACHE.hits
        env = TrialEnv(scenario, _CACHE, action_mode=task.action_mode, policy_rate=task.policy_rate,
                       **task.env_kwargs)
        obs, _ = env.reset()
        cache_hit = _CACHE.hits > hits
    except ScenarioError as exc:
        return failed("invalid", str(exc))
    except (DockbenchError, ValueError) as exc:  # an unreachable start, an action mode the law cannot take
        return failed("invalid", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - recorded, the campaign goes on
        return failed("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    try:
        act = as_action_fn(_policy_for(task, env))
    except Exception as exc:  # noqa: BLE001 - the policy could not be made: every trial says why
        return failed("error", f"the policy could not be made: {type(exc).__name__}: {exc}", traceback.format_exc())
    t1 = time.perf_counter()
    policy_s = 0.0
    try:
        clock = time.perf_counter
        while not env.done:
            c = clock()
            action = act(obs)
            policy_s += clock() - c
            obs, _, _, _, _ = env.step(action)
        result = env.result()
        out = trial_record(task, scenario, result, worker, cache_hit, t0, t1)
        out.timing["policy_s"] = policy_s
        return out
    except Exception as exc:  # noqa: BLE001 - a policy or a loop that raised: recorded, the campaign goes on
        return failed("error", f"{type(exc).__name__}: {exc} (at t = {env.i * env.scenario.sim.control_period:.3f} s)",
                      traceback.format_exc())


# ------------------------------------------------------------------------------------------ the campaign
def evaluate_policy(
    campaign: Campaign | str | Path,
    policy: Any = None,
    out_root: str | Path = "gym_campaigns",
    *,
    make_policy: Any = None,
    executor: Any = None,
    jobs: int | None = None,
    action_mode: str = "impedance",
    policy_rate: float | None = None,
    env_kwargs: dict[str, Any] | None = None,
    allow_plugins: bool | None = None,
    progress: TextIO | None = sys.stderr,
    figures: bool = True,
    fresh: bool = False,
    max_hours: float | None = DEFAULT_MAX_HOURS,
    check_disk: bool = True,
) -> CampaignReport:
    """Evaluate ``policy`` over every trial of ``campaign`` into ``<out_root>/<campaign name>/`` (module
    docstring), in the campaign runner's format, and write :data:`POLICY_FILE` there.

    Args:
        campaign: a campaign file or a :class:`Campaign` (``load_campaign``).
        policy: ``"zero"``, ``"MODULE:NAME"``, ``"FILE.py:NAME"`` or a policy object (module docstring).
        out_root: parent of the campaign's folder.
        make_policy: instead of ``policy``: ``make_policy(env) -> policy``, called for each trial.
        executor: from :func:`sim.campaign.executors.make_executor` (not closed here); default: a local pool of
            ``jobs`` workers (``jobs=1``: this process), closed at the end.
        action_mode, policy_rate: the environment's (:class:`DockingEnv`; default ``impedance`` at 50 Hz).
        env_kwargs: further :class:`DockingEnv` keywords (``reward``, ``offset_limit``, ``gain_ratio``,
            ``force_max``, ``overrides``, ``kernel_check``); default reward: :data:`FULL_LENGTH`.
        allow_plugins: the opt-in for a ``MODULE:NAME`` / ``FILE.py:NAME`` policy (None: the environment's
            ``DOCKBENCH_ALLOW_PLUGINS``).
        progress, figures, fresh, max_hours, check_disk: as :func:`run_campaign`.

    Raises:
        DockbenchError: a bad policy or option (naming it and the allowed forms), and whatever
            :func:`run_campaign` raises.
    """
    camp = campaign if isinstance(campaign, Campaign) else load_campaign(campaign)
    if (policy is None) == (make_policy is None):
        raise DockbenchError("evaluate_policy: give a policy (zero, MODULE:NAME, FILE.py:NAME or an object) or "
                             "make_policy(env), not both or neither")
    if action_mode not in ACTION_MODES:
        raise DockbenchError(f"--action-mode {action_mode!r}: allowed: {', '.join(ACTION_MODES)}")
    if policy_rate is not None and not (isinstance(policy_rate, (int, float)) and policy_rate > 0
                                        and math.isfinite(policy_rate)):
        raise DockbenchError(f"--policy-rate {policy_rate!r}: a rate > 0 [Hz]")
    env_kwargs = dict(env_kwargs or {})
    clash = sorted(set(env_kwargs) & set(TRIAL_KEYS))
    if clash:
        raise DockbenchError(f"env_kwargs {clash}: set by the trial (its scenario, seed and length) or by "
                             "evaluate_policy's own arguments (action_mode, policy_rate)")
    allow = allow_plugins
    if isinstance(policy, str):
        import_policy(policy, allow)  # in the driver first: a bad spec or a missing opt-in is one line, now
        if allow is None:
            from dockbench.sim.plugins import plugins_allowed

            allow = plugins_allowed()
        described: Any = policy.strip()
        key = json.dumps({"policy": described, "action_mode": action_mode, "policy_rate": policy_rate,
                          "env": env_kwargs}, sort_keys=True, default=repr)
    else:
        obj = policy if policy is not None else make_policy
        if policy is not None:
            as_action_fn(policy)  # neither callable nor .predict: say so before any trial
        elif not callable(make_policy):
            raise DockbenchError(f"make_policy is a {type(make_policy).__name__}, not callable (env -> policy)")
        module = getattr(obj, "__module__", None) or type(obj).__module__  # a function's, a class's or an instance's
        qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        described = f"{'make_policy ' if make_policy is not None else ''}{module}.{qualname}"
        key = f"object:{uuid.uuid4().hex}"  # not resumable: nothing says the object is the same
    spec = policy.strip() if isinstance(policy, str) else (policy if policy is not None else make_policy)

    def task(t: TrialTask) -> PolicyTask:
        return PolicyTask(**dataclasses.asdict(t), policy=spec, factory=make_policy is not None,
                          action_mode=action_mode, policy_rate=policy_rate, env_kwargs=env_kwargs, allow=allow)

    own = executor is None
    if own:
        from dockbench.sim.campaign.executors import make_executor

        executor = make_executor("local", jobs)
    if not isinstance(spec, str) and getattr(executor, "name", "") != "inline":
        import pickle

        try:
            pickle.dumps(spec)
        except Exception as exc:  # noqa: BLE001 - pickle raises several types
            if own:
                executor.close()
            raise DockbenchError(
                f"the policy {described} cannot be sent to worker processes ({type(exc).__name__}: {exc}); define "
                "it at module level, give it as MODULE:NAME, or run in this process (jobs=1)") from None
    started = time.perf_counter()
    try:
        report = run_campaign(camp, out_root, executor, progress=progress, figures=figures, fresh=fresh,
                              started=started, max_hours=max_hours, check_disk=check_disk,
                              worker=TrialWorker(run_policy_trial, task, key))
    finally:
        if own:
            executor.close()
    from dockbench.telemetry.run import write_json

    write_json(report.out_dir / POLICY_FILE, {
        "policy": described, "action_mode": action_mode, "policy_rate": policy_rate,
        "env_kwargs": {k: repr(v) if not isinstance(v, (int, float, str, bool, type(None), list, dict)) else v
                       for k, v in env_kwargs.items()},
        "resumable": isinstance(policy, str), "campaign_file": str(camp.file),
    })
    return report


__all__ = ["FULL_LENGTH", "POLICY_FILE", "PolicyTask", "TrialEnv", "ZeroPolicy", "as_action_fn", "evaluate_policy",
           "import_policy", "parse_policy", "run_policy_trial"]
