"""A campaign on a two-node Ray cluster started with ``ray start`` on loopback (issue 36, item 5): the head
and a worker node, each its own ``ray start`` with its own temp dir, on 127.0.0.2 and 127.0.0.3, token
authentication on (a token file of this test, given to the nodes and the driver by ``RAY_AUTH_MODE=token``
and ``RAY_AUTH_TOKEN_PATH``: docs/campaigns.md, "A Ray cluster").

Why not 127.0.0.1: Ray rewrites ``127.0.0.1``/``localhost`` (in ``--node-ip-address`` and in an address) to
the machine's network address (``ray._private.services.resolve_ip_for_localhost``); any other address of
127.0.0.0/8 is loopback as well and is kept as given.

The cluster is ended by its process groups (each ``ray start`` runs in a new session, and every process of
its node stays in its group), never by ``ray stop``, which ends every Ray process on the machine by name.
Skipped, with the reason, when Ray is not installed, is older than token authentication (2.52), or the
cluster does not start here.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from dockbench.sim.campaign import load_campaign, run_campaign
from dockbench.sim.campaign.executors import check_ray_address, make_executor, package_root
from dockbench.sim.errors import DockbenchError
from dockbench.telemetry.run import Run, first_difference

from tests.test_campaign import _campaign, _stable, _table

ray = pytest.importorskip("ray", reason="Ray is not installed (pip extra 'ray')")

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
CAMPAIGN = str(package_root() / "experiments" / "campaign.py")
pytestmark = pytest.mark.slow


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())


def _free_port() -> int:
    """A TCP port free on every interface now (the GCS listens on all of them)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _procs() -> dict[int, tuple[str, int, int]]:
    """Every process now: pid → (state, ppid, pgid), from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (fields[0], int(fields[1]), int(fields[2]))
    return out


def _group(pgid: int) -> list[int]:
    """The live processes of a node: those of process group ``pgid`` (its ``ray start``'s) and their
    descendants (Ray starts its workers in groups of their own), zombies excluded."""
    procs = _procs()
    members = {pid for pid, (_, _, g) in procs.items() if g == pgid}
    grew = True
    while grew:
        more = {pid for pid, (_, ppid, _) in procs.items() if ppid in members} - members
        members |= more
        grew = bool(more)
    return sorted(pid for pid in members if procs[pid][0] != "Z")


def _peers(pids: list[int]) -> set[str]:
    """The remote addresses of the TCP connections of ``pids`` (their socket inodes in /proc/net/tcp{,6})."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    peers = set()
    for table, size in (("tcp", 4), ("tcp6", 16)):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[9] not in inodes or f[3] == "0A":  # 0A = listening: no peer
                continue
            raw = bytes.fromhex(f[2].split(":")[0])
            # /proc stores the address as 32-bit words in host (little-endian) order
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))
            addr = ipaddress.ip_address(packed)
            peers.add(str(getattr(addr, "ipv4_mapped", None) or addr))
    return peers


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _end_group(pgid: int, grace: float = 5.0) -> list[int]:
    """SIGTERM a node's processes (:func:`_group`), then SIGKILL what is left after ``grace`` s; the
    processes still alive after that."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        _signal(_group(pgid), sig)
        deadline = time.monotonic() + wait
        while _group(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _group(pgid):
            return []
    return _group(pgid)


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.token = root / "token"
        self.token.write_text(secrets.token_hex(32))
        self.token.chmod(0o600)
        self.port = _free_port()
        self.address = f"{HEAD_IP}:{self.port}"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("RAY_ADDRESS", "RAY_AUTH", "DOCKBENCH_ALLOW"))}
        self.env.update({
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token), "RAY_USAGE_STATS_ENABLED": "0",
            # a dead node is declared dead after ~2 s instead of ~30 s (the retried trials start sooner)
            "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
            "RAY_health_check_failure_threshold": "3",
        })
        self.groups: dict[str, int] = {}

    def start(self, name: str, *args: str) -> None:
        ray_cli = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
        log = (self.root / f"{name}.log").open("w")
        proc = subprocess.Popen([ray_cli, "start", *args, "--temp-dir", str(self.root / name),
                                 "--disable-usage-stats"], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its node's processes: one group, ours to end
        self.groups[name] = proc.pid
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0:
            tail = (self.root / f"{name}.log").read_text().strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"`ray start` of the {name} node: exit {rc}: {tail[0][:200]}")

    def campaign(self, path: Path, out: Path, *extra: str, address: str | None = None,
                 **env: str) -> subprocess.Popen:
        """experiments/campaign.py on this cluster (or ``address``), the driver with ``env`` on top of the
        nodes' environment (the token's)."""
        e = {**self.env, "PYTHONPATH": str(package_root()), **env}
        return subprocess.Popen([sys.executable, CAMPAIGN, str(path), "--executor", "ray", "--address",
                                 address or self.address, "--out", str(out), "--no-progress", "--no-figures", *extra],
                                env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self) -> list[int]:
        left = []
        for pgid in self.groups.values():
            left += _end_group(pgid)
        return left


@pytest.fixture(scope="module")
def cluster():
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc to find and end the cluster's processes (Linux)")
    if _version(ray.__version__) < (2, 52):
        pytest.skip(f"Ray {ray.__version__} has no token authentication (2.52+)")
    if not (shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")):
        pytest.skip("the `ray` command is not on the PATH")
    root = Path(tempfile.mkdtemp(prefix="dbray", dir="/tmp"))  # short: Ray's socket paths are limited
    c = Cluster(root)
    try:
        c.start("head", "--head", "--node-ip-address", HEAD_IP, "--port", str(c.port), "--num-cpus", "1",
                "--include-dashboard", "false", "--dashboard-port", str(_free_port()),
                "--dashboard-agent-listen-port", str(_free_port()))
        c.start("worker", "--address", c.address, "--node-ip-address", WORKER_IP, "--num-cpus", "1",
                "--dashboard-agent-listen-port", str(_free_port()))
    except (RuntimeError, OSError) as exc:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"a loopback Ray cluster does not start here: {exc}")
    yield c
    left = c.stop()
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"processes of the test's Ray cluster still alive: {[(p, _comm(p)) for p in left]}"


def _watch(proc: subprocess.Popen, groups: dict[str, int], period: float = 0.1) -> dict[int, str]:
    """Until ``proc`` ends: which node (``groups``: name → process group) each process belonged to."""
    seen: dict[int, str] = {}
    while proc.poll() is None:
        for name, pgid in groups.items():
            seen.update(dict.fromkeys(_group(pgid), name))
        time.sleep(period)
    return seen


def _one_line_error(proc: subprocess.Popen, timeout: float = 15.0) -> str:
    """The CLI ends within ``timeout`` s with exit 1 and one line on stderr (no traceback, no warnings)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"no answer within {timeout} s; stderr so far: {err[-500:]}")
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: --address"), err[-2000:]
    return lines[0]


def test_a_closed_port_is_one_line_at_once() -> None:
    """No cluster needed: nothing listens on a fresh port of 127.0.0.2 (ray.init alone retries for minutes)."""
    port = _free_port()
    with pytest.raises(DockbenchError, match=r"no Ray cluster answers there \(connection refused") as err:
        check_ray_address(f"{HEAD_IP}:{port}")
    assert "\n" not in str(err.value)
    with pytest.raises(DockbenchError, match="Invalid address format"):
        check_ray_address("no-port-here")
    for bad in (f"{HEAD_IP}:x", f"{HEAD_IP}:99999"):
        with pytest.raises(DockbenchError, match="give HOST:PORT with a port 1–65535"):
            check_ray_address(bad)


def test_an_unauthorised_or_unreachable_address_is_one_line_within_seconds(cluster, tmp_path) -> None:
    path = _campaign(tmp_path)
    bad = tmp_path / "bad_token"
    bad.write_text(secrets.token_hex(32))
    wrong = _one_line_error(cluster.campaign(path, tmp_path / "o1", RAY_AUTH_TOKEN_PATH=str(bad)))
    assert "refused this driver" in wrong and "is not the cluster's" in wrong and str(bad) in wrong
    none = _one_line_error(cluster.campaign(path, tmp_path / "o2", RAY_AUTH_MODE="disabled"))
    assert "sends no token" in none and "RAY_AUTH_MODE=token" in none
    proc = cluster.campaign(path, tmp_path / "o3", address=f"{HEAD_IP}:{_free_port()}")
    assert "no Ray cluster answers there" in _one_line_error(proc)
    assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3"))  # refused before any folder


def test_a_campaign_on_the_cluster_equals_the_local_pool_and_survives_a_node_killed_mid_run(
        cluster, tmp_path, monkeypatch) -> None:
    """12 trials with a plugin (allowed by the driver's --allow-plugins only: the cluster's nodes were started
    without the opt-in, so it reaches their workers with the job's runtime environment): the cluster's
    results table equals the local pool's (every column but the timing ones) and every trial's telemetry
    is equal bit for bit; the trials ran on both nodes; every connection of the cluster's processes is on
    loopback. Then the same campaign again, the worker node SIGKILLed (all its processes) while it runs a
    trial: Ray retries that trial on the head, the campaign completes (exit 0) with the same table."""
    plugin = tmp_path / "noop_plugin.py"
    plugin.write_text("MARK = 'dockbench test plugin: registers nothing'\n")
    path = _campaign(tmp_path, name="twelve", samples=3)
    import yaml

    data = yaml.safe_load(path.read_text())
    data["set"]["plugins"] = [str(plugin)]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv("DOCKBENCH_ALLOW_PLUGINS", "1")  # the local pool's workers inherit it
    t0 = time.monotonic()
    pool_ex = make_executor("local", jobs=2)
    try:
        pool = run_campaign(load_campaign(path), tmp_path / "pool", pool_ex, progress=None, figures=False)
    finally:
        pool_ex.close()
    ref = _table(pool)
    print(f"local pool {time.monotonic() - t0:.1f} s")
    assert len(ref) == 12 and {r["status"] for r in ref} == {"completed"}, {r["message"] for r in ref}

    t0 = time.monotonic()
    proc = cluster.campaign(path, tmp_path / "ray", "--allow-plugins")
    seen = _watch(proc, cluster.groups)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    got = _table(tmp_path / "ray" / "twelve")
    assert _stable(got) == _stable(ref)
    for r in ref:
        diff = first_difference(Run.load(pool.out_dir / r["path"]), Run.load(tmp_path / "ray" / "twelve" / r["path"]))
        assert diff is None, (r["trial"], diff)
    # both nodes ran trials (the worker pids of the table, seen in their node's process group during the run)
    assert {seen.get(int(r["worker"].rsplit(":", 1)[1])) for r in got} == set(cluster.groups), seen
    print(f"cluster run {time.monotonic() - t0:.1f} s")
    # every connection of the cluster's processes is on loopback (the listening sockets have no peer)
    peers = _peers([pid for pgid in cluster.groups.values() for pid in _group(pgid)])
    assert peers and all(ipaddress.ip_address(ip).is_loopback for ip in peers), peers

    # the worker node killed while it runs a trial
    t0 = time.monotonic()
    worker = cluster.groups["worker"]
    proc = cluster.campaign(path, tmp_path / "kill", "--allow-plugins")
    done = lambda: len(list((tmp_path / "kill" / "twelve" / "trials").glob("*/*/trial.json")))  # noqa: E731
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        running = [p for p in _group(worker) if _comm(p).startswith("ray::run_trial")]
        if running and done() >= 1:
            _signal(_group(worker), signal.SIGKILL)  # the node and its workers at once
            break
        time.sleep(0.02)
    else:
        proc.kill()
        pytest.fail(f"the worker node never ran a trial while the campaign ran: {proc.communicate()[1][-2000:]}")
    finished_at_kill = done()
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    assert finished_at_kill < 12 and "12/12 trials" in out, (finished_at_kill, out)
    assert _stable(_table(tmp_path / "kill" / "twelve")) == _stable(ref)
    deadline = time.monotonic() + 10
    while _group(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group(worker), [(p, _comm(p)) for p in _group(worker)]
    print(f"kill run {time.monotonic() - t0:.1f} s; {finished_at_kill} trials done at the kill")
