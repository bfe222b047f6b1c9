"""BrawlpitEnv over real UDP against a real brawlpit_server process."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from brawlkit.env import BrawlpitEnv, EnvError
from brawlkit.wire.constants import C

pytestmark = pytest.mark.servers

RIGHT = np.array([1, 0, -1, -1, -1, -1], dtype=np.float32)  # walk right, no buttons
IDLE = np.array([0, 0, -1, -1, -1, -1], dtype=np.float32)


def walk_off(obs: np.ndarray) -> np.ndarray:
    """An opponent that self-destructs: walks right off the stage forever."""
    assert obs.shape == (C.BP_INPUT_SELF_DIM,) and obs.dtype == np.float32  # default layout 2
    return RIGHT


def play_to_end(env: BrawlpitEnv, policy, max_steps: int = 20000, seed: int = 1):
    obs, info = env.reset(seed=seed)
    total_ticks = 0
    for step in range(max_steps):
        obs, r, term, trunc, info = env.step(policy(obs, step))
        assert env.observation_space.contains(obs), obs
        total_ticks += info["ticks_elapsed"]
        if term or trunc:
            return info, step + 1, total_ticks
    raise AssertionError("match did not end")


def test_check_env() -> None:
    env = BrawlpitEnv(opponent="cpu:1")
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_layout_2_feeds_back_the_command_sent_last_step() -> None:
    """The policy sees its own previous command (decoded, as on the wire) from the next
    step on; a reset starts from the neutral command; layout 1 is the plain observation."""
    from brawlkit.env.actions import decode_action
    from brawlkit.env.observation import INPUT_NAMES

    names = INPUT_NAMES[2]
    prev = slice(names.index("prev_stick_x"), names.index("prev_shield") + 1)
    env = BrawlpitEnv(opponent="cpu:1")
    try:
        obs, _ = env.reset(seed=1)
        assert obs.tolist()[prev] == [0.0, 0.0, -1.0, -1.0, -1.0, -1.0]
        for a in ([0.5, -2.0, -1, -1, 1, -1], [0.0, 0.25, 1, 1, -1, 1], IDLE):
            obs, *_ = env.step(np.array(a, np.float32))
            sx, sy, b = decode_action(a)
            want = [sx, sy] + [1.0 if b & bit else -1.0 for bit in (1, 2, 4, 8)]
            assert obs[prev].tolist() == want
            assert obs[names.index("self_state_idle"):].sum() == 2.0  # both one-hots set
        obs, _ = env.reset(seed=2)
        assert obs[prev].tolist() == [0.0, 0.0, -1.0, -1.0, -1.0, -1.0]
    finally:
        env.close()
    env = BrawlpitEnv(opponent="cpu:1", input_layout=1)
    try:
        assert env.reset(seed=1)[0].shape == (C.BP_OBS_DIM,)
    finally:
        env.close()
    with pytest.raises(ValueError, match="input layout 7"):
        BrawlpitEnv(input_layout=7)


def test_gymnasium_make_knows_the_id() -> None:
    import gymnasium

    from brawlkit.env import ENV_ID

    env = gymnasium.make(ENV_ID, opponent="cpu:2", action_repeat=3)
    try:
        assert isinstance(env.unwrapped, BrawlpitEnv) and env.unwrapped.action_repeat == 3
        obs, info = env.reset(seed=4)
        assert obs.shape == (C.BP_INPUT_SELF_DIM,) and info["opponent"] == "cpu:2"
        obs, _, _, _, info = env.step(env.action_space.sample())
        assert info["ticks_elapsed"] == 3
    finally:
        env.close()


def test_lockstep_full_match_vs_cpu_terminates_properly() -> None:
    env = BrawlpitEnv(mode="lockstep", opponent="cpu:5")
    rng = np.random.default_rng(0)
    try:
        info, steps, ticks = play_to_end(env, lambda o, s: rng.uniform(-1, 1, 6).astype(np.float32))
        snap = env.last_snapshot
        assert snap is not None and snap.over
        assert info["outcome"] in ("win", "loss", "draw")
        assert ticks == snap.tick == C.BP_MATCH_TICKS - snap.ticks_left
        # a lockstep step is exactly `repeat` ticks, except a match ending mid-step
        assert steps == -(-ticks // 4)
        assert info["self_stocks"] == 0 or info["other_stocks"] == 0 or snap.ticks_left == 0
    finally:
        env.close()


def test_lockstep_full_match_vs_callable_opponent() -> None:
    calls = []

    def opp(obs):
        calls.append(obs)
        return walk_off(obs)

    env = BrawlpitEnv(mode="lockstep", opponent=opp)
    try:
        info, steps, _ = play_to_end(env, lambda o, s: IDLE)
        assert info["outcome"] == "win" and info["other_stocks"] == 0
        assert info["opponent"] == "opp"
        assert len(calls) == steps
        # the opponent sees the mirrored view: its own stocks first
        assert calls[-1][5] == pytest.approx(calls[-1][5])
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["fastforward", "realtime"])
def test_free_running_full_match_vs_callable_opponent(mode: str) -> None:
    # the opponent walks off three times: a proper terminal state in ~10 s of game time
    env = BrawlpitEnv(mode=mode, opponent=walk_off, speed=30.0)
    try:
        info, _, _ = play_to_end(env, lambda o, s: IDLE)
        assert info["outcome"] == "win" and info["other_stocks"] == 0
    finally:
        env.close()


def test_fastforward_full_match_reports_skipped_ticks() -> None:
    env = BrawlpitEnv(mode="fastforward", opponent="cpu:8", speed=60.0)
    try:
        elapsed = []

        def slow_walker(obs, step):
            if step % 50 == 0:
                time.sleep(0.01)  # a slow client: the free-running server does not wait
            return RIGHT

        obs, _ = env.reset(seed=3)
        for step in range(100000):
            obs, _, term, trunc, info = env.step(slow_walker(obs, step))
            elapsed.append(info["ticks_elapsed"])
            if term:
                break
        assert term and info["outcome"] == "loss"
        snap = env.last_snapshot
        assert snap is not None and sum(elapsed) <= snap.tick
        assert max(elapsed) > 4, "a slow client must see ticks pass between two steps"
    finally:
        env.close()


def test_realtime_full_match_vs_cpu() -> None:
    # 3 stocks walked off the stage at 60 Hz: a proper terminal state in ~10 s
    env = BrawlpitEnv(mode="realtime", opponent="cpu:1")
    try:
        info, _, _ = play_to_end(env, lambda o, s: RIGHT)
        assert info["outcome"] == "loss" and info["self_stocks"] == 0
    finally:
        env.close()


def _rollout(seed: int, n: int, **kw) -> list[np.ndarray]:
    env = BrawlpitEnv(mode="lockstep", **kw)
    rng = np.random.default_rng(42)
    out = []
    try:
        obs, _ = env.reset(seed=seed)
        out.append(obs)
        for _ in range(n):
            obs, _, term, _, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
            out.append(obs)
            if term:
                break
    finally:
        env.close()
    return out


def test_lockstep_is_deterministic() -> None:
    a = _rollout(7, 600, opponent="cpu:4")
    b = _rollout(7, 600, opponent="cpu:4")
    assert len(a) == len(b)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    c = _rollout(8, 600, opponent="cpu:4")
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=False))


def test_input_delay_shifts_the_action_by_whole_ticks() -> None:
    jump = np.array([0, 0, 1, -1, -1, -1], dtype=np.float32)

    def first_airborne_tick(delay: int) -> int:
        env = BrawlpitEnv(mode="lockstep", action_repeat=2, input_delay=delay, opponent=lambda o: IDLE)
        try:
            env.reset(seed=5)
            for _ in range(200):  # settle on the ground first
                env.step(IDLE)
            t_press = env.last_snapshot.tick
            for _ in range(60):
                env.step(jump)
                if not env.last_snapshot.players[0].on_ground:
                    return env.last_snapshot.tick - t_press
        finally:
            env.close()
        raise AssertionError("never left the ground")

    d0, d6 = first_airborne_tick(0), first_airborne_tick(6)
    assert d6 - d0 == 6


def test_killed_server_raises_instead_of_hanging() -> None:
    env = BrawlpitEnv(opponent="cpu:2", recv_timeout=30.0)
    try:
        env.reset(seed=1)
        env.step(IDLE)
        assert env.server is not None
        env.server.proc.kill()
        env.server.proc.wait()
        t0 = time.monotonic()
        with pytest.raises(EnvError, match="server died"):
            for _ in range(10):
                env.step(IDLE)
        assert time.monotonic() - t0 < 5.0
    finally:
        env.close()


def test_a_starved_local_server_is_waited_for_a_server_at_an_address_is_not() -> None:
    """A live server that answers nothing for longer than ``recv_timeout`` (stopped with
    SIGSTOP: what a loaded machine does to it) is waited for when the env watches its
    process, and is "no answer" after ``recv_timeout`` when it is only an address.  A
    league role died of the 5 s wait while a test suite shared its 2 cores."""
    import signal
    import threading

    from brawlkit.wire.server_process import ServerProcess

    def stopped_for(pid: int, seconds: float) -> threading.Timer:
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
        timer.start()
        return timer

    env = BrawlpitEnv(opponent="cpu:2", recv_timeout=0.3)
    try:
        env.reset(seed=1)
        env.step(IDLE)
        assert env.server is not None
        timer = stopped_for(env.server.proc.pid, 1.5)
        t0 = time.monotonic()
        try:
            env.step(IDLE)  # no EnvError: the server is alive, only starved
        finally:
            timer.join()
        assert time.monotonic() - t0 >= 1.0
        env.step(IDLE)
    finally:
        env.close()

    srv = ServerProcess(mode="lockstep")
    far = BrawlpitEnv(opponent="cpu:2", server_address=srv.address, recv_timeout=0.3)
    try:
        far.reset(seed=1)
        far.step(IDLE)
        timer = stopped_for(srv.proc.pid, 1.5)
        try:
            with pytest.raises(EnvError, match=r"no answer .* within 0\.3s"):
                far.step(IDLE)
        finally:
            timer.join()
    finally:
        far.close()
        srv.close()


def test_eight_envs_start_at_once_on_distinct_ports_and_shut_down() -> None:
    t0 = time.monotonic()
    envs = [BrawlpitEnv(opponent="cpu:3") for _ in range(8)]
    try:
        for i, e in enumerate(envs):
            e.reset(seed=i)
        ports = {e.address[1] for e in envs}
        assert len(ports) == 8
        for e in envs:
            for _ in range(20):
                e.step(IDLE)
        assert time.monotonic() - t0 < 15.0
        pids = [e.server.pid for e in envs]
    finally:
        for e in envs:
            e.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_opponent_can_change_between_episodes_on_one_server() -> None:
    seen = []

    def mirror_bot(obs):
        seen.append(obs)
        return IDLE

    env = BrawlpitEnv(opponent="cpu:2")
    try:
        pid = env.server.pid
        for spec in ("cpu:2", mirror_bot, "cpu:7", mirror_bot, "cpu:1"):
            _, info = env.reset(seed=3, options={"opponent": spec})
            assert info["opponent"] == (spec if isinstance(spec, str) else "mirror_bot")
            for _ in range(30):
                _, _, term, _, info = env.step(RIGHT)
                if term:
                    break
            assert info["tick"] > 0
        assert len(seen) >= 60 and env.server.pid == pid  # one server process throughout
    finally:
        env.close()


def test_invalid_opponent_and_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="cpu:L"):
        BrawlpitEnv(opponent="cpu:9")
    with pytest.raises(ValueError, match="action_repeat"):
        BrawlpitEnv(action_repeat=0)
    with pytest.raises(ValueError, match="mode"):
        BrawlpitEnv(mode="turbo")


def test_an_env_idle_past_the_client_timeout_rejoins_on_reset():
    """An evaluation env sits idle through a whole training generation; a server forgets
    a client silent for --client-timeout (and answers it nothing). The next reset joins a
    fresh arena instead of failing with "no answer" (a 20-generation run died of it)."""
    import time

    from brawlkit.env import BrawlpitEnv
    from brawlkit.league.opponents import BaselinePolicy
    from brawlkit.wire.server_process import ServerProcess

    srv = ServerProcess(mode="lockstep", client_timeout=1.0)
    env = BrawlpitEnv(opponent="cpu:2", server=srv, seed=3)
    try:
        for opponent in ("cpu:2", BaselinePolicy()):  # CPU in the arena, then a second client
            env.reset(seed=5, options={"opponent": opponent})
            first = env.arena_id
            env.step(env.action_space.sample())
            time.sleep(1.6)  # the server drops both clients and reclaims the arena
            obs, info = env.reset(seed=5, options={"opponent": opponent})
            assert env.arena_id != first and info["tick"] == 0
            env.step(env.action_space.sample())
    finally:
        env.close()
        srv.close()
