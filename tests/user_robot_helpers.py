"""A user's own 6-DOF arm for the bring-your-own-robot tests (docs/robots.md): the tests write its MJCF (or
URDF) into a temporary folder and point ``robot.model`` at it, exactly as a user would.

The arm has the layout of a common 6-DOF industrial cobot (shoulder pan and lift, elbow, three wrist joints;
links of 0.425 m and 0.392 m) with masses from 8.4 kg (upper arm) to 0.25 kg (last link). Each link's
inertia is that of a solid cylinder about its centre of mass (I_axial = m r²/2, I_transverse =
m (3 r² + L²)/12) with the link's own length and radius, so the inertias are physical (they satisfy the
triangle inequality) and of a real arm's size. Joint damping 0.5 N·m·s/rad and armature 0.2 / 0.05 kg·m²
(shoulder and elbow / wrist) stand in for gearbox friction and reflected rotor inertia.

Joints 1–5 carry ``<motor>`` actuators (ctrlrange = the torque limits); joint 6 has none, so dockbench adds
one (``actuators: auto``). The flange site is oriented with ``zaxis`` (not ``quat``), which dockbench must
resolve through the compiler.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")
TORQUE_LIMITS = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)  # N·m
VELOCITY_LIMITS = (3.14, 3.14, 3.14, 6.28, 6.28, 6.28)  # rad/s
#: a bent, non-singular pose with the flange z axis along world −z, the flange at about (0.45, 0, 0.40) m
HOME = (-0.3018, -0.1248, 1.9121, -0.2163, -1.5708, -0.3015)

#: (body, parent-relative pos, joint axis, mass [kg], com in body [m], cylinder (radius, length, axis) [m])
_LINKS = (
    ("shoulder", (0, 0, 0.163), (0, 0, 1), 3.7, (0, 0, 0), (0.06, 0.15, "z")),
    ("upper_arm", (0, 0.138, 0), (0, 1, 0), 8.4, (0, 0, 0.2125), (0.055, 0.425, "z")),
    ("forearm", (0, -0.131, 0.425), (0, 1, 0), 2.3, (0, 0, 0.196), (0.04, 0.392, "z")),
    ("wrist1", (0, 0, 0.392), (0, 1, 0), 1.2, (0, 0.05, 0), (0.04, 0.12, "y")),
    ("wrist2", (0, 0.127, 0), (0, 0, 1), 1.2, (0, 0, 0.05), (0.04, 0.12, "z")),
    ("wrist3", (0, 0, 0.1), (0, 1, 0), 0.25, (0, 0.07, 0), (0.035, 0.03, "y")),
)
_RANGES = ((-3.1416, 3.1416), (-3.1416, 3.1416), (-2.9, 2.9), (-3.1416, 3.1416), (-3.1416, 3.1416), (-3.1416, 3.1416))
_ARMATURE = (0.2, 0.2, 0.2, 0.05, 0.05, 0.05)


_HEADER = """<!--
  A 6-DOF arm for dockbench's bring-your-own-robot guide (docs/robots.md). Written by arm_mjcf() in
  tests/user_robot_helpers.py; tests/test_user_robot.py checks that this file is its output.
  Layout of a common 6-DOF cobot (links 0.425 m and 0.392 m); each link's inertia is a solid cylinder's about
  its centre of mass (m r^2 / 2 axially, m (3 r^2 + L^2) / 12 across). Joints 1-5 have <motor> actuators
  (ctrlrange = the torque limit, gear 1); wrist_3 has none, so dockbench adds one. The flange site's z axis
  (given with zaxis) is the tool axis.
-->"""


def _cylinder_inertia(m: float, r: float, length: float, axis: str) -> tuple[float, float, float]:
    """Principal moments (about x, y, z) of a solid cylinder of mass m, radius r, length L along ``axis``."""
    ax, tr = m * r * r / 2.0, m * (3.0 * r * r + length * length) / 12.0
    return tuple(ax if a == axis else tr for a in "xyz")  # type: ignore[return-value]


def _fmt(v) -> str:
    return " ".join(f"{x:.10g}" for x in v)


def arm_mjcf(*, mesh: str | None = None, position_servo: bool = False, joint_pos_offset: bool = False) -> str:
    """The arm's MJCF text.

    Args:
        mesh: a mesh file (relative to ``<compiler meshdir="meshes">``) used as a visual geom on the base,
            painted with the texture ``paint.png`` (relative to ``texturedir="textures"``).
        position_servo: joint 1 gets a ``<position>`` actuator instead of a ``<motor>`` (a servo, not a torque).
        joint_pos_offset: joint 2 sits 1 cm off its body origin (which dockbench rejects with a fix).
    """
    dirs = ' meshdir="meshes" texturedir="textures"' if mesh else ""
    lines = [_HEADER, '<mujoco model="user_arm6">', f'  <compiler angle="radian"{dirs}/>']
    if mesh:
        lines += ["  <asset>", f'    <mesh name="base_shell" file="{mesh}"/>',
                  '    <texture name="base_paint" type="2d" file="paint.png"/>',
                  '    <material name="base_paint" texture="base_paint"/>', "  </asset>"]
    lines += ["  <worldbody>", '    <body name="base">',
              '      <inertial pos="0 0 0.025" mass="4" diaginertia="0.0044 0.0044 0.0072"/>',
              '      <geom type="cylinder" size="0.06 0.025" pos="0 0 0.025" rgba="0.3 0.3 0.35 1"/>']
    if mesh:
        lines.append('      <geom type="mesh" mesh="base_shell" contype="0" conaffinity="0" mass="0" '
                     'material="base_paint"/>')
    indent = "      "
    for i, (name, pos, axis, mass, com, (r, length, cax)) in enumerate(_LINKS):
        inertia = _cylinder_inertia(mass, r, length, cax)
        jpos = ' pos="0 0 0.01"' if (joint_pos_offset and i == 1) else ""
        lines.append(f'{indent}<body name="{name}" pos="{_fmt(pos)}">')
        lines.append(f'{indent}  <inertial pos="{_fmt(com)}" mass="{mass}" diaginertia="{_fmt(inertia)}"/>')
        lo, hi = _RANGES[i]
        lines.append(f'{indent}  <joint name="{JOINTS[i]}" type="hinge" axis="{_fmt(axis)}" range="{lo} {hi}" '
                     f'damping="0.5" armature="{_ARMATURE[i]}"{jpos}/>')
        c = np.array(com, dtype=float)
        d = np.zeros(3)
        d["xyz".index(cax)] = length / 2.0
        lines.append(f'{indent}  <geom type="capsule" fromto="{_fmt(c - d)} {_fmt(c + d)}" size="{0.8 * r:.4g}" '
                     'mass="0" rgba="0.6 0.65 0.7 1"/>')
        indent += "  "
    lines.append(f'{indent}<site name="flange" pos="0 0.1 0" zaxis="0 1 0"/>')
    for _ in _LINKS:
        indent = indent[:-2]
        lines.append(f"{indent}</body>")
    lines += ["    </body>", "  </worldbody>", "  <actuator>"]
    for i, name in enumerate(JOINTS[:5]):
        tau = TORQUE_LIMITS[i]
        if position_servo and i == 0:
            lines.append(f'    <position name="servo_{name}" joint="{name}" kp="500" ctrlrange="-3 3"/>')
        else:
            lines.append(f'    <motor name="motor_{name}" joint="{name}" ctrlrange="{-tau} {tau}"/>')
    lines += ["  </actuator>", "</mujoco>", ""]
    return "\n".join(lines)


def write_arm(folder: Path, **kwargs) -> Path:
    """Write ``arm6.xml`` (see :func:`arm_mjcf`) into ``folder``; with ``mesh=True`` also a small binary STL
    (a tetrahedron) in ``folder/meshes`` and a 4×4 PNG in ``folder/textures``. Returns the model path."""
    folder.mkdir(parents=True, exist_ok=True)
    mesh = kwargs.pop("mesh", False)
    if mesh:
        from PIL import Image  # a matplotlib dependency

        write_stl(folder / "meshes" / "base_shell.stl")
        (folder / "textures").mkdir(exist_ok=True)
        rgb = np.zeros((4, 4, 3), dtype=np.uint8)
        rgb[::2, ::2] = (230, 120, 40)
        Image.fromarray(rgb).save(folder / "textures" / "paint.png")
    path = folder / "arm6.xml"
    path.write_text(arm_mjcf(mesh="base_shell.stl" if mesh else None, **kwargs))
    return path


def write_stl(path: Path, size: float = 0.08) -> None:
    """A binary STL tetrahedron with edges of ``size`` [m] (outward normals left zero: MuJoCo recomputes them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    V = np.array([[0, 0, 0], [size, 0, 0], [0, size, 0], [0, 0, size]], dtype=float) - size / 4
    faces = ((0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3))
    with path.open("wb") as f:
        f.write(b"dockbench test mesh".ljust(80, b" "))
        f.write(struct.pack("<I", len(faces)))
        for face in faces:
            f.write(struct.pack("<3f", 0.0, 0.0, 0.0))
            for k in face:
                f.write(struct.pack("<3f", *V[k]))
            f.write(b"\0\0")


def write_obj(path: Path, size: float = 0.06) -> None:
    """A Wavefront OBJ cube with edges of ``size`` [m], centred on the origin (12 triangles)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h = size / 2.0
    V = [(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)]
    quads = ((1, 2, 4, 3), (5, 7, 8, 6), (1, 5, 6, 2), (3, 4, 8, 7), (1, 3, 7, 5), (2, 6, 8, 4))
    lines = [f"v {x:g} {y:g} {z:g}" for x, y, z in V]
    for a, b, c, d in quads:
        lines += [f"f {a} {b} {c}", f"f {a} {c} {d}"]
    path.write_text("\n".join(lines) + "\n")


def robot_block(model: str | Path, **extra) -> dict:
    """The scenario's ``robot:`` block for the arm at ``model``."""
    return {"model": str(model), "ee_site": "flange", "joints": list(JOINTS), "torque_limits": list(TORQUE_LIMITS),
            "velocity_limits": list(VELOCITY_LIMITS), "home": list(HOME), **extra}


def _mesh_elements(uris: tuple[str, ...]) -> str:
    """A link's ``<collision>`` with the first mesh and ``<visual>`` elements with the others."""
    out = [f'<collision><geometry><mesh filename="{uris[0]}"/></geometry></collision>'] if uris else []
    out += [f'<visual><geometry><mesh filename="{u}"/></geometry></visual>' for u in uris[1:]]
    return "".join(out)


def arm_urdf(meshes: dict[str, tuple[str, ...]] | None = None) -> str:
    """The same arm as URDF (links and joints with the MJCF's numbers; the flange is the link ``tool0`` on a
    fixed joint, z axis along the last link's y axis). URDF has no armature and no actuators: MuJoCo's
    import gives the joints none, so dockbench adds every torque motor; ``<limit effort>`` becomes the joints'
    actuatorfrcrange.

    Args:
        meshes: link name → mesh file names as the URDF writes them (``package://…``): the first becomes the
            link's ``<collision>`` mesh, the others ``<visual>`` meshes. The inertials stay explicit, so the
            meshes change the geometry only.
    """
    meshes = meshes or {}
    out = ['<robot name="user_arm6">',
           '  <link name="base"><inertial><origin xyz="0 0 0.025"/><mass value="4"/>'
           '<inertia ixx="0.0044" iyy="0.0044" izz="0.0072" ixy="0" ixz="0" iyz="0"/></inertial>'
           '<collision><origin xyz="0 0 0.025"/><geometry><cylinder radius="0.06" length="0.05"/></geometry>'
           f"</collision>{_mesh_elements(meshes.get('base', ()))}</link>"]
    parent = "base"
    for i, (name, pos, axis, mass, com, (r, length, cax)) in enumerate(_LINKS):
        ixx, iyy, izz = _cylinder_inertia(mass, r, length, cax)
        out.append(f'  <link name="{name}"><inertial><origin xyz="{_fmt(com)}"/><mass value="{mass}"/>'
                   f'<inertia ixx="{ixx:.10g}" iyy="{iyy:.10g}" izz="{izz:.10g}" ixy="0" ixz="0" iyz="0"/>'
                   f"</inertial>{_mesh_elements(meshes.get(name, ()))}</link>")
        lo, hi = _RANGES[i]
        out.append(f'  <joint name="{JOINTS[i]}" type="revolute"><parent link="{parent}"/><child link="{name}"/>'
                   f'<origin xyz="{_fmt(pos)}"/><axis xyz="{_fmt(axis)}"/>'
                   f'<limit lower="{lo}" upper="{hi}" effort="{TORQUE_LIMITS[i]}" velocity="{VELOCITY_LIMITS[i]}"/>'
                   '<dynamics damping="0.5"/></joint>')
        parent = name
    out.append('  <link name="tool0"/>')
    out.append('  <joint name="flange_fixed" type="fixed"><parent link="wrist3"/><child link="tool0"/>'
               '<origin xyz="0 0.1 0" rpy="-1.5707963267948966 0 0"/></joint>')
    out += ["</robot>", ""]
    return "\n".join(out)


#: reflected rotor inertia of each joint [kg·m²] (MJCF armature; URDF has none)
ARMATURE = _ARMATURE
