"""Ray env workers (brawlkit/distributed, docs/distributed.md).

One local Ray instance serves the module (starting Ray costs tens of seconds on a
loaded 2-core box); the two-node test runs its own head + second node as process
groups of their own and a separate driver process, and kills them in teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import process_gone

ray = pytest.importorskip("ray", reason="Ray is the optional extra: make ray (requirements.txt)")

from brawlkit.distributed.ray_vecenv import RayVecEnv, split_envs  # noqa: E402

ENV_KW: dict[str, Any] = {"opponent": "cpu:3", "max_episode_steps": 25}


def test_split_envs() -> None:
    assert split_envs(5, 2) == [slice(0, 3), slice(3, 5)]
    assert split_envs(4, 4) == [slice(i, i + 1) for i in range(4)]
    with pytest.raises(ValueError, match="ray_workers"):
        split_envs(2, 3)


def test_patient_ray_env_fills_only_what_is_unset() -> None:
    """Ray's start-up waits for a busy machine: set where the caller has not, and under
    names this Ray reads (its RayConfig answers with our value, not its default)."""
    from brawlkit.distributed.cluster import PATIENT_RAY_ENV, patient_ray_env

    env = patient_ray_env({"RAY_raylet_start_wait_time_s": "45", "HOME": "/x"})
    assert env["RAY_raylet_start_wait_time_s"] == "45" and env["HOME"] == "/x"
    assert env["RAY_worker_register_timeout_seconds"] == \
        PATIENT_RAY_ENV["RAY_worker_register_timeout_seconds"]
    r = subprocess.run([sys.executable, "-c", "import ray._raylet as r; "
                        "print(r.Config.worker_register_timeout_seconds())"],
                       env=patient_ray_env(), capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == [PATIENT_RAY_ENV["RAY_worker_register_timeout_seconds"]], r.stderr


def test_step_reply_must_answer_the_request_just_sent() -> None:
    """The trainer's side of the step protocol, without Ray: a reply is read only if it
    answers the request just sent (kind and sequence number); a stale one, an error
    report or a hang-up makes the worker lost, its connection closed."""
    from brawlkit.distributed.channel import ERROR, STEP, Channel, decode_step, encode_step

    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    parts = encode_step(obs, np.array([0.5, -1], np.float32), np.array([True, False]),
                        np.array([False, True]), [{"a": 1}, {"b": None}])
    o, r, te, tr, inf = decode_step(memoryview(b"".join(parts)), 2, (3,), 3)
    np.testing.assert_array_equal(o, obs)
    assert r.tolist() == [0.5, -1] and te.tolist() == [True, False] and tr.tolist() == [False, True]
    assert inf == [{"a": 1}, {"b": None}]

    def venv_with(peer_frames: list[tuple[int, int, bytes]]) -> tuple[Any, Any]:
        a, b = socket.socketpair()
        rv = object.__new__(RayVecEnv)  # only the reply logic: no actors
        rv.channels, rv._seq, rv._dead, rv._why, rv._lost_at = [Channel(a)], 7, set(), {}, {}
        peer = Channel(b)
        for kind, seq, body in peer_frames:
            peer.send(kind, seq, body)
        return rv, peer

    rv, peer = venv_with([(STEP, 7, b"ok")])
    assert bytes(rv._reply(0, STEP, time.monotonic() + 5)) == b"ok" and not rv._dead
    rv, peer = venv_with([(STEP, 6, b"late")])  # the answer to an earlier request
    assert rv._reply(0, STEP, time.monotonic() + 5) is None
    assert rv._dead == {0} and "#6" in rv._why[0] and rv.channels[0].closed
    rv, peer = venv_with([(ERROR, 7, b"ServerError: server died")])
    assert rv._reply(0, STEP, time.monotonic() + 5) is None and "server died" in rv._why[0]
    rv, peer = venv_with([])
    peer.close()
    assert rv._reply(0, STEP, time.monotonic() + 5) is None and "closed" in rv._why[0]
    rv, peer = venv_with([])
    t0 = time.monotonic()
    assert rv._reply(0, STEP, time.monotonic() + 0.3) is None and "timeout" in rv._why[0]
    assert time.monotonic() - t0 < 2


def test_a_local_node_that_misses_ray_inits_window_is_started_again(monkeypatch, capsys) -> None:
    """ray.init's wait for a local node is a fixed 30 s (Ray 2.60), which a loaded 2-core
    machine can miss: the connection shuts the half-started node down and starts another,
    up to LOCAL_START_ATTEMPTS times; any other error is raised at once."""
    import ray

    from brawlkit.distributed import cluster

    calls: list[str] = []
    failures = iter([Exception("The current node timed out during startup. This could happen "
                               "because some of the raylet failed to startup"), None])

    def init(**kw: Any) -> None:
        calls.append("init")
        err = next(failures)
        if err is not None:
            raise err

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    conn = cluster.RayConnection("local", num_cpus=1)
    assert conn.started and calls == ["init", "shutdown", "init"]
    assert "starting it again (2/3)" in capsys.readouterr().err
    failures = iter([Exception("The current node timed out during startup")] * 3)
    with pytest.raises(Exception, match="timed out during startup"):
        cluster.RayConnection("local", num_cpus=1)
    failures = iter([Exception("object store: no space")])
    calls.clear()
    with pytest.raises(Exception, match="no space"):
        cluster.RayConnection("local", num_cpus=1)
    assert calls == ["init"]


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    from brawlkit.distributed.cluster import RayConnection

    conn = RayConnection("local", num_cpus=2)
    try:
        yield
    finally:
        conn.close()


def _local_venv(n: int) -> tuple[Any, Any]:
    from brawlkit.env import BrawlpitEnv
    from brawlkit.env.rewards import make_reward
    from brawlkit.env.vecenv import BrawlpitVecEnv
    from brawlkit.wire.server_process import ServerGroup

    group = ServerGroup(n, servers=1)

    def fn(i: int) -> Any:
        return lambda: BrawlpitEnv(reward=make_reward("tiered"), server=group.server_for(i),
                                   mode="lockstep", **ENV_KW)

    return BrawlpitVecEnv([fn(i) for i in range(n)]), group


@pytest.mark.servers
def test_ray_vecenv_steps_like_local(ray_local: None) -> None:
    """Same spaces; same seeds and actions give the same observations, rewards, ends
    and terminal observations (lockstep) as the in-process vec env."""
    n = 4
    local, group = _local_venv(n)
    rv = RayVecEnv(n, 2, env_kwargs=ENV_KW, reward="tiered")
    try:
        assert rv.observation_space == local.observation_space
        assert rv.action_space == local.action_space
        assert [i["n_envs"] for i in rv.worker_info] == [2, 2]
        local.seed(11)
        rv.seed(11)
        np.testing.assert_array_equal(rv.reset(), local.reset())
        rng = np.random.default_rng(3)
        ends = 0
        for _ in range(60):
            a = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
            lo, lr, ld, li = local.step(a)
            ro, rr, rd, ri = rv.step(a)
            np.testing.assert_array_equal(ro, lo)
            np.testing.assert_array_equal(rr, lr)
            np.testing.assert_array_equal(rd, ld)
            for k in range(n):
                if not ld[k]:  # the local batched lane's per-step infos are empty
                    assert li[k] == {} or li[k].keys() <= ri[k].keys()
                    continue
                assert ri[k]["TimeLimit.truncated"] == li[k]["TimeLimit.truncated"]
                assert ri[k]["opponent"] == li[k]["opponent"] == "cpu:3"
                if ld[k]:
                    ends += 1
                    np.testing.assert_array_equal(ri[k]["terminal_observation"],
                                                  li[k]["terminal_observation"])
        assert ends >= n * 2  # every env went through at least two auto-resets
        assert rv.env_method("get_wrapper_attr", "input_layout") == [2] * n
        assert rv.get_attr("action_repeat") == [4] * n
    finally:
        rv.close()
        local.close()
        group.close()


@pytest.mark.servers
@pytest.mark.training
def test_killed_worker_replaced_envs_truncated_training_continues(ray_local: None) -> None:
    """SIGKILL a worker's process mid-rollout: its envs end truncated (bootstrapped from
    the last observation they gave), the other worker's do not, a new worker (fresh
    server) takes the slice, and PPO finishes its run."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecMonitor

    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model

    rv = RayVecEnv(4, 2, env_kwargs={"opponent": "cpu:3"}, reward="tiered")
    victim = dict(rv.worker_info[0])
    seen: dict[str, Any] = {}

    class Killer(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.k = 0

        def _on_step(self) -> bool:
            self.k += 1
            if self.k == 10:  # mid-rollout (n_steps 32): kill worker 0's process
                seen["last_obs"] = self.locals["new_obs"].copy()
                os.kill(victim["pid"], signal.SIGKILL)
            elif self.k == 11:
                seen["dones"] = self.locals["dones"].copy()
                seen["infos"] = [dict(i) for i in self.locals["infos"]]
            return True

    try:
        cfg = TrainConfig(n_envs=4, n_steps=32, batch_size=64, n_epochs=1,
                          steps_per_generation=128)
        model = build_model(cfg, VecMonitor(rv))
        model.learn(128, callback=Killer())  # one rollout, the update after the loss included
        assert model.num_timesteps >= 128
        assert len(rv.events) == 1 and rv.events[0]["worker"] == 0
        assert rv.events[0]["envs"] == [0, 1]
        assert rv.worker_info[0]["pid"] != victim["pid"]
        assert process_gone(victim["pid"]) and all(process_gone(p) for p in victim["server_pids"])
        # its private pool directory went with it (removed by the next worker on the machine)
        assert not list(Path(tempfile.gettempdir()).glob(f"bk_worker*-pid{victim['pid']}-*"))
        dones, infos = seen["dones"], seen["infos"]
        for i in (0, 1):
            assert dones[i] and infos[i]["worker_lost"] and infos[i]["TimeLimit.truncated"]
            np.testing.assert_array_equal(infos[i]["terminal_observation"], seen["last_obs"][i])
            assert infos[i]["outcome"] is None  # no result reaches the payoff
        for i in (2, 3):
            assert "worker_lost" not in infos[i]
        # the replacement keeps stepping: the next steps come back from both workers
        rv.reset()
        o, r, d, _ = rv.step(np.zeros((4, 6), np.float32))
        assert o.shape == (4, rv.observation_space.shape[0]) and not rv._dead
    finally:
        rv.close()


@pytest.mark.servers
@pytest.mark.training
def test_train_ray_writes_a_checkpoint(ray_local: None, tmp_path: Path, capsys: Any) -> None:
    """``python -m brawlkit train --ray`` (in this process: it uses the module's Ray)."""
    from brawlkit.training.cli import main

    rc = main(["--role", "main", "--ray", "--ray-workers", "2", "--n-envs", "4",
               "--generations", "1", "--steps-per-generation", "128", "--n-steps", "32",
               "--batch-size", "64", "--n-epochs", "1", "--eval-levels", "1",
               "--eval-episodes", "1", "--max-episode-steps", "40",
               "--runs-root", str(tmp_path), "--no-progress", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ckpt = Path(res["final_checkpoint"])
    assert ckpt.is_file() and res["total_timesteps"] >= 128
    meta = json.loads(ckpt.with_suffix(".json").read_text())
    assert meta["config"]["ray"] == "local" and meta["config"]["ray_workers"] == 2
    progress = (ckpt.parent / "progress.csv").read_text().splitlines()[0].split(",")
    assert "ray/worker_losses" in progress


def _knock(address: list[Any], frame: bytes) -> bytes:
    """Connect to a worker's step port, send ``frame``, return what comes back before
    the worker hangs up (b"" = hung up without a word)."""
    with socket.create_connection(tuple(address), timeout=15) as s:
        s.sendall(frame)
        try:
            return s.recv(1024)
        except ConnectionResetError:
            return b""


def _stop(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it shows it stopped: ``kill`` only
    queues the signal, and "the worker cannot answer" is then checked, not assumed (a
    stopped worker once answered in CI; the assertion below prints what it saw)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while True:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:  # the state is the field after the parenthesised command name
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue
        if states and all(st in "tT" for st in states):
            return
        assert time.monotonic() < deadline, f"pid {pid} not stopped after 10 s: {states}"
        time.sleep(0.01)


@pytest.mark.servers
def test_step_connection_token_and_lost_worker_detection(ray_local: None) -> None:
    """The per-step socket: a stranger without the token is hung up on and cannot step
    the envs; a worker killed while the trainer waits on its socket is noticed at once
    (EOF, not the 60 s step timeout); a worker that stops answering is lost after
    ``step_timeout``, and its replacement's replies are the ones read afterwards."""
    import threading

    from brawlkit.distributed.channel import AUTH, HEADER, STEP

    rv = RayVecEnv(2, 2, env_kwargs={"opponent": "cpu:3"}, reward="tiered", step_timeout=60)
    try:
        rv.seed(5)
        rv.reset()
        a = np.zeros((2, 6), np.float32)
        rv.step(a)
        addr = rv.worker_info[0]["address"]
        wrong = HEADER.pack(32, AUTH, 0) + b"x" * 32
        assert _knock(addr, wrong) == b""
        acts = a[:1].tobytes()
        assert _knock(addr, HEADER.pack(len(acts), STEP, 1) + acts) == b""  # no token first
        assert _knock(addr, HEADER.pack(1 << 20, AUTH, 0)) == b""  # no 1 MB "token" either
        o, _, d, _ = rv.step(a)
        assert not rv.events and o.shape == (2, rv.observation_space.shape[0])

        # killed while the trainer waits: stopped first, so its reply cannot come first
        victim = dict(rv.worker_info[0])
        _stop(victim["pid"])
        killed: dict[str, float] = {}

        def kill() -> None:
            time.sleep(1.0)
            killed["t"] = time.time()
            os.kill(victim["pid"], signal.SIGKILL)

        t = threading.Thread(target=kill)
        t.start()
        rv.step_async(a)
        _, r, d, infos = rv.step_wait()
        t.join()
        assert len(rv.events) == 1 and rv.events[0]["worker"] == 0
        assert "step connection" in rv.events[0]["reason"]
        assert rv.events[0]["detected"] - killed["t"] < 5.0  # not the 60 s timeout
        assert d[0] and infos[0]["worker_lost"] and infos[0]["TimeLimit.truncated"]
        assert "worker_lost" not in infos[1]

        # stops answering: lost after step_timeout, then the replacement steps
        rv.step_timeout = 2.0
        stopped = dict(rv.worker_info[1])
        _stop(stopped["pid"])
        t0 = time.monotonic()
        _, _, d, infos = rv.step(a)
        assert len(rv.events) == 2 and rv.events[1]["worker"] == 1, (rv.events, stopped,
                                                                     rv.worker_info)
        assert "step timeout" in rv.events[1]["reason"]
        assert rv.events[1]["detected"] - rv.events[1]["time"] < 0  # detected, then replaced
        assert d[1] and infos[1]["worker_lost"] and not d[0]
        assert time.monotonic() - t0 >= 2.0
        assert process_gone(stopped["pid"], within=15)
        for _ in range(3):
            o, _, _, infos = rv.step(a)
            assert not any(i.get("worker_lost") for i in infos)
        assert len(rv.events) == 2 and not rv._dead
    finally:
        rv.close()


class _PoolSampler:
    """A league-like sampler: member ids from ``choose()``, the pool in ``members``."""

    def __init__(self, league_dir: Path, members: list[Any]) -> None:
        self.league_dir, self.members, self.picks = league_dir, members, 0

    def choose(self) -> str:
        self.picks += 1
        return self.members[0].id


@pytest.mark.servers
def test_league_members_are_shipped_and_played_by_id(ray_local: None, tmp_path: Path) -> None:
    """A member picked by id reaches the worker as record + .bpw bytes (no league
    directory there) and plays as the frozen numpy opponent of that member."""
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.export.actor import actor_layers
    from brawlkit.export.bpw import PolicyMeta, pack_bpw
    from brawlkit.league.records import Member
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model

    model = build_model(TrainConfig(n_envs=1), ZeroCostEnv(input_layout=2))
    (tmp_path / "artifacts").mkdir()  # a league directory's layout (LeagueDir refuses others)
    (tmp_path / "artifacts" / "m.bpw").write_bytes(
        pack_bpw(actor_layers(model.policy), PolicyMeta(action_repeat=4, input_layout=2)))
    member = Member(id="main-r-g0000", role="main", blob="artifacts/m.bpw",
                    settings={"action_repeat": 4})
    sampler = _PoolSampler(tmp_path, [member])
    rv = RayVecEnv(2, 1, env_kwargs={"max_episode_steps": 5}, sampler=sampler)
    try:
        rv.reset()
        assert sampler.picks == 2 and rv.get_attr("_op_label") == ["main-r-g0000"] * 2
        for _ in range(5):
            _, _, dones, infos = rv.step(np.zeros((2, 6), np.float32))
        assert dones.all() and all(i["opponent"] == "main-r-g0000" for i in infos)
        assert sampler.picks == 4  # the next episodes' opponents, picked by the trainer
        assert rv.sync_pool() == 0  # shipped once
    finally:
        rv.close()


# ------------------------------------------------------------------ two nodes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_args() -> list[str]:
    """Every port a node would otherwise take by default, chosen free: two nodes (and
    the module's instance) on one machine must not collide.  The node address stays
    Ray's choice: Ray rewrites a loopback bootstrap address into the machine's own
    address anyway (``resolve_ip_for_localhost``), so every packet stays on this
    machine either way."""
    return ["--num-cpus", "1",
            "--object-manager-port", str(_free_port()), "--node-manager-port", str(_free_port()),
            "--dashboard-agent-listen-port", str(_free_port()),
            "--dashboard-agent-grpc-port", str(_free_port()),
            "--runtime-env-agent-port", str(_free_port()),
            "--metrics-export-port", str(_free_port()), "--disable-usage-stats", "--block"]


_DRIVER = """
import json, sys, time
import numpy as np
from brawlkit.distributed.cluster import RayConnection
from brawlkit.distributed.ray_vecenv import RayVecEnv
import ray
conn = RayConnection(sys.argv[1])
deadline = time.monotonic() + 180  # the second node may still be joining
while len([n for n in ray.nodes() if n["Alive"]]) < 2 and time.monotonic() < deadline:
    time.sleep(1)
nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
v = RayVecEnv(2, 2, env_kwargs={"opponent": "cpu:3"}, address=sys.argv[1])
try:
    v.seed(1); v.reset()
    for _ in range(5):
        o, r, d, i = v.step(np.zeros((2, 6), np.float32))
    print(json.dumps({"workers": v.node_ids(), "nodes": nodes, "obs": list(o.shape)}))
finally:
    v.close()
    conn.close()
"""


@pytest.mark.servers
@pytest.mark.timeout(600)
def test_two_nodes_run_workers_on_both(tmp_path: Path) -> None:
    """A Ray head and a second node joined to it, on this machine (1 CPU each): the
    two workers (1 CPU each) land one per node, and a driver steps them.  Ray's start-up
    waits are the patient ones brawlkit uses (``patient_ray_env``): with Ray's 30 s a
    node on a busy 2-core machine missed its registration window."""
    from brawlkit.distributed.cluster import patient_ray_env

    ray_bin = str(Path(sys.executable).with_name("ray"))
    # a throw-away cluster on this machine: Ray's token authentication off (Ray's own opt-out;
    # a real cluster keeps it: docs/distributed.md)
    env = patient_ray_env({**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1",
                           "RAY_AUTH_MODE": "disabled"})
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # Ray's sockets live under the temp dir and a Unix socket path has at most 107 bytes:
    # pytest's tmp_path is too deep
    temp_dir = Path(tempfile.mkdtemp(prefix="bkray", dir="/tmp"))
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        node_args = (["--head", "--port", str(port), "--include-dashboard", "false",
                      "--temp-dir", str(temp_dir)], ["--address", address])
        for i, args in enumerate(node_args):
            # one node at a time: the second joins a head that is up
            log_path = tmp_path / f"node{i}.log"
            log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
            logs.append(log)
            p = subprocess.Popen([ray_bin, "start", *args, *_node_args()], env=env,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(p)
            if not _node_started(p, log_path):
                pytest.fail(f"ray node {i} did not start: {log_path.read_text()[-2000:]}")
        out = subprocess.run([sys.executable, "-c", _DRIVER, address], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        res = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("{")))
        assert len(res["nodes"]) == 2, res
        assert sorted(res["workers"]) == res["nodes"], res  # one worker on each node
        assert res["obs"][0] == 2
    finally:
        for p in reversed(procs):  # each `ray start --block` leads its node's process group
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for log in logs:
            log.close()
        _kill_leftovers(str(temp_dir))
        shutil.rmtree(temp_dir, ignore_errors=True)


def _node_started(proc: subprocess.Popen[bytes], log: Path, timeout: float = 240.0) -> bool:
    """Wait until ``ray start --block`` says it is up (True) or exits (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b"will now block forever" in log.read_bytes():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.5)
    return False


def _kill_leftovers(marker: str, within: float = 30.0) -> None:
    """Ray's workers run in process groups of their own and leave when their raylet
    has gone; wait for every process whose command line names this test's directory,
    and SIGKILL (by pid) what is still there after ``within`` seconds."""
    def left() -> list[int]:
        pids = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid():
                try:
                    if marker.encode() in (d / "cmdline").read_bytes():
                        pids.append(int(d.name))
                except OSError:
                    pass
        return pids

    deadline = time.monotonic() + within
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
