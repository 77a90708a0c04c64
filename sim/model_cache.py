"""Compiled models reused across runs whose robot, tool, target and physics options repeat (a campaign's
trials in one worker process).

:func:`sim.assembly.assemble` compiles the MjSpec and builds the Pinocchio models from it; for a
campaign that varies only the controller, the planner, the start, the belief of the target's pose or the
uncertainty, every trial would compile the same model again. :class:`AssemblyCache` keys an
:class:`~sim.assembly.Assembly` by everything :func:`~sim.assembly.assemble` reads — ``robot.type`` and
``robot.base``, the ``sim`` block's physics options, the whole ``tool`` block and the ``target`` block
without its ``belief_offset`` — and hands out the cached one with a fresh :class:`~sim.interfaces.Target`
object (the belief is a property of that object, not of the model).

Reuse is safe because a run never writes to the MjModel or the Pinocchio models (its state lives in
MjData and Pinocchio Data, created per run; a target that culls contacts, sim/culling.py, rewrites flags in
a copy of the MjModel that ``sim.loop.build`` makes for the run): a trial on a cached assembly equals one on a
fresh assembly bit for bit (tests/test_campaign.py). End effectors with a per-step runtime (the G20 hand) are
not cached.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import Any

from dockbench.sim.assembly import Assembly, assemble, scenario_target
from dockbench.sim.interfaces import TOOLS, Tool
from dockbench.sim.scenario import Scenario

#: ``sim`` keys that do not reach the compiled model
_NOT_MODEL = ("seed", "duration", "settle_time", "control_period")


def model_key(scenario: Scenario) -> str | None:
    """The cache key of the scenario's compiled model, or None when it must not be cached."""
    tool_cls = TOOLS.get(scenario.tool.type)
    if tool_cls.make_runtime is not Tool.make_runtime:  # an active end effector (e.g. the hand)
        return None
    d = scenario.to_dict()
    target = d["target"]
    if target is not None:
        target = {k: v for k, v in target.items() if k != "belief_offset"}
    key = {
        # every robot key but the start configuration (robot.model, joints, limits, actuators, base, … all
        # shape the compiled model; q_init / q_guess are only the IK's start, applied to MjData)
        "robot": {k: v for k, v in d["robot"].items() if k not in ("q_init", "q_guess")},
        "sim": {k: v for k, v in d["sim"].items() if k not in _NOT_MODEL},
        "tool": d["tool"],
        "target": target,
    }
    return json.dumps(key, sort_keys=True)


class AssemblyCache:
    """The last ``size`` assemblies by :func:`model_key` (least recently used dropped first).

    Attributes:
        hits, misses: counts of :meth:`get` calls served from the cache / compiled.
    """

    def __init__(self, size: int = 8):
        self.size = int(size)
        self._entries: OrderedDict[str, Assembly] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, scenario: Scenario) -> Assembly:
        """An assembly of ``scenario``: the cached compiled models with this scenario's target (belief)."""
        key = model_key(scenario)
        if key is None:
            self.misses += 1
            return assemble(scenario)
        asm = self._entries.get(key)
        if asm is None:
            self.misses += 1
            asm = assemble(scenario)
            self._entries[key] = asm
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return _with_target(asm, scenario)
        self.hits += 1
        self._entries.move_to_end(key)
        return _with_target(asm, scenario)

    def stats(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries)}


def _with_target(asm: Assembly, scenario: Scenario) -> Assembly:
    """``asm`` with a new Target object built from this scenario's target block (its belief offset)."""
    if scenario.target is None:
        return dataclasses.replace(asm)
    return dataclasses.replace(asm, target=scenario_target(scenario))
