"""Robots: which model file, which joints and actuators, limits and home pose.

Two sources, one :class:`RobotSpec`:

* the catalogue (``robot: {type: iiwa14}``), read from the package resource ``assets/robots/limits.yaml``
  (the models themselves are our own MJCF in ``assets/robots/``): :func:`get_robot`;
* the user's own arm (``robot: {model: arm.xml | arm.urdf, ee_site, joints, torque_limits, ...}``;
  docs/robots.md): :func:`user_robot` checks the block against the model file at load time, and
  :func:`robot_model_spec` prepares the model's MjSpec for the assembly (the ee site, the torque motors).

Torque limits used by the loop are read from the compiled model's actuator ``ctrlrange``; the catalogue's
YAML copy is checked against it by the model tests, a user's ``torque_limits`` become it.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml
from dockbench.sim.errors import ScenarioError


@dataclass(frozen=True)
class RobotSpec:
    """Static description of one robot type (SI units, rad)."""

    name: str
    model_resource: str  # path inside the ``assets`` package
    attachment_site: str
    joint_names: tuple[str, ...]
    actuator_names: tuple[str, ...]
    torque_limit: np.ndarray
    velocity_limit: np.ndarray
    home: np.ndarray
    #: a user's own model (``robot.model``): its absolute path; empty for a catalogue robot
    model_file: str = ""
    #: ``robot.ee_body``: the body whose origin carries the added attachment site :data:`EE_BODY_SITE`
    ee_body: str = ""
    #: joints that get a torque motor from dockbench (``dockbench_motor_<joint>``)
    added_motors: tuple[str, ...] = ()
    #: ``robot.actuators: replace``: the model's actuators on the arm joints are removed first
    replace_actuators: bool = False

    def model_path(self) -> str:
        """The robot's model file (absolute path)."""
        if self.model_file:
            return self.model_file
        return str(resources.files("dockbench.assets").joinpath(self.model_resource))


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, RobotSpec]:
    text = resources.files("dockbench.assets").joinpath("robots/limits.yaml").read_text()
    raw = yaml.safe_load(text)
    out = {}
    for name, r in raw.items():
        out[name] = RobotSpec(
            name=name,
            model_resource=r["model"],
            attachment_site=r["site"],
            joint_names=tuple(r["joint_names"]),
            actuator_names=tuple(r["actuator_names"]),
            torque_limit=np.array(r["torque_limit_Nm"], dtype=float),
            velocity_limit=np.array(r["velocity_limit_rad_s"], dtype=float),
            home=np.array(r["home"], dtype=float),
        )
    return out


def robot_names() -> list[str]:
    return sorted(_catalogue())


def get_robot(name: str, *, file: str | None = None, key: str = "robot.type") -> RobotSpec:
    """The :class:`RobotSpec` of ``name``; a ScenarioError listing the known robots otherwise."""
    cat = _catalogue()
    if name not in cat:
        raise ScenarioError(f"unknown robot {name!r}; known: {', '.join(sorted(cat))}", file=file, key=key)
    return cat[name]


# --------------------------------------------------------------------------------------------------------
# The user's own arm (``robot: {model: ...}``; docs/robots.md)

#: model file suffixes MuJoCo's parser reads
MODEL_SUFFIXES = (".xml", ".mjcf", ".urdf")
#: name of the site dockbench adds at the origin of ``robot.ee_body``
EE_BODY_SITE = "dockbench_ee"
#: prefix of the torque motors dockbench adds (``<prefix><joint>``)
MOTOR_PREFIX = "dockbench_motor_"
#: a motor's ctrlrange equals ±torque_limit when they agree to this relative tolerance (YAML vs MJCF decimals)
LIMIT_RTOL = 1e-9


def resolve_model_path(model: str, file: str | None) -> Path:
    """``robot.model`` as an absolute path: relative paths are relative to the scenario file's folder (the
    working directory for a scenario given as a mapping, ``file`` = ``<scenario>``)."""
    p = Path(model).expanduser()
    if not p.is_absolute():
        base = Path(file).resolve().parent if file and not file.startswith("<") else Path.cwd()
        p = base / p
    return p.resolve()


def _names(m: mujoco.MjModel, obj: mujoco.mjtObj, n: int) -> list[str]:
    return [mujoco.mj_id2name(m, obj, i) or "" for i in range(n)]


def _listing(names: Sequence[str], limit: int = 40) -> str:
    names = [n for n in names if n]
    shown = ", ".join(names[:limit]) + (f", … ({len(names)} in all)" if len(names) > limit else "")
    return shown or "(none)"


def _named(m: mujoco.MjModel, obj: mujoco.mjtObj, name: str, path: Path, file: str | None, key: str,
           hint: str = "") -> int:
    """The id of the site or body ``name`` in ``m``; a ScenarioError listing the model's sites or bodies
    (without the world body) otherwise."""
    i = mujoco.mj_name2id(m, obj, name)
    if i < 0:
        site = obj == mujoco.mjtObj.mjOBJ_SITE
        names = _names(m, obj, m.nsite) if site else _names(m, obj, m.nbody)[1:]
        kind = "site" if site else "body"
        raise ScenarioError(
            f"{path.name} has no {kind} {name!r}; its {'sites' if site else 'bodies'}: {_listing(names)}{hint}",
            file=file, key=key,
        )
    return i


def _fmt(v: Any, sep: str = " ") -> str:
    return sep.join(f"{float(x):g}" for x in v)


def _ancestors(m: mujoco.MjModel, b: int) -> list[int]:
    """Bodies from ``b`` up to (excluding) the world, ``b`` first."""
    out = []
    while b > 0:
        out.append(b)
        b = int(m.body_parentid[b])
    return out


def _torque_motor_problem(m: mujoco.MjModel, a: int) -> str | None:
    """Why actuator ``a`` is not a torque motor (ctrl = joint torque in N·m), or None when it is one."""
    if m.actuator_dyntype[a] != mujoco.mjtDyn.mjDYN_NONE:
        return "it has activation dynamics"
    if m.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_NONE:
        kp, kv = -m.actuator_biasprm[a, 1], -m.actuator_biasprm[a, 2]
        return f"it is a position/velocity servo (kp = {kp:g}, kv = {kv:g})"
    if m.actuator_gaintype[a] != mujoco.mjtGain.mjGAIN_FIXED or m.actuator_gainprm[a, 0] != 1.0:
        return f"its gain is not 1 (gainprm[0] = {m.actuator_gainprm[a, 0]:g})"
    if m.actuator_gear[a, 0] != 1.0:
        return f"its gear is {m.actuator_gear[a, 0]:g}, not 1"
    return None


#: the environment variable whose folders (``os.pathsep``-separated) hold ROS packages, as in ROS
PACKAGE_PATH_ENV = "ROS_PACKAGE_PATH"


def resolve_package_uri(uri: str, urdf: Path) -> tuple[Path | None, list[Path]]:
    """The file a URDF's ``package://NAME/rest`` (or ``file://…``) names, and the places looked at.

    ``package://NAME/rest`` is looked up, first match wins, in: each folder of ``$ROS_PACKAGE_PATH`` (the
    folder itself when it is named NAME, else ``folder/NAME``); then the URDF's own folder and its
    ancestors (an ancestor named NAME, else ``ancestor/NAME``) — so a package laid out as ROS and PyPI
    packages ship them (``…/NAME/urdf/arm.urdf`` beside ``…/NAME/meshes/``) resolves with nothing set.

    Returns:
        (the existing file or None, the candidate paths tried).
    """
    if uri.startswith("file://"):
        p = Path(uri[len("file://"):])
        return (p if p.is_file() else None), [p]
    name, _, rest = uri[len("package://"):].partition("/")
    roots = [Path(d).expanduser() for d in os.environ.get(PACKAGE_PATH_ENV, "").split(os.pathsep) if d]
    roots += [urdf.parent, *urdf.parent.parents]
    tried: list[Path] = []
    for root in roots:
        for pkg in ((root,) if root.name == name else ()) + (root / name,):
            cand = pkg / rest
            if cand not in tried:
                tried.append(cand)
            if cand.is_file():
                return cand.resolve(), tried
    return None, tried


def _urdf_text_with_resolved_meshes(path: Path, file: str | None) -> str:
    """The URDF's text with every ``package://`` and ``file://`` mesh file name replaced by the absolute path
    of the file (:func:`resolve_package_uri`); relative names are left to MuJoCo (the URDF's folder and its
    ``<mujoco><compiler meshdir>``). A collision mesh found nowhere is a ScenarioError listing where it looked
    (unless the URDF sets its own compiler meshdir: then it is left to MuJoCo); a visual one is left as it is
    (MuJoCo's URDF import drops visual elements)."""
    text = path.read_text()
    if "package://" not in text and "file://" not in text:
        return text
    root = ET.fromstring(text)
    # a <mujoco><compiler meshdir=... strippath="true"/> of the URDF's own: MuJoCo finds what dockbench does not
    own_meshdir = any(c.get("meshdir") for m in root.iter("mujoco") for c in m.iter("compiler"))
    for part in root.iter():
        if part.tag not in ("collision", "visual"):
            continue
        for el in part.iter("mesh"):
            uri = el.get("filename", "")
            if uri.startswith(("package://", "file://")):
                _resolve_mesh(el, uri, path, file, required=part.tag == "collision" and not own_meshdir)
    return ET.tostring(root, encoding="unicode")


def _resolve_mesh(el: ET.Element, uri: str, path: Path, file: str | None, required: bool) -> None:
    """Set ``el``'s filename to the file ``uri`` names; a ScenarioError when a ``required`` one is not found."""
    found, tried = resolve_package_uri(uri, path)
    if found is not None:
        el.set("filename", str(found))
        return
    if not required:  # a visual mesh: MuJoCo drops the URDF's visual elements anyway
        return
    shown = "; ".join(str(t) for t in tried[:8]) + (f"; … ({len(tried)} in all)" if len(tried) > 8 else "")
    fix = "fix the path" if uri.startswith("file://") else (
        f"add the folder that holds the package {uri[len('package://'):].partition('/')[0]!r} to "
        f"${PACKAGE_PATH_ENV} (folders separated by {os.pathsep!r})")
    raise ScenarioError(f"{path.name}: mesh {uri!r} not found (looked at {shown}); {fix}",
                        file=file, key="robot.model")


def _load_user_spec(path: Path, file: str | None = None) -> mujoco.MjSpec:
    """The model file as an MjSpec. A URDF: ``package://`` / ``file://`` mesh names resolved to absolute paths
    (:func:`resolve_package_uri`; MuJoCo does not resolve them), ``fusestatic`` off (a link on a fixed joint,
    e.g. ``tool0``, stays a body that ``ee_body`` can name), relative file names still relative to its folder."""
    if path.suffix.lower() != ".urdf":
        return mujoco.MjSpec.from_file(str(path))
    spec = mujoco.MjSpec.from_string(_urdf_text_with_resolved_meshes(path, file))
    spec.modelfiledir = str(path.parent) + os.sep
    spec.compiler.fusestatic = False
    return spec


def user_robot(cfg: Any, file: str | None) -> RobotSpec:
    """Validate ``robot: {model: ...}`` against the model file and return its :class:`RobotSpec`.

    Checks, each a :class:`ScenarioError` naming ``file`` and the key: the file exists and compiles; every
    ``robot.joints`` entry is a hinge joint of the model (the message lists the model's hinge joints), at
    its body's origin, one per body, base to tip along one chain; every other joint of the arm's chain is
    listed; ``ee_site`` / ``ee_body`` exists below the last joint; ``home`` lies in the joint ranges; each
    joint is driven by one torque motor (``<motor>``, gear 1, ctrlrange ±``torque_limits`` or unlimited) or
    by none (dockbench adds ``dockbench_motor_<joint>``), or ``actuators: replace``; a joint
    ``actuatorfrcrange`` is not tighter than ``torque_limits``.

    Args:
        cfg: the parsed :class:`sim.scenario.RobotConfig` (``model`` set).
        file: the scenario file (for messages and relative paths).
    """
    path = resolve_model_path(cfg.model, file)
    if not path.is_file():
        raise ScenarioError(f"robot model file not found (looked at {path})", file=file, key="robot.model")
    if path.suffix.lower() not in MODEL_SUFFIXES:
        raise ScenarioError(
            f"{path.name}: expected an MJCF or URDF file ({', '.join(MODEL_SUFFIXES)})", file=file, key="robot.model"
        )
    try:
        m = _load_user_spec(path, file).compile()
    except ScenarioError:
        raise
    except Exception as exc:  # noqa: BLE001 - MuJoCo's parser/compiler raise ValueError with its message
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].removeprefix("Error: ")
        raise ScenarioError(f"{path.name} does not load in MuJoCo: {first}", file=file, key="robot.model") from None
    hinges = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"#{j}" for j in range(m.njnt)
              if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    jids = []
    for i, name in enumerate(cfg.joints):
        key = f"robot.joints[{i}]"
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            raise ScenarioError(
                f"{path.name} has no joint {name!r}; its hinge joints: {_listing(hinges)}", file=file, key=key
            )
        if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            kind = mujoco.mjtJoint(m.jnt_type[j]).name.removeprefix("mjJNT_").lower()
            raise ScenarioError(
                f"joint {name!r} is a {kind} joint; dockbench drives hinge joints: {_listing(hinges)}",
                file=file, key=key,
            )
        if np.any(m.jnt_pos[j] != 0.0):
            raise ScenarioError(
                f"joint {name!r} sits at pos [{_fmt(m.jnt_pos[j])}] in its body; dockbench needs each arm joint at its "
                "body's origin: move the offset into the body's pos (and the geoms/inertial back by it)",
                file=file, key=key,
            )
        jids.append(j)
    bodies = [int(m.jnt_bodyid[j]) for j in jids]
    for i in range(len(jids)):
        if bodies.count(bodies[i]) > 1:
            raise ScenarioError(
                f"joint {cfg.joints[i]!r} shares its body with another listed joint; give each joint its own body",
                file=file, key=f"robot.joints[{i}]",
            )
        if i > 0 and bodies[i - 1] not in _ancestors(m, bodies[i])[1:]:
            raise ScenarioError(
                f"joint {cfg.joints[i]!r} does not follow {cfg.joints[i - 1]!r} on the arm's chain; list the joints "
                "base to tip along one chain",
                file=file, key=f"robot.joints[{i}]",
            )
    # the ee frame
    if cfg.ee_site is not None:
        hint = " (or name a body with ee_body)"
        s = _named(m, mujoco.mjtObj.mjOBJ_SITE, cfg.ee_site, path, file, "robot.ee_site", hint)
        ee_body, ee_key = int(m.site_bodyid[s]), "robot.ee_site"
    else:
        ee_body = _named(m, mujoco.mjtObj.mjOBJ_BODY, cfg.ee_body, path, file, "robot.ee_body")
        if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, EE_BODY_SITE) >= 0:
            raise ScenarioError(f"{path.name} already has a site named {EE_BODY_SITE!r}; use ee_site",
                                file=file, key="robot.ee_body")
        ee_key = "robot.ee_body"
    if bodies[-1] not in _ancestors(m, ee_body):
        raise ScenarioError(
            f"the end effector is not carried by the last joint {cfg.joints[-1]!r}", file=file, key=ee_key
        )
    # every joint on the arm's chain (above the first listed joint or below it) must be listed
    chain_root = _ancestors(m, bodies[0])[-1]
    listed = set(jids)
    extra = [
        mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"#{j}" for j in range(m.njnt)
        if j not in listed and chain_root in _ancestors(m, int(m.jnt_bodyid[j]))
    ]
    if extra:
        raise ScenarioError(
            f"the arm also has the joints {_listing(extra)}, which robot.joints does not list: dockbench drives every "
            "joint of the arm; list them, or remove them from the model (e.g. a gripper's fingers)",
            file=file, key="robot.joints",
        )
    # limits and home
    tau = np.array(cfg.torque_limits, dtype=float)
    lo = np.where(m.jnt_limited[jids], m.jnt_range[jids, 0], -np.inf)
    hi = np.where(m.jnt_limited[jids], m.jnt_range[jids, 1], np.inf)
    if cfg.home is None:
        home = np.clip(np.zeros(len(jids)), lo, hi)
    else:
        home = np.array(cfg.home, dtype=float)
        for i, (x, a, b) in enumerate(zip(home, lo, hi, strict=True)):
            if not a <= x <= b:
                raise ScenarioError(
                    f"{x} rad is outside the range [{a:.4f}, {b:.4f}] rad of joint {cfg.joints[i]!r}",
                    file=file, key=f"robot.home[{i}]",
                )
    for i, j in enumerate(jids):
        if m.jnt_actfrclimited[j] and (-m.jnt_actfrcrange[j, 0] < tau[i] * (1 - LIMIT_RTOL)
                                       or m.jnt_actfrcrange[j, 1] < tau[i] * (1 - LIMIT_RTOL)):
            raise ScenarioError(
                f"{tau[i]} N·m exceeds the actuatorfrcrange [{_fmt(m.jnt_actfrcrange[j], ', ')}] N·m of joint "
                f"{cfg.joints[i]!r} (MuJoCo would clip the torque): lower robot.torque_limits[{i}] or widen the "
                "model's range (URDF: the joint's <limit effort>)",
                file=file, key=f"robot.torque_limits[{i}]",
            )
    # actuators: one torque motor per joint, or none (dockbench adds it)
    actuator_names, added = [], []
    for i, j in enumerate(jids):
        acts = [a for a in range(m.nu)
                if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and int(m.actuator_trnid[a, 0]) == j]
        motor_xml = (f'<motor name="{MOTOR_PREFIX}{cfg.joints[i]}" joint="{cfg.joints[i]}" '
                     f'ctrlrange="{-tau[i]:g} {tau[i]:g}"/>')
        if cfg.actuators == "replace" or not acts:
            actuator_names.append(MOTOR_PREFIX + cfg.joints[i])
            added.append(cfg.joints[i])
            continue
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"#{a}" for a in acts]
        key = f"robot.joints[{i}]"
        if len(acts) > 1:
            raise ScenarioError(
                f"joint {cfg.joints[i]!r} has {len(acts)} actuators ({', '.join(names)}); dockbench commands one "
                f"torque per joint: keep one <motor> ({motor_xml}) or set robot.actuators: replace",
                file=file, key=key,
            )
        a = acts[0]
        why = _torque_motor_problem(m, a)
        if why is not None:
            raise ScenarioError(
                f"joint {cfg.joints[i]!r} is driven by actuator {names[0]!r}, which is not a torque motor ({why}); "
                f"dockbench commands joint torques [N·m]: declare it as {motor_xml} in {path.name}, delete it "
                "(dockbench then adds that motor), or set robot.actuators: replace",
                file=file, key=key,
            )
        if m.actuator_ctrllimited[a]:
            r = m.actuator_ctrlrange[a]
            if not np.allclose([-r[0], r[1]], tau[i], rtol=LIMIT_RTOL, atol=0.0):
                raise ScenarioError(
                    f"{tau[i]} N·m disagrees with the ctrlrange [{r[0]:g}, {r[1]:g}] of motor {names[0]!r} on joint "
                    f"{cfg.joints[i]!r}: make them equal (or drop the motor's ctrlrange)",
                    file=file, key=f"robot.torque_limits[{i}]",
                )
        actuator_names.append(names[0])
    return RobotSpec(
        name=path.stem,
        model_resource="",
        attachment_site=cfg.ee_site if cfg.ee_site is not None else EE_BODY_SITE,
        joint_names=tuple(cfg.joints),
        actuator_names=tuple(actuator_names),
        torque_limit=tau,
        velocity_limit=np.array(cfg.velocity_limits, dtype=float),
        home=home,
        model_file=str(path),
        ee_body=cfg.ee_body or "",
        added_motors=tuple(added),
        replace_actuators=cfg.actuators == "replace",
    )


def robot_for(cfg: Any, file: str | None = None) -> RobotSpec:
    """The :class:`RobotSpec` of a parsed ``robot`` block: the catalogue entry of ``type``, or the user's model."""
    if cfg.model is not None:
        return user_robot(cfg, file)
    return get_robot(cfg.type, file=file)


def absolute_asset_paths(spec: mujoco.MjSpec) -> None:
    """Make every mesh, height-field, skin and texture file of ``spec`` an absolute path (resolved against the
    model file's folder and the compiler's meshdir / texturedir), so that ``spec.to_xml()`` (a run folder's
    scene.xml) loads from any folder."""
    root = Path(spec.modelfiledir or ".").resolve()

    def resolve(name: str, subdir: str) -> str:
        if not name or Path(name).is_absolute():
            return name
        return str((root / (subdir or "") / name).resolve())

    for kind in ("meshes", "hfields", "skins"):
        for el in getattr(spec, kind):
            el.file = resolve(el.file, el.compiler.meshdir if hasattr(el, "compiler") else spec.meshdir)
    for tex in spec.textures:
        sub = tex.compiler.texturedir if hasattr(tex, "compiler") else spec.texturedir
        tex.file = resolve(tex.file, sub)
        if any(tex.cubefiles):
            tex.cubefiles = [resolve(f, sub) for f in tex.cubefiles]


def urdf_to_mjcf(urdf: str | Path) -> str:
    """The MJCF text of a URDF as dockbench loads it (docs/robots.md §4): ``package://`` / ``file://`` mesh names
    resolved, ``fusestatic`` off (``tool0`` and other links on fixed joints stay bodies), every asset file an
    absolute path. Save it beside the URDF and edit it (actuators, armature, sites) for more control::

        python -c "from dockbench.sim.robots import urdf_to_mjcf; print(urdf_to_mjcf('arm.urdf'))" > arm.xml

    Raises:
        ScenarioError: a collision mesh is not found (the message lists where it looked).
    """
    spec = _load_user_spec(Path(urdf).resolve())
    absolute_asset_paths(spec)
    return spec.to_xml()


def robot_model_spec(robot: RobotSpec) -> mujoco.MjSpec:
    """The robot's MjSpec, ready for the tool and target: its asset files as absolute paths
    (:func:`absolute_asset_paths`, so that a run folder's scene.xml loads from anywhere). For a user model:
    the ``ee_body`` site added at the body's origin, the ee site's pose written as pos/quat (a tool is mounted
    from those), and the torque motors ``dockbench_motor_<joint>`` (ctrlrange ±torque_limit) added — after
    removing the joints' own actuators with ``actuators: replace``; the kept motors get ctrlrange
    ±torque_limit (:func:`user_robot` checked they agree or had none)."""
    path = Path(robot.model_path())
    spec = _load_user_spec(path) if robot.model_file else mujoco.MjSpec.from_file(str(path))
    absolute_asset_paths(spec)
    if not robot.model_file:
        return spec
    if robot.ee_body:
        spec.body(robot.ee_body).add_site(name=EE_BODY_SITE, pos=[0.0, 0.0, 0.0], quat=[1.0, 0.0, 0.0, 0.0])
    else:  # euler / axisangle / zaxis orientations resolved by the compiler, as pos + quat
        m = spec.compile()
        s = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, robot.attachment_site)
        site = spec.site(robot.attachment_site)
        site.pos = list(m.site_pos[s])
        site.quat = list(m.site_quat[s])
        site.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
    if robot.replace_actuators:
        joints = set(robot.joint_names)
        for act in list(spec.actuators):
            if act.trntype == mujoco.mjtTrn.mjTRN_JOINT and act.target in joints:
                spec.delete(act)
    added = set(robot.added_motors)
    for name, act_name, tau in zip(robot.joint_names, robot.actuator_names, robot.torque_limit, strict=True):
        if name in added:
            act = spec.add_actuator(name=act_name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.set_to_motor()
        else:
            act = spec.actuator(act_name)
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [-float(tau), float(tau)]
    return spec
