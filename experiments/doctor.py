"""What is installed: dockbench and its dependencies, the compiled kernels, the optional extras, OpenGL, ROS 2.

    dockbench doctor            # (python experiments/doctor.py)
    dockbench doctor --json     # the same as one JSON object

Sections:

* **dockbench**: version, where it is imported from (a checkout installed with ``pip install -e .``, or
  site-packages), the Python interpreter, and the required packages with their versions.
* **kernels**: each compiled C kernel (sim/_kernel_manifest.py): ``compiled``, or why not (not built: no C
  compiler or Python headers at install time; stale: built from another version of its C source or of the
  Python law it ports), and which path a run takes under ``DOCKBENCH_KERNELS`` (sim/kernels.py).
* **extras**: each optional extra of pyproject.toml and whether its packages import.
* **rendering**: ``MUJOCO_GL`` and whether an offscreen OpenGL context can be made (``--video``,
  ``--offscreen``), tried in a child process so that a broken driver cannot take this one down.
* **ROS 2**: whether rclpy (a sourced ROS 2) or cyclonedds (the ``ros2`` extra) is usable, which one
  ``--ros2`` would take, and ``ROS_DOMAIN_ID``.

Exit code 0 when the required packages import (whatever the optional parts say), 1 otherwise.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from dockbench.cli import ArgumentParser, child_env

#: distribution name → import name, where they differ
IMPORT_NAMES = {
    "pin": "pinocchio", "pyyaml": "yaml", "imageio-ffmpeg": "imageio_ffmpeg", "rerun-sdk": "rerun",
    "mcap-ros2-support": "mcap_ros2", "usd-core": "pxr", "physx-usd-schemas": "physx_usd_schemas",
}
#: the extras, when the installed metadata does not list them (a checkout run without an install)
FALLBACK_EXTRAS = {
    "video": ["imageio", "imageio-ffmpeg"], "ros2": ["cyclonedds"], "mcap": ["mcap"], "rerun": ["rerun-sdk"],
    "notebook": ["pandas", "nbclient", "nbformat", "ipykernel"], "ray": ["ray"],
    "physx": ["ovphysx", "usd-core", "physx-usd-schemas"], "gym": ["gymnasium"], "tune": ["optuna"],
    "rl": ["gymnasium", "stable-baselines3"],
    "test": ["pytest", "toppra", "mpmath", "mcap-ros2-support"], "dev": ["ruff"],
}
#: what each extra enables (the README's words)
EXTRA_USE = {
    "video": "--video mp4 encoding", "ros2": "--ros2, the ROS 2 bridges (cyclonedds transport)",
    "mcap": "dockbench export --mcap", "rerun": "--rerun, dockbench export --rerun",
    "notebook": "Run.to_frame(), the quickstart notebook", "ray": "dockbench campaign run --executor ray",
    "physx": "dockbench hand --engine physx (the G20 hand on PhysX, ovphysx on the CPU)",
    "gym": "dockbench.gym, the Gymnasium environments (docs/gym.md)",
    "tune": "dockbench tune (Optuna, docs/tuning.md)",
    "rl": "the stable-baselines3 example on dockbench.gym (docs/gym.md; a CPU-only torch first)",
    "test": "the test suite's optional cross-checks", "dev": "ruff",
}
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)[^;]*(?:;(.*))?$")


def _requirements() -> tuple[list[str], dict[str, list[str]]]:
    """(required distributions, {extra: distributions}) from the installed metadata, else the fallback."""
    try:
        reqs = metadata.requires("dockbench") or []
    except metadata.PackageNotFoundError:
        reqs = []
    required: list[str] = []
    extras: dict[str, list[str]] = {}
    for req in reqs:
        m = _REQ.match(req)
        if not m:
            continue
        name, marker = m.group(1).lower(), m.group(2) or ""
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra is None:
            required.append(name)
        elif name not in extras.setdefault(extra.group(1), []):
            extras[extra.group(1)].append(name)
    if not required:
        required = ["mujoco", "pin", "numpy", "scipy", "qpsolvers", "daqp", "proxsuite", "quadprog", "matplotlib",
                    "pyyaml"]
    return required, extras or dict(FALLBACK_EXTRAS)


_imports: dict[str, dict[str, Any]] = {}


def probe_package(dist: str) -> dict[str, Any]:
    """Whether distribution ``dist`` imports: {"package", "ok", "version", "error"} (cached)."""
    if dist in _imports:
        return _imports[dist]
    module = IMPORT_NAMES.get(dist, dist.replace("-", "_"))
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = None
    try:
        importlib.import_module(module)
        ok, error = True, None
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything, not only ImportError
        ok, error = False, f"{type(exc).__name__}: {exc}"
        if dist == "ruff" and shutil.which("ruff"):  # a binary, with or without its Python module
            ok, error = True, None
    _imports[dist] = {"package": dist, "ok": ok, "version": version, "error": error}
    return _imports[dist]


def kernels() -> dict[str, Any]:
    """Each kernel's state (sim.kernels.status) and the path runs take under the current mode."""
    from dockbench.sim import _kernel_manifest as manifest
    from dockbench.sim import kernels as k

    try:
        mode, mode_error = k.mode(), None
    except k.KernelError as exc:
        mode, mode_error = None, str(exc)
    rows = []
    for name in manifest.KERNELS:
        module, why = k.status(name)
        rows.append({"kernel": name, "compiled": module is not None, "status": why})
    n = sum(r["compiled"] for r in rows)
    if mode == "python":
        uses = "Python reference paths (DOCKBENCH_KERNELS=python)"
    elif mode == "compiled":
        uses = ("compiled kernels (DOCKBENCH_KERNELS=compiled)" if n == len(rows) else
                "none: DOCKBENCH_KERNELS=compiled but a kernel is missing or stale, runs stop with an error")
    elif mode == "auto":
        uses = ("compiled kernels" if n == len(rows) else "Python reference paths" if n == 0 else
                "compiled kernels where current, Python reference paths for the others")
    else:
        uses = "none: " + str(mode_error)
    try:
        every = k.check_every()
    except k.KernelError as exc:
        every = str(exc)
    return {"mode": mode, "compiled": n, "total": len(rows), "runs_use": uses, "guard_every": every,
            "kernels": rows, "compiler": shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")}


_GL_PROBE = """
import sys
from dockbench.telemetry.video import _make_gl_context
ctx = _make_gl_context(64, 64)
print(type(ctx).__module__)
ctx.free()
"""


def rendering(timeout: float = 60.0) -> dict[str, Any]:
    """MUJOCO_GL and whether an offscreen OpenGL context can be made (in a child process)."""

    requested = os.environ.get("MUJOCO_GL", "")
    env = child_env()  # the child imports this dockbench
    try:
        r = subprocess.run([sys.executable, "-c", _GL_PROBE], capture_output=True, text=True, timeout=timeout, env=env)
        if r.returncode == 0:
            backend = r.stdout.strip().splitlines()[-1].rsplit(".", 1)[-1] if r.stdout.strip() else "?"
            ok, detail = True, f"a 64×64 offscreen context made with {backend}"
        else:
            lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
            ok, detail = False, (lines[-1] if lines else f"the probe exited {r.returncode}")
    except subprocess.TimeoutExpired:
        ok, detail = False, f"the probe did not finish in {timeout:g} s"
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or ""
    return {"MUJOCO_GL": requested or None, "display": display or None, "offscreen": ok, "detail": detail}


def ros2() -> dict[str, Any]:
    """rclpy / cyclonedds availability and the transport ``--ros2`` (backend auto) would take."""
    from dockbench.bridges.ros2 import rclpy_available

    rclpy_ok, rclpy_why = rclpy_available()
    cyclone = probe_package("cyclonedds")
    auto = "rclpy" if rclpy_ok else "cyclonedds" if cyclone["ok"] else None
    return {"rclpy": rclpy_ok, "rclpy_error": rclpy_why or None, "cyclonedds": cyclone["ok"],
            "cyclonedds_version": cyclone["version"], "cyclonedds_error": cyclone["error"], "auto": auto,
            "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID"),
            "RMW_IMPLEMENTATION": os.environ.get("RMW_IMPLEMENTATION")}


def report(gl_timeout: float = 60.0) -> dict[str, Any]:
    """Everything :func:`main` prints, as one dictionary."""
    import dockbench

    required, extras = _requirements()
    location = Path(dockbench.__file__).resolve().parent
    checkout = location.parent if (location.parent / "pyproject.toml").is_file() else None
    return {
        "dockbench": {"version": dockbench.__version__, "location": str(location),
                      "checkout": str(checkout) if checkout else None},
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "required": [probe_package(d) for d in required],
        "kernels": kernels(),
        "extras": {name: {"uses": EXTRA_USE.get(name, ""), "packages": [probe_package(d) for d in dists]}
                   for name, dists in extras.items()},
        "rendering": rendering(gl_timeout),
        "ros2": ros2(),
    }


def _pkg(p: dict[str, Any]) -> str:
    return f"{p['package']} {p['version'] or ''}".strip() if p["ok"] else f"{p['package']} ✗ ({p['error']})"


def format_report(r: dict[str, Any]) -> str:
    d, py, k, gl, ros = r["dockbench"], r["python"], r["kernels"], r["rendering"], r["ros2"]
    where = f"checkout {d['checkout']}" if d["checkout"] else d["location"]
    lines = [f"dockbench  {d['version']} from {where}",
             f"python     {py['version']} ({py['executable']}) on {py['platform']}",
             "required   " + ", ".join(_pkg(p) for p in r["required"]), ""]
    lines.append(f"kernels    {k['compiled']}/{k['total']} compiled; runs use: {k['runs_use']}")
    lines.append(f"           DOCKBENCH_KERNELS={k['mode'] or '?'}, guard every {k['guard_every']} control steps "
                 f"(DOCKBENCH_KERNEL_CHECK); C compiler: {k['compiler'] or 'none found'}")
    for row in k["kernels"]:
        why = row["status"].removeprefix(row["kernel"] + " ")  # "is not built (…)", "is stale: …"
        lines.append(f"  {row['kernel']:<30} {'compiled' if row['compiled'] else why}")
    if k["compiled"] < k["total"]:
        lines.append("  to build them: a C compiler and the Python headers (e.g. gcc and python3-dev), then "
                     "pip install -e . again")
    lines.append("")
    lines.append("extras")
    shown: set[str] = set()
    for name in sorted(r["extras"], key=lambda n: n in ("test", "dev")):  # the users' extras first
        extra = r["extras"][name]
        ok = all(p["ok"] for p in extra["packages"])
        state = "ok" if ok else f"missing (pip install -e '.[{name}]')"
        lines.append(f"  {name:<9} {state:<8} {extra['uses']}")
        own = [p for p in extra["packages"] if p["package"] not in shown]
        others = len(extra["packages"]) - len(own)
        shown.update(p["package"] for p in own)
        lines.append("            " + ", ".join(_pkg(p) for p in own) + (f" (+ {others} above)" if others else ""))
    lines.append("")
    mgl = gl["MUJOCO_GL"] or "unset (tries " + ("glfw, " if gl["display"] else "") + "egl, osmesa)"
    lines.append(f"rendering  MUJOCO_GL={mgl}; display {gl['display'] or 'none'}")
    lines.append(f"           offscreen: {'ok, ' if gl['offscreen'] else 'NO: '}{gl['detail']}")
    lines.append("")
    lines.append(f"ROS 2      --ros2 (backend auto) would use: {ros['auto'] or 'nothing (no transport)'}; "
                 f"ROS_DOMAIN_ID={ros['ROS_DOMAIN_ID'] or 'unset (0)'}")
    lines.append(f"  rclpy       {'ok' if ros['rclpy'] else 'no (' + str(ros['rclpy_error']) + ')'}")
    cyclone = (f"ok {ros['cyclonedds_version'] or ''}".strip() if ros["cyclonedds"]
               else f"no ({ros['cyclonedds_error']})")
    lines.append(f"  cyclonedds  {cyclone}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--gl-timeout", type=float, default=60.0, metavar="S",
                    help="seconds to wait for the offscreen OpenGL probe (default 60)")
    args = ap.parse_args(argv)
    if not args.gl_timeout > 0:
        ap.error(f"--gl-timeout: must be > 0, got {args.gl_timeout}")
    r = report(args.gl_timeout)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0 if all(p["ok"] for p in r["required"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
