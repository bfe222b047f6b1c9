"""brawlpit_bot (C, zero Python) plays whole lockstep matches against the CPU: the
observations it built are replayed through the Python policy of the same blob and the
decoded actions must agree (buttons exactly, sticks within 1e-5); the same checkpoint
in BrawlpitEnv and as the C bot plays the identical match; the bot plays at the action
repeat the blob records; SIGHUP swaps weights without a restart."""

from __future__ import annotations

import collections
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import large_weight_checkpoint, run_cli

from brawlkit.env.actions import decode_action
from brawlkit.export import bpw as ex
from brawlkit.export.actor import NumpyPolicy, checkpoint_meta
from brawlkit.export.cli import export_checkpoint

pytestmark = pytest.mark.servers


def run_bot(bot: Path, server_factory, blob: Path, trace: Path, seed: int, level: int,
            *extra: str) -> tuple[int, int, str]:
    """brawlpit_bot plays one lockstep match vs CPU ``level`` on a fresh server;
    returns (winner, ticks, stderr), with the per-step trace in ``trace``."""
    srv = server_factory(mode="lockstep", cpu_level=level, spin_us=0)
    host, port = srv.address
    r = subprocess.run([str(bot), "--server", f"{host}:{port}", "--weights", str(blob),
                        "--matches", "1", "--seed", str(seed), "--cpu-level", str(level),
                        "--trace", str(trace), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"match (\d+) winner (\d+) ticks (\d+)\n", r.stdout)
    assert m, r.stdout
    return int(m.group(2)), int(m.group(3)), r.stderr


def test_bot_plays_lockstep_match(bot_bin, server_factory, tmp_path):
    large_weight_checkpoint(tmp_path / "ppo.zip", seed=4)
    export_checkpoint(tmp_path / "ppo.zip", tmp_path / "p.bpw", compress="shuffle")
    winner, ticks, _ = run_bot(bot_bin, server_factory, tmp_path / "p.bpw",
                               tmp_path / "trace.txt", seed=7, level=3)
    assert winner in (0, 1, 2) and 0 < ticks <= 9000
    rows = np.loadtxt(tmp_path / "trace.txt", ndmin=2)
    assert len(rows) > 10
    assert np.all(np.diff(rows[:, 1]) == 4)  # lockstep, repeat 4, no skipped step
    pol = NumpyPolicy(tmp_path / "p.bpw")
    acts = pol.act(rows[:, 5:].astype(np.float32))
    # same action = same buttons and sticks within the forward-pass parity bound
    # (C and numpy sum in different orders, so sticks may differ in the last bits)
    same = []
    for a, r in zip(acts, rows, strict=True):
        sx, sy, b = decode_action(a)
        same.append(b == int(r[4]) and abs(sx - r[2]) <= 1e-5 and abs(sy - r[3]) <= 1e-5)
    assert np.mean(same) >= 0.99, np.mean(same)


@pytest.mark.training
def test_action_repeat_2_is_carried_from_training_to_eval_and_the_bot(
        trained_checkpoint, bot_bin, server_factory, tmp_path):
    """Trained with --action-repeat 2: the blob records it, eval plays at 2, and
    brawlpit_bot with no --repeat flag sends 2-tick commands."""
    assert checkpoint_meta(trained_checkpoint).action_repeat == 2
    r = run_cli("export", str(trained_checkpoint), "-o", str(tmp_path / "p.bpw"), "--json")
    assert r.returncode == 0, r.stderr
    assert ex.load_bpw(tmp_path / "p.bpw").meta.action_repeat == 2
    from helpers import last_json

    r = run_cli("eval", "--checkpoint", str(trained_checkpoint), "--vs", "cpu:1",
                "--episodes", "2", "--json")
    assert r.returncode == 0, r.stderr
    ev = last_json(r.stdout)
    assert ev["action_repeat"] == 2
    assert sum(ev["wins_by"].values()) == ev["wins"]  # how each win was decided
    # and which match ended how: the per-match list carries the same rule's verdict
    assert collections.Counter(m["decided"] for m in ev["matches"]
                               if m["outcome"] == "win") == collections.Counter(ev["wins_by"])
    # against a frozen policy: here its own blob, played as a league member is
    r = run_cli("eval", "--checkpoint", str(trained_checkpoint), "--vs", str(tmp_path / "p.bpw"),
                "--episodes", "2", "--json")
    assert r.returncode == 0, r.stderr
    mirror = last_json(r.stdout)
    assert mirror["vs"] == "p.bpw" and mirror["wins"] + mirror["draws"] + mirror["losses"] == 2
    assert sum(mirror["losses_by"].values()) == mirror["losses"]
    # every step but a match's last covers exactly 2 ticks
    assert 2 * (ev["mean_steps"] - 1) < ev["mean_ticks"] <= 2 * ev["mean_steps"]
    _, ticks, err = run_bot(bot_bin, server_factory, tmp_path / "p.bpw", tmp_path / "t.txt",
                            seed=3, level=1)
    assert "action repeat 2" in err, err
    rows = np.loadtxt(tmp_path / "t.txt", ndmin=2)
    assert np.all(np.diff(rows[:, 1]) == 2) and len(rows) >= ticks // 2


def test_c_bot_and_python_policy_play_the_same_match(bot_bin, server_factory, tmp_path):
    """The proof that the live game runs what was trained: the same checkpoint,
    once as SB3/torch in BrawlpitEnv and once as brawlpit_bot (C, zero Python),
    in lockstep against the same CPU with the same seed, plays the same match."""
    import os

    from stable_baselines3 import PPO

    from brawlkit.env import BrawlpitEnv

    # BRAWLKIT_E2E_CHECKPOINT=runs/main/.../gen_XXXX.zip runs this on a trained policy
    # (full-length matches); CI has none, so by default a large-weight random actor
    ckpt = os.environ.get("BRAWLKIT_E2E_CHECKPOINT")
    if ckpt is None:
        ckpt = str(tmp_path / "ppo.zip")
        large_weight_checkpoint(tmp_path / "ppo.zip", seed=11)
    export_checkpoint(ckpt, tmp_path / "p.bpw", compress="auto")
    seed, level = 21, 3

    model = PPO.load(ckpt, device="cpu")
    env = BrawlpitEnv(mode="lockstep", action_repeat=checkpoint_meta(ckpt).action_repeat,
                      opponent=f"cpu:{level}")
    py_steps = []
    try:
        obs, _ = env.reset(seed=seed)
        while True:
            tick = env.last_snapshot.tick
            action, _ = model.predict(obs, deterministic=True)
            py_steps.append((tick, *decode_action(action)))
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        py_winner, py_ticks = env.last_snapshot.winner, env.last_snapshot.tick
    finally:
        env.close()

    c_winner, c_ticks, _ = run_bot(bot_bin, server_factory, tmp_path / "p.bpw",
                                   tmp_path / "trace.txt", seed=seed, level=level)
    rows = np.loadtxt(tmp_path / "trace.txt", ndmin=2)
    c_steps = [(int(row[1]), float(row[2]), float(row[3]), int(row[4])) for row in rows]

    n = min(len(py_steps), len(c_steps))
    same = sum(
        1 for (pt, psx, psy, pb), (ct, csx, csy, cb) in zip(py_steps[:n], c_steps[:n], strict=True)
        if pt == ct and pb == cb and abs(psx - csx) <= 1e-5 and abs(psy - csy) <= 1e-5
    )
    frac = same / max(len(py_steps), len(c_steps))
    print(f"C bot vs Python policy: {same}/{max(len(py_steps), len(c_steps))} steps identical "
          f"({frac:.4f}); winner py={py_winner} c={c_winner}; ticks py={py_ticks} c={c_ticks}")
    assert frac >= 0.99
    assert c_winner == py_winner and c_ticks == py_ticks


def test_sampled_blob_plays_the_same_match_in_c_and_python(bot_bin, server_factory, tmp_path):
    """What ships can be the sampled policy (``export --sampled``, a version-3 blob):
    brawlpit_bot draws match k's noise from a stream seeded S + k, and Python playing the
    same blob with ``NoiseStream(S)`` in BrawlpitEnv, lockstep against the same CPU and
    match seed, plays the same match step for step.  ``--deterministic`` plays its mean.
    The policy reads input layout 3, so the C bot's clock is checked in the same match."""
    from brawlkit.env import BrawlpitEnv
    from brawlkit.export.actor import NoiseStream

    large_weight_checkpoint(tmp_path / "ppo.zip", seed=12, input_layout=3)
    export_checkpoint(tmp_path / "ppo.zip", tmp_path / "s.bpw", compress="shuffle", sampled=True)
    pol = NumpyPolicy(tmp_path / "s.bpw")
    assert pol.noise_std is not None
    seed, level = 33, 3
    env = BrawlpitEnv(mode="lockstep", action_repeat=pol.meta.action_repeat,
                      input_layout=pol.meta.input_layout, opponent=f"cpu:{level}")
    noise, py_steps = NoiseStream(seed), []
    try:
        obs, _ = env.reset(seed=seed)
        while True:
            a = pol.sample(obs[None], noise)[0]
            py_steps.append((env.last_snapshot.tick, *decode_action(a)))
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
        py_end = (env.last_snapshot.winner, env.last_snapshot.tick)
    finally:
        env.close()
    winner, ticks, err = run_bot(bot_bin, server_factory, tmp_path / "s.bpw",
                                 tmp_path / "trace.txt", seed=seed, level=level)
    assert "bpw v3, input layout 3" in err and "sampled" in err, err
    rows = np.loadtxt(tmp_path / "trace.txt", ndmin=2)
    c_steps = [(int(r[1]), float(r[2]), float(r[3]), int(r[4])) for r in rows]
    same = sum(1 for p, c in zip(py_steps, c_steps, strict=False)
               if p[0] == c[0] and p[3] == c[3] and abs(p[1] - c[1]) <= 1e-5
               and abs(p[2] - c[2]) <= 1e-5)
    assert same / max(len(py_steps), len(c_steps)) >= 0.99, (same, len(py_steps), len(c_steps))
    assert (winner, ticks) == py_end
    # the noise is real: the mean alone would have pressed differently
    mean_buttons = [decode_action(a)[2] for a in pol.act(rows[:, 5:].astype(np.float32))]
    assert np.mean([b != int(r[4]) for b, r in zip(mean_buttons, rows, strict=True)]) > 0.05
    # --deterministic: the same blob plays its mean
    _, _, err = run_bot(bot_bin, server_factory, tmp_path / "s.bpw", tmp_path / "det.txt",
                        seed, level, "--deterministic")
    assert "deterministic" in err, err
    det = np.loadtxt(tmp_path / "det.txt", ndmin=2)
    acts = [decode_action(a)[2] for a in pol.act(det[:, 5:].astype(np.float32))]
    assert np.mean([b == int(r[4]) for b, r in zip(acts, det, strict=True)]) >= 0.99


def test_bot_plays_the_mixture_component_its_match_seed_picks(bot_bin, server_factory, tmp_path):
    """A mixture blob (``export A.zip B.zip``): brawlpit_bot plays, in match k, the
    component ``mixture_pick(S + k, K)`` names — Python's rule — and only that one."""
    zips = [tmp_path / "a.zip", tmp_path / "b.zip"]
    for z, s in zip(zips, (5, 9), strict=True):
        large_weight_checkpoint(z, seed=s)
    from brawlkit.export.cli import export_mixture

    export_mixture(zips, tmp_path / "mix.bpw")
    parts = [NumpyPolicy(r) for r in ex.split_mixture((tmp_path / "mix.bpw").read_bytes())]
    for want in (0, 1):
        seed = next(s for s in range(40, 200) if ex.mixture_pick(s, 2) == want)
        _, _, err = run_bot(bot_bin, server_factory, tmp_path / "mix.bpw",
                            tmp_path / f"t{want}.txt", seed=seed, level=3)
        assert "a mixture of 2 (one per match)" in err, err
        assert f"match 0 (seed {seed}) plays mixture component {want}" in err, err
        rows = np.loadtxt(tmp_path / f"t{want}.txt", ndmin=2)
        obs = rows[:, 5:].astype(np.float32)
        agree = [np.mean([decode_action(a)[2] == int(r[4]) for a, r in
                          zip(p.act(obs), rows, strict=True)]) for p in parts]
        assert agree[want] >= 0.99 and agree[1 - want] < 0.9, agree


def _constant_blob(stick_x: float) -> bytes:
    """A valid 31-64-64-6 blob whose output is the constant (stick_x, 0, no buttons)."""
    z = np.zeros
    head_bias = np.array([stick_x, 0, -1, -1, -1, -1], dtype=np.float32)
    return ex.pack_bpw([
        ex.Layer(z((64, 31), np.float32), z(64, np.float32), ex.ACT_TANH),
        ex.Layer(z((64, 64), np.float32), z(64, np.float32), ex.ACT_TANH),
        ex.Layer(z((6, 64), np.float32), head_bias, ex.ACT_NONE),
    ])


def test_bot_reloads_weights_on_sighup_and_keeps_old_ones_if_refused(bot_bin, server_factory,
                                                                     tmp_path):
    """A new checkpoint replaces the old one with no restart: SIGHUP reloads; a corrupt
    file is refused with a message and the bot plays on with the previous weights."""
    import signal
    import time

    weights = tmp_path / "live.bpw"
    weights.write_bytes(_constant_blob(-0.5))
    trace = tmp_path / "trace.txt"
    host, port = server_factory(mode="realtime", cpu_level=1).address
    b = subprocess.Popen([str(bot_bin), "--server", f"{host}:{port}", "--weights", str(weights),
                          "--matches", "1", "--seed", "3", "--trace", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.6)
        weights.write_bytes(b"BPW1 this is not a policy")
        b.send_signal(signal.SIGHUP)
        time.sleep(0.4)
        weights.write_bytes(ex.encode_blob(_constant_blob(0.5), "lz4"))
        b.send_signal(signal.SIGHUP)
        time.sleep(0.6)
        b.send_signal(signal.SIGTERM)
        _, err = b.communicate(timeout=10)
    finally:
        if b.poll() is None:
            b.kill()
    assert "refused" in err and "keeping the previous weights" in err, err
    assert err.count(": bpw v2") >= 2, err  # loaded at start and after the second SIGHUP
    sx = np.loadtxt(trace, ndmin=2)[:, 2]
    assert set(np.round(sx, 6)) <= {-0.5, 0.5}
    first_new = int(np.argmax(sx > 0))
    assert sx[0] == -0.5 and first_new > 20  # ~60 Hz for ~1 s on the old weights
    assert np.all(sx[first_new:] == 0.5) and np.all(sx[:first_new] == -0.5)



# ----------------------------------------------------------------- which match the bot plays
_RESULT = re.compile(r"match (\d+) winner (\d+) ticks (\d+)\n")


@pytest.fixture
def start_bot(bot_bin):
    """``start_bot(server, weights, *args)`` -> a running brawlpit_bot (one match);
    any still running at the end of the test is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(srv, weights: Path, *extra: str) -> subprocess.Popen[str]:
        host, port = srv.address
        b = subprocess.Popen([str(bot_bin), "--server", f"{host}:{port}", "--weights",
                              str(weights), "--matches", "1", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(b)
        return b

    yield start
    for b in started:
        if b.poll() is None:
            b.kill()
            b.communicate()


def _finish(b: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    out, err = b.communicate(timeout=timeout)
    return b.returncode, out, err


def _wait_for(cond, what: str, within: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("cpu_args", [[], ["--cpu-level", "0"]], ids=["cpu-kept", "cpu-none"])
def test_bot_waits_for_its_reset_match_while_slot_1_is_empty(start_bot, server_factory, tmp_path,
                                                             cpu_args):
    """A server with no CPU, and the bot keeps that (no --cpu-level) or asks for none
    (--cpu-level 0): its RESET's match starts WAITING.  The bot takes that match, re-sends
    no RESET while it waits (it used to re-send it every 100 ms, each one starting yet
    another match whose ids it then ignored, so it never played), and plays it to the
    end once a second client joins slot 1."""
    import time

    weights = tmp_path / "p.bpw"
    weights.write_bytes(_constant_blob(0.3))
    srv = server_factory(mode="lockstep", spin_us=0)
    first = start_bot(srv, weights, "--seed", "5", *cpu_args)
    _wait_for(lambda: srv.stats()["match_id"] >= 2, "the bot's RESET")
    time.sleep(0.5)  # five re-send periods with slot 1 empty
    # 2 = only the first RESET (3 would be one retry of a RESET whose answer was late)
    assert srv.stats()["match_id"] <= 3, "RESET re-sent while waiting for slot 1"
    second = start_bot(srv, weights, "--slot", "1", "--no-reset")
    rc1, out1, err1 = _finish(first)
    rc2, out2, err2 = _finish(second)
    assert rc1 == 0, err1
    assert rc2 == 0, err2
    m = _RESULT.fullmatch(out1)
    assert m, out1
    assert int(m.group(1)) == srv.stats()["match_id"] <= 3  # the newest match, few RESETs
    assert 0 < int(m.group(3)) <= 9000
    assert out2 == out1  # the second client played the same match to the same end


def test_no_reset_bot_follows_the_match_another_client_resets_to(start_bot, server_factory,
                                                                 tmp_path):
    """A --no-reset bot joins slot 1 first; when slot 0 joins, match 1 starts and the
    --no-reset bot plays its first step in it; then slot 0's bot RESETs to match 2.  The
    --no-reset bot must follow the server to the newer match (it used to ignore it as
    stale, and both bots waited on each other until the 10 s silence timeout)."""
    weights = tmp_path / "p.bpw"
    weights.write_bytes(_constant_blob(-0.3))
    srv = server_factory(mode="lockstep", spin_us=0)
    second = start_bot(srv, weights, "--slot", "1", "--no-reset")
    _wait_for(lambda: "slot 1 joined" in srv.log_path.read_text(), "slot 1 to join")
    first = start_bot(srv, weights, "--cpu-level", "0")
    rc1, out1, err1 = _finish(first)
    rc2, out2, err2 = _finish(second)
    assert rc1 == 0, err1
    assert rc2 == 0, err2
    m = _RESULT.fullmatch(out1)
    assert m and int(m.group(1)) == srv.stats()["match_id"] >= 2, out1
    assert out2 == out1


def test_bot_exits_when_the_server_refuses_its_reset(start_bot, server_factory, tmp_path):
    """--cpu-level 3 while a client holds slot 1: the server answers the RESET with
    ERROR; the bot says so and exits 1 instead of re-sending the RESET until it times out."""
    from helpers import RawClient

    weights = tmp_path / "p.bpw"
    weights.write_bytes(_constant_blob(0.0))
    srv = server_factory(mode="lockstep", spin_us=0)
    RawClient(srv.address, want_slot=1)
    rc, out, err = _finish(start_bot(srv, weights, "--cpu-level", "3"), timeout=20)
    assert rc == 1, err
    assert "server refused RESET" in err and "slot 1 held by a client" in err, err
    assert out == ""


def test_checkpoint_from_before_layout_2_still_plays(bot_bin, server_factory, tmp_path):
    """A checkpoint that records nothing (saved before brawlkit stamped checkpoints) is read
    as layout 1, repeat 4: eval plays it, export writes a layout-1 blob, the bot plays it."""
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model

    old = build_model(TrainConfig(n_envs=1, input_layout=1), ZeroCostEnv(input_layout=1))
    delattr(old, "brawlkit")
    old.save(str(tmp_path / "old.zip"))
    r = run_cli("eval", "--checkpoint", str(tmp_path / "old.zip"), "--vs", "cpu:1",
                "--episodes", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert "does not record how it was trained" in r.stderr
    from helpers import last_json

    ev = last_json(r.stdout)
    assert (ev["input_layout"], ev["action_repeat"], ev["episodes"]) == (1, 4, 1)
    export_checkpoint(tmp_path / "old.zip", tmp_path / "old.bpw")
    assert ex.load_bpw(tmp_path / "old.bpw").meta == ex.PolicyMeta(4, 1, "")
    _, _, err = run_bot(bot_bin, server_factory, tmp_path / "old.bpw", tmp_path / "t.txt",
                        seed=2, level=1)
    assert "input layout 1, action repeat 4" in err
    assert np.loadtxt(tmp_path / "t.txt", ndmin=2).shape[1] == 5 + 31


def test_bot_refuses_a_layout_it_cannot_build(bot_bin, server_factory, tmp_path):
    raw = _constant_blob(0.0)
    bad = raw[:24] + (9).to_bytes(4, "little") + raw[28:]  # input layout 9
    (tmp_path / "l9.bpw").write_bytes(bad)
    host, port = server_factory(mode="lockstep", cpu_level=1).address
    r = subprocess.run([str(bot_bin), "--server", f"{host}:{port}", "--weights",
                        str(tmp_path / "l9.bpw"), "--matches", "1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "input layout 9" in r.stderr, r.stderr


# ----------------------------------------------------------------- names, peers, --mode
def test_named_bots_print_peers_and_play_each_other(start_bot, server_factory, sim_lib,
                                                    tmp_path):
    """Two --name bots in a fastforward arena the first one creates (--mode on a lockstep
    server): each prints the other's PEER line before the result, both report the same
    match, and the server's recording of it names both and replays bit for bit.

    The first bot's ``joined`` line promises that the server has its name: the second
    bot, started on that line while the first is stopped (SIGSTOP: on a loaded machine it
    may simply not run), sees the name in its first PEER line.  (The line used to come
    before the IDENT was sent: under load the second bot first printed an unnamed peer.)"""
    import signal

    from test_replay_server import assert_replays, read_bpr

    large_weight_checkpoint(tmp_path / "ppo.zip", seed=4)
    export_checkpoint(tmp_path / "ppo.zip", tmp_path / "p.bpw", compress="shuffle")
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", speed=30, spin_us=0, extra_args=["--record", str(rec)])
    first = start_bot(srv, tmp_path / "p.bpw", "--new-arena", "--mode", "fastforward",
                      "--cpu-level", "0", "--name", "alpha")
    joined = ""
    while "bot: joined" not in joined:
        joined = first.stderr.readline()
        assert joined, "the first bot exited before joining"
    m = re.search(r"arena (\d+) slot 0 mode (\d+)", joined)
    assert m and int(m.group(2)) == 1, joined  # BP_MODE_FASTFORWARD
    first.send_signal(signal.SIGSTOP)
    try:
        second = start_bot(srv, tmp_path / "p.bpw", "--arena", m.group(1), "--no-reset",
                           "--name", "beta")
        assert second.stdout is not None
        first_peer = second.stdout.readline()  # printed once it has joined
    finally:
        first.send_signal(signal.SIGCONT)
    assert first_peer == "peer slot 0 kind 1 name alpha ticket -\n", first_peer
    rc1, out1, err1 = _finish(first, timeout=60)
    rc2, out2, err2 = _finish(second, timeout=60)
    assert rc1 == 0, err1
    assert rc2 == 0, err2
    lines1, lines2 = out1.splitlines(), [first_peer.rstrip("\n"), *out2.splitlines()]
    assert "peer slot 1 kind 1 name beta ticket -" in lines1, out1
    r1 = [ln for ln in lines1 if ln.startswith("match ")]
    r2 = [ln for ln in lines2 if ln.startswith("match ")]
    assert len(r1) == 1 and r1 == r2 and lines1.index(r1[0]) > lines1.index(
        "peer slot 1 kind 1 name beta ticket -")
    match_id, winner, ticks = map(int, _RESULT.fullmatch(r1[0] + "\n").groups())
    recs = [read_bpr(p) for p in rec.glob("*.bpr")]
    (done,) = [r for r in recs if r.match_id == match_id]
    assert (done.name0, done.name1, done.mode, done.complete) == ("alpha", "beta", 1, 1)
    assert (done.winner, done.n_ticks) == (winner, ticks)
    assert_replays(sim_lib, done)


def test_bot_rejects_a_bad_name_or_mode(bot_bin, tmp_path):
    for bad in (["--name", ""], ["--name", "x" * 32], ["--name", "tab\there"],
                ["--mode", "turbo"]):
        r = subprocess.run([str(bot_bin), "--server", "127.0.0.1:9", "--weights",
                            str(tmp_path / "none.bpw"), *bad], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 2 and "usage" in r.stderr, (bad, r.stderr)
    r = subprocess.run([str(bot_bin), "--help"], capture_output=True, text=True, timeout=10)
    assert "--name NAME" in r.stdout and "--mode M" in r.stdout


# ----------------------------------------------------------------- text from a rogue server
class _RogueServer:
    """A UDP server on 127.0.0.1 speaking just enough of the protocol to one brawlpit_bot,
    with hostile text where the protocol carries text.  HELLO gets WELCOME (or, with
    ``refuse``, ERROR ``refuse``); IDENT gets the PEER of the bot's own slot showing its
    name and, from the ``peer_from``-th IDENT on, the PEER of slot 1 holding
    (``name``, ``ticket``).  RESET, and after it every packet, gets a SNAPSHOT of match 2:
    phase OVER (winner 1, tick 77) once slot 1's PEER went out, else WAITING."""

    def __init__(self, name: bytes = b"", ticket: bytes = b"", refuse: bytes = b"",
                 peer_from: int = 1) -> None:
        import socket
        import threading

        self.name, self.ticket, self.refuse, self.peer_from = name, ticket, refuse, peer_from
        self.idents = 0
        self.reset_seen = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.address = self.sock.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()

    def _send(self, to: tuple[str, int], ptype: int, payload: bytes) -> None:
        from brawlkit.wire import protocol as P

        self.sock.sendto(bytes(P.make_header(ptype, 0)) + payload, to)

    def _peer(self, to: tuple[str, int], slot: int, name: bytes, ticket: bytes) -> None:
        from brawlkit.wire import protocol as P
        from brawlkit.wire.constants import C

        self._send(to, C.BP_PKT_PEER, bytes(P.NetPeer(
            arena_id=3, slot=slot, kind=C.BP_PEER_CLIENT, name=name, ticket=ticket)))

    def _serve(self) -> None:
        from brawlkit.wire import protocol as P
        from brawlkit.wire.constants import C

        def snapshot(over: bool) -> bytes:
            return P.pack_snapshot(
                [P.PlayerState(0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 2, s) for s in (0, 1)],
                match_id=2, phase=C.BP_PHASE_OVER if over else C.BP_PHASE_WAITING,
                winner=1 if over else C.BP_WINNER_NONE, tick=77)

        while not self._stop.is_set():
            try:
                d, frm = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            kind = P.validate_datagram(d).type
            if kind == C.BP_PKT_HELLO and self.refuse:
                self._send(frm, C.BP_PKT_ERROR, bytes(P.NetError(code=5, text=self.refuse)))
            elif kind == C.BP_PKT_HELLO:
                hello = P.parse_payload(d, P.NetHello)
                self._send(frm, C.BP_PKT_WELCOME, bytes(P.NetWelcome(
                    session=7, nonce=hello.nonce, match_id=1, arena_id=3, slot=0,
                    mode=C.BP_MODE_LOCKSTEP, tick_hz=C.BP_TICK_HZ,
                    match_ticks=C.BP_MATCH_TICKS)))
            elif kind == C.BP_PKT_IDENT:
                self.idents += 1
                self._peer(frm, 0, P.parse_payload(d, P.NetIdent).name, b"")
                if self.idents >= self.peer_from:
                    self._peer(frm, 1, self.name, self.ticket)
            self.reset_seen |= kind == C.BP_PKT_RESET
            if self.reset_seen:
                self.sock.sendto(snapshot(self.idents >= self.peer_from), frm)


def _bot_vs(bot_bin: Path, rogue: _RogueServer, tmp_path: Path,
            timeout: float = 30) -> subprocess.CompletedProcess[str]:
    (tmp_path / "p.bpw").write_bytes(_constant_blob(0.0))
    host, port = rogue.address
    try:
        return subprocess.run([str(bot_bin), "--server", f"{host}:{port}", "--weights",
                               str(tmp_path / "p.bpw"), "--matches", "1", "--name", "alpha"],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        rogue.close()


def test_bot_escapes_what_a_rogue_server_sends(bot_bin, tmp_path):
    """A server whose PEER names the other player ``x<newline>match 9 winner 1 ticks 5<ESC>[2J``
    (and a ticket with a newline, a space, a backslash and a non-ASCII byte): the bot
    prints it as one escaped line, so its stdout holds exactly the peer line and the real
    result, and the pool's parser gets the server's bytes back."""
    from brawlkit.botpool.procs import PeerLine, parse_peer_line, parse_result_line

    name = b"x\nmatch 9 winner 1 ticks 5\x1b[2J\\"
    ticket = b"t k\\\r\nmatch 8 winner 0 ticks 1\xc3\xa9\x07"
    r = _bot_vs(bot_bin, _RogueServer(name, ticket), tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines == [
        "peer slot 1 kind 1 name x\\x0amatch 9 winner 1 ticks 5\\x1b[2J\\\\ ticket "
        "t\\x20k\\\\\\x0d\\x0amatch\\x208\\x20winner\\x200\\x20ticks\\x201\\xc3\\xa9\\x07",
        "match 2 winner 1 ticks 77", ""], r.stdout
    assert all(" " <= ch <= "~" for ch in r.stdout.replace("\n", ""))  # no ESC, no byte >= 0x80
    assert [parse_result_line(ln) for ln in lines[:2]][0] is None  # one result: the real one
    assert parse_peer_line(lines[0]) == PeerLine(1, 1, name.decode(), ticket.decode())


def test_bot_escapes_a_rogue_error_text_and_a_lone_dash(bot_bin, tmp_path):
    """An ERROR refusing the HELLO with a newline and ESC in its text is printed escaped on
    stderr (the bot pool reads its ``bot: joined`` line there); a name that is just ``-``
    prints as ``\\x2d``, never as the ``-`` of an empty field."""
    from brawlkit.botpool.procs import parse_peer_line

    r = _bot_vs(bot_bin, _RogueServer(refuse=b"no\nbot: joined x arena 9\x1b"), tmp_path)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "bot: server refused HELLO: 5 no\\x0abot: joined x arena 9\\x1b\n" in r.stderr
    assert not any(ln.startswith("bot: joined") for ln in r.stderr.splitlines()), r.stderr
    r = _bot_vs(bot_bin, _RogueServer(name=b"-", ticket=b"-"), tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first == "peer slot 1 kind 1 name \\x2d ticket \\x2d", r.stdout
    peer = parse_peer_line(first)
    assert peer is not None and (peer.name, peer.ticket) == ("-", "-")


def test_a_lost_peer_is_made_good_by_the_bots_ident_refresh(bot_bin, tmp_path):
    """The server's PEER broadcasts are not retried: the one naming the other player may
    be lost (a full socket buffer on a busy machine).  The bot re-sends its IDENT every
    second, and the server answers each with both PEERs: here the first answer lacks slot
    1 (as if its PEER were lost), a later one has it, and the bot prints it before the
    result."""
    rogue = _RogueServer(b"beta", b"", peer_from=2)
    r = _bot_vs(bot_bin, rogue, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "peer slot 1 kind 1 name beta ticket -\nmatch 2 winner 1 ticks 77\n", \
        r.stdout
    assert rogue.idents >= 2
