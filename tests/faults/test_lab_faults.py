"""The lab as an attacker and an impatient user meet it, on a real two-node Ray cluster on this
machine (two ``aiot lab`` hosts with their own aiot homes, as tests/integration/test_lab.py).

- A Ray client without the lab's token (an empty HOME, no aiot state) is refused, on loopback
  too, and runs nothing; with the token copied from the head it runs (the token decides).
- Every socket the lab's Ray processes listen on is on the address chosen with ``--bind``.
- ``lab status`` and ``sweep --lab`` with no head (never started, killed -9, a port that
  accepts and says nothing) answer one line within seconds, without Ray's C++ warnings;
  Ctrl-C and SIGTERM end them at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the lab needs aiot[lab] (Ray)")
pytestmark = pytest.mark.slow

#: Ray's C++ log lines ("[2026-11-26 10:24:32,717 W 9266 9266] gcs_client.cc:210: ...").
CPP_LOG = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+ [A-Z] \d+ \d+\]", re.MULTILINE)

#: A plain Ray client, as anyone on the network could write it: connect, run a task that
#: leaves a file, report. It keeps a loopback address as given (as aiot does), or Ray would
#: dial the machine's external address, where the lab does not listen at all.
INTRUDER = textwrap.dedent("""
    import os, sys
    import ray
    from ray._private import services

    services.resolve_ip_for_localhost = lambda host: host
    try:
        ray.init(address=sys.argv[1], log_to_driver=False)

        @ray.remote
        def intrude(path):
            with open(path, "w") as fh:
                fh.write(str(os.getuid()))
            return os.getuid()

        print("RAN", ray.get(intrude.remote(sys.argv[2]), timeout=120))
    except Exception as exc:
        print("REFUSED", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
""")


class Host:
    """One lab host: its own aiot home (state, inventory, cache) and HOME, driven by the CLI."""

    def __init__(self, root: Path, name: str) -> None:
        self.name, self.home = name, root / name
        (self.home / "home").mkdir(parents=True)
        self.env = {**os.environ, "HOME": str(self.home / "home"), "AIOT_STATE_DIR": str(self.home / "state"),
                    "AIOT_INVENTORY": str(self.home / "devices.toml"), "AIOT_RESULTS_DIR": str(self.home / "results"),
                    "AIOT_LOCAL_WORKDIR": str(self.home / "local"), "AIOT_NO_PROGRESS": "1"}
        for name_ in ("AIOT_LAB_TOKEN_FILE", "AIOT_LAB", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
            self.env.pop(name_, None)

    def run(self, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "aiot", *args], env={**self.env, **env},
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def aiot(self, *args: str, **env: str) -> str:
        done = self.run(*args, **env)
        assert done.returncode == 0, f"{self.name}: aiot {' '.join(args)}: {done.stderr[-2000:]}"
        return done.stdout

    @property
    def token(self) -> Path:
        return Path(self.env["AIOT_STATE_DIR"]) / "lab" / "auth_token"

    def node_pid(self) -> int:
        (state,) = (Path(self.env["AIOT_STATE_DIR"]) / "lab").glob("node-*.json")
        return json.loads(state.read_text())["pid"]

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "aiot", "lab", "stop"], env=self.env, capture_output=True,
                       timeout=120)


def free_port() -> int:
    from aiot.host.emulator.ssh import free_port as port

    return port()


def start_lab(tmp_path: Path, bind: str = "127.0.0.1"):
    """``alpha`` starts the head on ``bind``; its token file is copied to ``beta``'s host as a
    user would (scp), and ``beta`` joins with it."""
    port = free_port()
    alpha, beta = Host(tmp_path, "alpha"), Host(tmp_path, "beta")
    alpha.aiot("lab", "start", "--head", "--port", str(port), "--bind", bind)
    address = f"{bind}:{port}"
    copied = beta.home / "from-alpha" / "lab-token"
    copied.parent.mkdir()
    shutil.copyfile(alpha.token, copied)
    beta.aiot("lab", "join", address, "--bind", bind, "--token", str(copied))
    return address, alpha, beta


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One two-node lab for the module's tests that only knock on it (starting one takes longer
    than such a test). Its hosts have their own HOME and aiot state (:class:`Host`), so they need
    nothing of a test's isolated environment. It is up until the module ends: its tests come
    last in the file, as a second lab on this machine (the tests that start their own heads)
    would fight it for Ray's fixed ports."""
    address, alpha, beta = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield address, alpha, beta
    finally:
        beta.stop()
        alpha.stop()


def intrude(tmp_path: Path, address: str, **env: str) -> tuple[str, Path]:
    """Run :data:`INTRUDER` with an empty HOME and no aiot state; returns its verdict line
    and the file its task would leave."""
    home = tmp_path / f"intruder-home-{time.monotonic_ns()}"
    home.mkdir()
    script = tmp_path / "intruder.py"
    script.write_text(INTRUDER)
    marker = tmp_path / f"intruded-{time.monotonic_ns()}"
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
             # Ray's own retries only, sooner: refusal is what is tested, not its patience.
             "RAY_gcs_server_port_wait_time_s": "4", **env}
    done = subprocess.run([sys.executable, str(script), address, str(marker)], env=clean, cwd=home,
                          capture_output=True, text=True, timeout=300)
    verdict = [line for line in done.stdout.splitlines() if line.startswith(("RAN", "REFUSED"))]
    assert verdict, (done.returncode, done.stdout[-1000:], done.stderr[-2000:])
    return verdict[-1], marker


def listening_sockets(pids: set[int]) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every TCP socket that a process of ``pids`` listens on,
    read from /proc (the kernel's own tables, not Ray's account of itself)."""
    inodes: dict[str, int] = {}
    for pid in pids:
        with_fds = Path(f"/proc/{pid}/fd")
        try:
            for fd in with_fds.iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:  # the process ended meanwhile
            continue
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc writes each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((socket.inet_ntop(family, raw), int(hex_port, 16), inodes[inode]))
    return found


def session_pids(sid: int) -> set[int]:
    from aiot.host.lab.node import _session_members

    return set(_session_members(sid))


def _only_on(address: str, sockets: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    allowed = {address, f"::ffff:{address}"}
    return [s for s in sockets if s[0] not in allowed]


def _external_address() -> str | None:
    """This machine's address on its default route, if it has one other than loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
            found = probe.getsockname()[0]
        except OSError:
            return None
    return None if found.startswith("127.") else found


@pytest.mark.fault("Ray listens on every interface despite --bind (the lab network's address)")
def test_a_head_on_the_lab_network_listens_there_only(tmp_path):
    external = _external_address()
    if external is None:
        pytest.skip("this machine has no address besides loopback")
    address, alpha, beta = start_lab(tmp_path, bind=external)
    try:
        time.sleep(2)
        pids = session_pids(alpha.node_pid()) | session_pids(beta.node_pid())
        sockets = listening_sockets(pids)
        assert len(sockets) >= 5 and _only_on(external, sockets) == [], sockets
        rows = json.loads(alpha.aiot("lab", "status", "--address", address, "--json"))
        assert {r["address"] for r in rows} == {external}, rows
    finally:
        beta.stop()
        alpha.stop()


def one_line_within(done: subprocess.CompletedProcess, seconds: float, took: float, *fragments: str,
                    code: int = 1) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert took < seconds, took
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert not CPP_LOG.search(done.stderr) and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def timed(host: Host, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = host.run(*args, timeout=180)
    return done, time.monotonic() - started


@pytest.mark.fault("lab status / sweep --lab with no head ever started")
def test_no_head_at_the_address_is_one_line_within_seconds(tmp_path):
    driver = Host(tmp_path, "driver")
    address = f"127.0.0.1:{free_port()}"
    done, took = timed(driver, "lab", "status", "--address", address)
    one_line_within(done, 15, took, f"no lab head at {address} (connection refused)")
    done, took = timed(driver, "sweep", "--lab", address, "-d", "dev-a", "-m", "tiny_cnn", "-f", "onnx")
    one_line_within(done, 60, took, f"no lab head at {address}")
    token = tmp_path / "token"
    token.write_text("a" * 64)
    done, took = timed(driver, "lab", "join", address, "--token", str(token))
    one_line_within(done, 15, took, f"no lab head at {address}")


@pytest.mark.fault("lab status / sweep --lab after the head was killed -9")
def test_a_head_killed_with_sigkill_is_one_line_within_seconds(tmp_path):
    from aiot.host.lab.node import kill_session

    port = free_port()
    alpha = Host(tmp_path, "alpha")
    alpha.aiot("lab", "start", "--head", "--port", str(port))
    try:
        pid = alpha.node_pid()
        for member in session_pids(pid):
            with contextlib.suppress(ProcessLookupError):  # a short-lived member ended first
                os.kill(member, signal.SIGKILL)
        address = f"127.0.0.1:{port}"
        done, took = timed(alpha, "lab", "status", "--address", address)
        one_line_within(done, 15, took, f"no lab head at {address}")
        done, took = timed(alpha, "lab", "status")  # no address: the node this host started
        one_line_within(done, 15, took, f"the lab node this host started ({address}) is no longer running",
                        code=2)
        done, took = timed(alpha, "sweep", "--lab", address, "-d", "dev-a", "-m", "tiny_cnn", "-f", "onnx")
        one_line_within(done, 60, took, f"no lab head at {address}")
    finally:
        kill_session(alpha.node_pid())
        alpha.stop()


class SilentPeer:
    """A port that accepts connections and never says a word (a wrong service, a firewall
    that swallows, a head whose process is stopped)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_peer():
    peer = SilentPeer()
    yield peer
    peer.close()


@pytest.mark.fault("lab status against a port that accepts and never answers")
def test_a_silent_peer_is_one_line_within_seconds(tmp_path, silent_peer):
    driver = Host(tmp_path, "driver")
    token = tmp_path / "token"
    token.write_text("a" * 64)
    done, took = timed(driver, "lab", "status", "--address", f"127.0.0.1:{silent_peer.port}", "--token", str(token))
    one_line_within(done, 30, took, "did not answer as a Ray head")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.fault("Ctrl-C / SIGTERM while the lab does not answer")
def test_ctrl_c_and_sigterm_end_a_hanging_connect_at_once(tmp_path, silent_peer, signum, code):
    driver = Host(tmp_path, "driver")
    token = tmp_path / "token"
    token.write_text("a" * 64)
    proc = subprocess.Popen([sys.executable, "-m", "aiot", "lab", "status", "--address",
                             f"127.0.0.1:{silent_peer.port}", "--token", str(token)],
                            env=driver.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Once aiot probed the port and opened Ray's connection (2 connections), it waits on the peer.
    deadline = time.monotonic() + 60
    while len(silent_peer.held) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    assert proc.poll() is None and len(silent_peer.held) >= 2, proc.communicate()
    sent = time.monotonic()
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code and time.monotonic() - sent < 3, (proc.returncode, err)
    assert "Traceback" not in err and not CPP_LOG.search(err), err


@pytest.mark.fault("a Ray client without the lab's token, on loopback")
def test_a_client_without_the_token_is_refused_and_runs_nothing(lab, tmp_path):
    address, alpha, beta = lab
    # No token at all (RAY_AUTH_MODE unset: the client does not even know there is one).
    verdict, marker = intrude(tmp_path, address)
    assert verdict.startswith("REFUSED") and not marker.exists(), verdict
    # Token mode with a guessed token, and a made-up token in Ray's shared default path.
    wrong = tmp_path / "guessed"
    wrong.write_text("0" * 64)
    verdict, marker = intrude(tmp_path, address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong))
    assert verdict.startswith("REFUSED") and not marker.exists(), verdict
    verdict, marker = intrude(tmp_path, address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="1" * 64)
    assert verdict.startswith("REFUSED") and not marker.exists(), verdict
    # The same client with the head's token gets in: the token is what refused it above.
    verdict, marker = intrude(tmp_path, address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(alpha.token))
    assert verdict == f"RAN {os.getuid()}" and marker.exists(), verdict

    # The token lives in aiot's state, private, never in Ray's shared ~/.ray/auth_token.
    for host in (alpha, beta):
        assert stat.S_IMODE(host.token.stat().st_mode) == 0o600
        assert stat.S_IMODE(host.token.parent.stat().st_mode) == 0o700
        assert not (Path(host.env["HOME"]) / ".ray" / "auth_token").exists()
    assert beta.token.read_text() == alpha.token.read_text()

    # aiot's own driver: refused without the token, in one line; let in with it.
    stranger = Host(tmp_path, "stranger")
    refused = stranger.run("lab", "status", "--address", address)
    assert refused.returncode == 2 and "this host has no lab token" in refused.stderr, refused.stderr
    refused = stranger.run("lab", "status", "--address", address, AIOT_LAB_TOKEN_FILE=str(wrong))
    assert refused.returncode == 1 and "refused this host's token" in refused.stderr, refused.stderr
    assert not CPP_LOG.search(refused.stderr) and "Traceback" not in refused.stderr
    # A node joining with a wrong token: one line, in seconds, and the wrong token is not kept.
    started = time.monotonic()
    refused = stranger.run("lab", "join", address, "--token", str(wrong))
    assert refused.returncode == 1 and "refused this host's token" in refused.stderr, refused.stderr
    assert time.monotonic() - started < 30 and not stranger.token.exists()
    assert not list((stranger.home / "state" / "lab").glob("node-*.json"))
    rows = json.loads(stranger.aiot("lab", "status", "--address", address, "--json",
                                    AIOT_LAB_TOKEN_FILE=str(alpha.token)))
    assert len(rows) == 2 and all(r["alive"] for r in rows)
    # Both nodes registered under the chosen address, not the machine's external one.
    assert {r["address"] for r in rows} == {"127.0.0.1"}, rows


@pytest.mark.fault("Ray listens on every interface despite --bind (loopback)")
def test_every_listening_socket_of_the_lab_is_on_the_chosen_address(lab):
    address, alpha, beta = lab
    port = int(address.rpartition(":")[2])
    # Workers come and go: let the nodes settle, and count a worker that exists now.
    time.sleep(2)
    pids = session_pids(alpha.node_pid()) | session_pids(beta.node_pid())
    sockets = listening_sockets(pids)
    assert any(p == port for _, p, _ in sockets), sockets  # the head's GCS is among them
    assert len(sockets) >= 5, sockets  # GCS, and each node's raylet (2 ports) at least
    assert _only_on("127.0.0.1", sockets) == [], sockets
