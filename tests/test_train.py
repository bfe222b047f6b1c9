"""PPO training of one role: curriculum, vec env, and a tiny real run (env + server).

The real run is kept tiny (a few hundred steps, one eval match vs CPU 1) so the
whole file stays well under a minute on 2 cores.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from brawlkit.train import CpuCurriculum, OpponentSampler
from brawlkit.vecenv import BrawlpitVecEnv

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "native" / "build" / "brawlpit_server"
needs_server = pytest.mark.skipif(not SERVER.is_file(), reason="native server not built (make build)")


# ------------------------------------------------------------------ curriculum (no server)
def test_curriculum_unlocks_after_half_of_last_k_wins():
    c = CpuCurriculum(k=4, seed=0)
    assert isinstance(c, OpponentSampler)
    assert c.max_level == 1 and {c.sample() for _ in range(20)} == {"cpu:1"}
    for o in ("win", "loss", "win"):
        c.record("cpu:1", o)
    assert c.max_level == 1  # only 3 games so far
    c.record("cpu:1", "win")  # 3 wins of the last 4 (>= half): unlock
    assert c.max_level == 2
    # a fresh level has p = 0.5 → the largest weight p(1−p)
    w = c.weights()
    assert w["cpu:2"] > w["cpu:1"]
    assert c.win_rate("cpu:2") == 0.5


def test_curriculum_weights_follow_p_one_minus_p_with_floor():
    c = CpuCurriculum(k=10, floor=0.05, start=3, seed=1)
    for _ in range(10):
        c.record("cpu:1", "win")          # p = 1   -> floor
    for i in range(10):
        c.record("cpu:2", "win" if i % 2 else "loss")  # p = .5 -> .25
    for i in range(10):
        c.record("cpu:3", "win" if i < 2 else "loss")  # p = .2 -> .16
    w = c.weights()
    assert w["cpu:1"] == pytest.approx(0.05 / (0.05 + 0.25 + 0.16))
    assert w["cpu:2"] == pytest.approx(0.25 / 0.46)
    draws = [c.sample() for _ in range(4000)]
    assert abs(draws.count("cpu:2") / 4000 - 0.25 / 0.46) < 0.03
    assert draws.count("cpu:1") > 0  # never starved
    c2 = CpuCurriculum(k=10, seed=5)
    c2.load_state_dict(json.loads(json.dumps(c.state_dict())))
    assert c2.weights() == w and c2.sample() == c.sample()


# ------------------------------------------------------------------ vec env (fake envs)
class _SplitEnv(gym.Env):
    log: list[str] = []

    def __init__(self, i: int, ep_len: int = 3):
        self.i, self.ep_len, self.t = i, ep_len, 0
        self.observation_space = gym.spaces.Box(-1, 1, (31,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (6,), np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.log.append(f"reset{self.i}")
        return np.full(31, -1.0, np.float32), {}

    def step_send(self, a):
        self.log.append(f"send{self.i}")

    def step_recv(self):
        self.log.append(f"recv{self.i}")
        self.t += 1
        return np.full(31, self.t / 10, np.float32), 1.0, self.t >= self.ep_len, False, {}

    def step(self, a):  # pragma: no cover - must not be used
        raise AssertionError("BrawlpitVecEnv must use step_send/step_recv")


def test_vecenv_sends_all_before_reading_and_auto_resets():
    _SplitEnv.log = []
    v = BrawlpitVecEnv([lambda i=i: _SplitEnv(i) for i in range(3)])
    v.reset()
    _SplitEnv.log.clear()
    for _ in range(2):
        obs, rew, dones, infos = v.step(np.zeros((3, 6), np.float32))
    assert _SplitEnv.log[:6] == ["send0", "send1", "send2", "recv0", "recv1", "recv2"]
    obs, rew, dones, infos = v.step(np.zeros((3, 6), np.float32))
    assert dones.all()
    assert np.allclose(infos[0]["terminal_observation"], 0.3)
    assert np.allclose(obs, -1.0)  # first obs of the next episode
    assert infos[0]["TimeLimit.truncated"] is False
    v.close()


# ------------------------------------------------------------------ tiny real run
@needs_server
def test_tiny_train_resume_and_eval_cli(tmp_path, capsys):
    from brawlkit import evaluate, train

    run = tmp_path / "runs" / "main" / "t"
    common = ["--role", "main", "--steps-per-generation", "256", "--n-envs", "2",
              "--run-dir", str(run), "--seed", "3", "--eval-levels", "1", "--eval-episodes", "1",
              "--max-episode-steps", "60", "--no-progress", "--json"]
    assert train.main(["--generations", "1", *common]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    zip0, meta0 = run / "gen_0000.zip", run / "gen_0000.json"
    assert zip0.is_file() and zipfile.is_zipfile(zip0) and meta0.is_file()
    assert out["final_checkpoint"] == str(zip0)
    meta = json.loads(meta0.read_text())
    for key in ("role", "generation", "parent", "steps", "created", "seed", "eval", "obs_dim", "act_dim"):
        assert key in meta
    assert meta["role"] == "main" and meta["generation"] == 0 and meta["parent"] is None
    assert meta["obs_dim"] == 31 and meta["act_dim"] == 6 and meta["steps"] >= 256
    assert set(meta["eval"]) == {"cpu_1"} and meta["eval"]["cpu_1"]["episodes"] == 1

    df = pd.read_csv(run / "progress.csv")
    for key in ("train/entropy_loss", "train/std", "train/approx_kl", "rollout/ep_rew_mean",
                "reward/outcome", "reward/survival", "reward/activity", "reward/time_pressure",
                "reward/streak", "eval/win_rate/cpu_1", "play/spam_fraction"):
        assert key in df.columns, key
    assert list(run.glob("events.out.tfevents.*")), "no TensorBoard log"

    # --resume continues from the newest checkpoint
    assert train.main(["--generations", "1", "--resume", *common]) == 0
    capsys.readouterr()
    meta1 = json.loads((run / "gen_0001.json").read_text())
    assert meta1["parent"] == "gen_0000.zip" and meta1["steps"] > meta["steps"]

    # eval CLI: JSON on the last line
    assert evaluate.main(["--checkpoint", str(zip0), "--vs", "cpu:1", "--episodes", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["episodes"] == 1 and res["vs"] == "cpu:1"
    assert res["win_rate"] + res["draw_rate"] + res["loss_rate"] == pytest.approx(1.0)


@needs_server
def test_seeded_runs_are_reproducible(tmp_path):
    import torch
    from stable_baselines3 import PPO

    from brawlkit.train import train

    params = []
    for name in ("a", "b"):
        res = train(generations=1, steps_per_generation=128, n_envs=2, seed=11,
                    run_dir=tmp_path / name, progress=False, eval_levels=(), n_steps=64,
                    max_episode_steps=40)
        model = PPO.load(str(res.final_checkpoint), device="cpu")
        params.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert torch.equal(params[0], params[1])
