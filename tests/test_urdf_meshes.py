"""A URDF with meshes named ``package://…`` (issue 30, item 3; docs/robots.md §4 and §6).

MuJoCo's URDF import does not resolve ``package://`` (on MuJoCo 4.0.1 it fails with "Error opening file
'package:/…'"), so dockbench resolves the names itself (sim/robots.py ``resolve_package_uri``), and the run
folder keeps copies of the mesh files so its scene.xml renders after the model moved
(telemetry/run.py ``write_scene``).

The tests write a ROS-style package themselves (``src/user_arm6_description/{urdf,meshes}``: the arm of
tests/user_robot_helpers.py with a binary STL tetrahedron on the base and an OBJ cube on the shoulder as
collision meshes, and a visual ``.dae`` that does not exist), so they always run; the UR5 of
example-robot-data (PyPI) runs only when that package is installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from pathlib import Path

import mujoco
import numpy as np
import pytest
from dockbench.sim.errors import DockbenchError, ScenarioError
from dockbench.sim.loop import build, run
from dockbench.sim.robots import PACKAGE_PATH_ENV, resolve_package_uri, urdf_to_mjcf
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry.run import check_manifest, write_scene
from dockbench.telemetry.video import load_render_model, render_run_video

from tests.helpers import TOL
from tests.test_user_robot import _verdict, docking_dict
from tests.user_robot_helpers import arm_urdf, robot_block, write_obj, write_stl

PKG = "user_arm6_description"
MESHES = {"base": (f"package://{PKG}/meshes/base.stl", f"package://{PKG}/meshes/visual/base.dae"),
          "shoulder": (f"package://{PKG}/meshes/shoulder.obj",)}


def write_package(ws: Path) -> Path:
    """``ws/src/user_arm6_description`` with ``urdf/arm6.urdf`` and its meshes; returns the URDF path."""
    pkg = ws / "src" / PKG
    write_stl(pkg / "meshes" / "base.stl")
    write_obj(pkg / "meshes" / "shoulder.obj")
    (pkg / "package.xml").write_text(f"<package><name>{PKG}</name></package>\n")
    urdf = pkg / "urdf" / "arm6.urdf"
    urdf.parent.mkdir(parents=True)
    urdf.write_text(arm_urdf(MESHES))
    return urdf


def urdf_block(urdf: Path) -> dict:
    return {k: v for k, v in robot_block(urdf, ee_site=None, ee_body="tool0").items() if v is not None}


def meshed_docking(urdf: Path) -> dict:
    d = docking_dict(urdf, "khatib")
    d["name"] = "user_arm6_urdf_meshes_docking"
    d["robot"] = urdf_block(urdf)
    return d


def _mesh_vertices(m: mujoco.MjModel) -> dict[str, int]:
    return {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_MESH, i): int(m.mesh_vertnum[i]) for i in range(m.nmesh)}


def test_package_meshes_resolve_against_the_urdfs_own_folders(tmp_path, monkeypatch) -> None:
    """Nothing set: ``package://user_arm6_description/…`` is the URDF's ancestor of that name. Both collision
    meshes load (the tetrahedron's 4 vertices, the cube's 8); the visual .dae, which does not exist, is ignored
    as MuJoCo drops URDF visuals."""
    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    urdf = write_package(tmp_path / "ws")
    found, _ = resolve_package_uri(MESHES["base"][0], urdf)
    assert found == (tmp_path / "ws" / "src" / PKG / "meshes" / "base.stl").resolve()
    asm = build(scenario_from_dict(meshed_docking(urdf))).asm
    assert _mesh_vertices(asm.model) == {"base": 4, "shoulder": 8}
    assert mujoco.mj_name2id(asm.model, mujoco.mjtObj.mjOBJ_BODY, "tool0") >= 0


def test_ros_package_path_finds_a_package_elsewhere_and_a_missing_one_says_where_it_looked(
        tmp_path, monkeypatch) -> None:
    """A URDF outside its package finds the meshes through ``$ROS_PACKAGE_PATH``; without it the error names
    the mesh, the places looked at and the variable to set (key robot.model)."""
    urdf = write_package(tmp_path / "ws")
    alone = tmp_path / "elsewhere" / "arm6.urdf"
    alone.parent.mkdir()
    shutil.copy(urdf, alone)
    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(meshed_docking(alone))
    msg = str(exc.value)
    assert exc.value.key == "robot.model" and MESHES["base"][0] in msg and PACKAGE_PATH_ENV in msg, msg
    assert str(tmp_path / "elsewhere" / PKG / "meshes" / "base.stl") in msg, msg
    monkeypatch.setenv(PACKAGE_PATH_ENV, f"/nonexistent{':'}{tmp_path / 'ws' / 'src'}")
    asm = build(scenario_from_dict(meshed_docking(alone))).asm
    assert _mesh_vertices(asm.model) == {"base": 4, "shoulder": 8}


def test_the_meshed_urdf_docks_and_its_run_folder_renders_after_the_package_moved(tmp_path, monkeypatch) -> None:
    """The meshed URDF (ee_body tool0) docks with Khatib and passes the fr3_docking gates; the run folder's
    scene.xml names its own copies (meshes/base.stl, meshes/shoulder.obj, no meshdir, no absolute path), the
    manifest lists them, and after the package folder is moved away the scene still loads and renders from
    another working directory."""
    from tests.test_video import GL_PROBLEM

    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    urdf = write_package(tmp_path / "ws")
    result = run(scenario_from_dict(meshed_docking(urdf)), out_root=tmp_path / "runs")
    assert result.verdict == "PASS", _verdict(result)
    scene = result.run_dir / "scene.xml"
    text = scene.read_text()
    assert 'file="meshes/base.stl"' in text and 'file="meshes/shoulder.obj"' in text, text[:2000]
    assert "meshdir" not in text and str(tmp_path) not in text
    files = json.loads((result.run_dir / "manifest.json").read_text())["files"]
    assert {"meshes/base.stl", "meshes/shoulder.obj"} <= set(files) and check_manifest(result.run_dir) == []
    (tmp_path / "ws").rename(tmp_path / "ws_moved")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _mesh_vertices(load_render_model(scene)) == {"base": 4, "shoulder": 8}
    if GL_PROBLEM is None:
        out = render_run_video(result.run_dir, elsewhere / "clip.gif", fps=5, width=64, height=48)
        assert out.stat().st_size > 0


def test_write_scene_keeps_two_files_of_one_name_apart(tmp_path) -> None:
    """Two meshes called base.stl from different folders become meshes/base.stl and meshes/base_1.stl; a file
    named twice is copied once; the compiler's meshdir is dropped; the scene compiles from its folder."""
    for sub in ("a", "b"):
        write_stl(tmp_path / sub / "base.stl", size=0.05 if sub == "a" else 0.07)
    a, b = tmp_path / "a" / "base.stl", tmp_path / "b" / "base.stl"
    xml = (f'<mujoco><compiler meshdir="nowhere"/><asset><mesh name="m1" file="{a}"/><mesh name="m2" file="{b}"/>'
           f'<mesh name="m3" file="{a}"/></asset><worldbody><geom type="mesh" mesh="m1"/><geom type="mesh" mesh="m2"/>'
           '<geom type="mesh" mesh="m3"/></worldbody></mujoco>')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    scene = write_scene(run_dir, xml)
    assert sorted(p.name for p in (run_dir / "meshes").iterdir()) == ["base.stl", "base_1.stl"]
    assert (run_dir / "meshes" / "base_1.stl").read_bytes() == b.read_bytes()  # a copy: exact
    m = mujoco.MjModel.from_xml_path(str(scene))
    assert m.nmesh == 3 and "meshdir" not in scene.read_text()


def test_urdf_to_mjcf_keeps_tool0_and_is_the_same_robot(tmp_path, monkeypatch) -> None:
    """docs/robots.md's conversion (``urdf_to_mjcf``): the MJCF keeps the link ``tool0`` (fusestatic off) and
    the meshes (absolute paths), and as ``robot.model`` with ``ee_body: tool0`` it is the URDF's robot: the same
    tool-tip pose at home, to the round-off of the pose table (tests/helpers.py TOL['pose_abs'])."""
    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    urdf = write_package(tmp_path / "ws")
    mjcf = tmp_path / "arm6_from_urdf.xml"
    mjcf.write_text(urdf_to_mjcf(urdf))
    assert 'name="tool0"' in mjcf.read_text()
    poses = []
    for model in (urdf, mjcf):
        setup = build(scenario_from_dict({**meshed_docking(urdf), "robot": urdf_block(model)}))
        assert _mesh_vertices(setup.asm.model) == {"base": 4, "shoulder": 8}
        m, d = setup.asm.model, mujoco.MjData(setup.asm.model)
        d.qpos[setup.asm.qpos_adr] = setup.asm.robot.home
        mujoco.mj_kinematics(m, d)
        poses.append(np.concatenate([d.site_xpos[setup.asm.ee_site], d.site_xmat[setup.asm.ee_site]]))
    np.testing.assert_allclose(poses[0], poses[1], rtol=0, atol=TOL["pose_abs"])


def _ur5_urdf() -> Path | None:
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).endswith("ur_description/urdf/ur5_robot.urdf"):
            return Path(dist.locate_file(f))
    return None


#: docs/robots.md §4's UR5 block (example-robot-data's ur5_robot.urdf): the URDF's effort and velocity limits,
#: home from the page's IK recipe (the tool tip 10 cm above the drogue's mouth at (0.45, 0, 0.20) m, z down)
UR5_BLOCK = {
    "ee_body": "tool0",
    "joints": ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
               "wrist_3_joint"],
    "torque_limits": [150, 150, 150, 28, 28, 28],
    "velocity_limits": [3.15, 3.15, 3.15, 3.2, 3.2, 3.2],
    "home": [-0.245, -1.6895, 1.6866, -1.5679, -1.5708, -1.8158],
}


@pytest.mark.skipif(_ur5_urdf() is None, reason="example-robot-data (PyPI, 131 MB wheel) is not installed: "
                    "`pip install example-robot-data` runs the UR5 case; the package written by the tests above "
                    "covers the same code")
def test_the_ur5_of_example_robot_data_docks_and_its_run_folder_is_self_contained(tmp_path) -> None:
    """The UR5 URDF as shipped (``package://example-robot-data/…`` meshes, 7 collision STLs) loads with no
    setting, docks with Khatib within the fr3_docking gates, and its run folder holds the 7 meshes."""
    urdf = _ur5_urdf()
    d = docking_dict(urdf, "khatib")
    d["name"] = "ur5_docking"
    d["robot"] = {"model": str(urdf), **UR5_BLOCK}
    result = run(scenario_from_dict(d), out_root=tmp_path / "runs")
    assert result.verdict == "PASS", _verdict(result)
    assert len(list((result.run_dir / "meshes").glob("*.stl"))) == 7
    m = load_render_model(result.run_dir / "scene.xml")
    assert m.nmesh == 7 and mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "tool0") >= 0


def test_a_missing_mesh_copy_is_named(tmp_path, monkeypatch) -> None:
    """A mesh deleted from the run folder after the run: the video's loader names it and the run folder."""
    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    urdf = write_package(tmp_path / "ws")
    d = meshed_docking(urdf)
    d["sim"]["duration"] = 0.05
    result = run(scenario_from_dict(d), out_root=tmp_path / "runs")
    (result.run_dir / "meshes" / "shoulder.obj").unlink()
    with pytest.raises(DockbenchError) as exc:
        load_render_model(result.run_dir / "scene.xml")
    assert "shoulder.obj" in str(exc.value) and "run folder" in str(exc.value), str(exc.value)
    assert any("shoulder.obj" in p for p in check_manifest(result.run_dir))


def test_the_ik_recipe_of_robots_md_runs_as_printed(capsys) -> None:
    """docs/robots.md §2 step 3, executed verbatim from the repository root: it prints six joint angles that put
    the tool tip at the recipe's pose (to the solver's tolerance, 1e-9 m, with margin for the 4-decimal
    rounding: 1e-4 rad × 1 m of arm ≈ 1e-4 m)."""
    import os
    import re
    import textwrap

    from tests.helpers import REPO

    text = (REPO / "docs" / "robots.md").read_text()
    block = textwrap.dedent(re.search(r"`sim\.ik\.solve_ik`.*?```python\n(.*?) *```", text, re.S).group(1))
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        scope: dict = {}
        exec(compile(block, "docs/robots.md", "exec"), scope)  # noqa: S102 - the documented recipe itself
    finally:
        os.chdir(cwd)
    q = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    asm, T = scope["asm"], scope["T"]
    import pinocchio as pin

    data = asm.pin_model.createData()
    pin.framesForwardKinematics(asm.pin_model, data, np.array(q))
    np.testing.assert_allclose(data.oMf[asm.frame_ids[asm.tool.ee_site]].translation, T[:3, 3], atol=1e-3)


def test_a_urdf_with_its_own_meshdir_recipe_still_loads(tmp_path, monkeypatch) -> None:
    """The recipe older docs gave (a ``<mujoco><compiler meshdir strippath>`` element in the URDF): a package
    name dockbench cannot resolve is then left to MuJoCo, which strips the directories and finds the files in
    the meshdir."""
    monkeypatch.delenv(PACKAGE_PATH_ENV, raising=False)
    urdf = write_package(tmp_path / "ws")
    text = urdf.read_text().replace(PKG, "not_a_folder_name").replace(
        '<robot name="user_arm6">',
        '<robot name="user_arm6"><mujoco><compiler meshdir="../meshes" strippath="true"/></mujoco>')
    urdf.write_text(text)
    asm = build(scenario_from_dict(meshed_docking(urdf))).asm
    assert _mesh_vertices(asm.model) == {"base": 4, "shoulder": 8}
