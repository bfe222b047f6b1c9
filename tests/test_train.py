"""Training one role: the configuration (one declaration: CLI, notebook, metadata), the
in-process vec env, and tiny real runs over UDP (train, resume, eval, reproducibility)."""

from __future__ import annotations

import dataclasses
import json
import zipfile

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from helpers import last_json, run_cli

from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.training.cli import build_parser
from brawlkit.training.config import (
    QUICK_START,
    TrainConfig,
    config_fields,
    config_from_args,
    parse_config_args,
    resumed_config,
)

#: a non-default value for every TrainConfig field: tiny, and each one different from
#: its default, so a test run proves the flag reaches the run and its metadata
NON_DEFAULT = {
    "role": "main_exploiter", "generations": 1, "steps_per_generation": 192, "n_envs": 1, "servers": 1,
    "seed": 3, "vec": "subproc", "action_repeat": 3, "input_layout": 1, "reward": "outcome:win=2",
    "ray": "local", "ray_workers": 1,  # the run's envs in a Ray env worker (docs/distributed.md)
    "max_episode_steps": 50, "learning_rate": 1e-4, "n_steps": 64, "batch_size": 32,
    "pipeline": False, "async_update": False, "n_epochs": 1, "gamma": 0.98, "gae_lambda": 0.9, "clip_range": 0.3,
    "ent_coef": 0.01,
    "hidden": (32, 16), "log_std_init": -1.0, "curriculum_k": 5, "curriculum_floor": 0.1,
    # a checkpoint of this config's shape replaces the placeholder where a run needs the file
    "init_from": "init.zip", "kl_coef": 0.5, "kl_decay": "exponential", "kl_decay_steps": 1000,
    "main_fixed_share": 0.1, "main_pfsp_share": 0.4, "main_pfsp_pool": "all",
    "main_pfsp_window": 3, "main_exploiter_share": 0.2, "main_struggle": 0.25, "main_verify_matches": 4,
    "main_selfplay_floor": 0.35, "main_patch_share": 0.25, "main_patch_pool": "newest", "exploiter_threshold": 0.1, "exploiter_reset_every": 3, "exploiter_target": "held",
    "league_exploiter_reset_p": 0.5, "league_exploiter_fixed_share": 0.2, "payoff_decay": 1.0,
    "opponent": "cpu:2",  # one fixed opponent instead of the curriculum (a spec Ray can ship)
    "eval_levels": (2,),
    "eval_episodes": 1,
}


def _flags(values: dict) -> list[str]:
    out = []
    for k, v in values.items():
        out += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, tuple) else str(v)]
    return out


# ------------------------------------------------------------------ the config (no server)
def test_every_config_field_is_a_cli_flag():
    assert set(NON_DEFAULT) == set(config_fields()), "give every new TrainConfig field a test value"
    defaults = TrainConfig()
    for k, v in NON_DEFAULT.items():
        assert getattr(defaults, k) != v, k
    cfg = config_from_args(build_parser().parse_args(_flags(NON_DEFAULT)))
    assert dataclasses.asdict(cfg) == NON_DEFAULT
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # metadata round trip
    assert config_from_args(build_parser().parse_args(["--lr", "0.5"])).learning_rate == 0.5


def test_bad_settings_are_refused_with_their_name():
    with pytest.raises(ValueError, match="unknown TrainConfig setting.*'lernrate'"):
        TrainConfig.from_dict({"lernrate": 1e-3})
    with pytest.raises(ValueError, match="n_envs must be >= 1"):
        TrainConfig.from_dict({"n_envs": 0})
    with pytest.raises(ValueError, match="eval_levels"):
        TrainConfig.from_dict({"eval_levels": "1,9"})
    r = run_cli("train", "--n-envs", "0")
    assert r.returncode == 2 and "n_envs must be >= 1" in r.stderr and "Traceback" not in r.stderr


def test_a_resume_keeps_the_runs_settings_but_for_what_is_given():
    """The run's ``config`` (what ``make train`` trained with) wins over this call's
    defaults; a flag given now wins over the run's, and is listed; the generation count
    and the machine's resources are always the call's; the network cannot change."""
    run = TrainConfig(steps_per_generation=50_000, kl_coef=0.1, init_from="clone.zip",
                      n_envs=4, generations=2, seed=5).to_dict()
    run["an_old_setting"] = 1  # a field TrainConfig no longer has
    here = TrainConfig(generations=1)  # a notebook's defaults but for generations
    cfg, changes = resumed_config(here, run, frozenset({"generations"}))
    assert (cfg.steps_per_generation, cfg.kl_coef, cfg.init_from, cfg.seed) == (
        50_000, 0.1, "clone.zip", 5)
    assert (cfg.generations, cfg.n_envs) == (1, TrainConfig().n_envs), "how much to train and on what: the call's"
    assert changes == ["an_old_setting (no longer a setting: ignored)"]
    del run["an_old_setting"]
    cfg, changes = resumed_config(TrainConfig(ent_coef=0.01), run,
                                  frozenset({"ent_coef", "steps_per_generation"}))
    assert cfg.ent_coef == 0.01 and cfg.steps_per_generation == 100_000 and cfg.kl_coef == 0.1
    assert changes == ["steps_per_generation 50000 -> 100000", "ent_coef 0.003 -> 0.01"]
    # chosen unknown (the Python API): the fields that differ from the defaults count
    cfg, changes = resumed_config(TrainConfig(ent_coef=0.01), run, None)
    assert cfg.ent_coef == 0.01 and cfg.steps_per_generation == 50_000
    assert changes == ["ent_coef 0.003 -> 0.01"]
    with pytest.raises(ValueError, match=r"--hidden 32,32: a resumed run keeps its hidden \(64,64\)"):
        resumed_config(TrainConfig(hidden=(32, 32)), run, frozenset({"hidden"}))


def test_a_resume_whose_kl_reference_is_gone_says_what_to_pass(tmp_path):
    """A run resumed with its KL term toward a clone this machine lacks (a registry
    resume on a fresh runtime): one line naming the flags, before any server starts;
    the flag given now is what the resume uses."""
    run = tmp_path / "runs" / "main" / "r"
    run.mkdir(parents=True)
    (run / "gen_0000.zip").write_bytes(b"never read: refused before the model loads")
    config = TrainConfig(kl_coef=0.1, init_from=str(tmp_path / "gone.zip")).to_dict()
    (run / "gen_0000.json").write_text(json.dumps({"generation": 0, "config": config}))
    r = run_cli("train", "--resume", "--run-dir", str(run), "--no-progress", timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"train: the resumed run's KL term (kl_coef 0.1) pulls toward its --init-from "
        f"{tmp_path / 'gone.zip'}, which is not on this machine: pass --init-from CKPT (that "
        "checkpoint) or --kl-coef 0"]


def test_train_knows_which_flags_were_given():
    """Given at its default's value still counts (``--steps-per-generation 100000`` on a
    resume restores the default over the run's 50,000)."""
    args, chosen = parse_config_args(build_parser(), ["--steps-per-generation", "100000",
                                                      "--lr", "0.001", "--resume"])
    assert chosen == {"steps_per_generation", "learning_rate"}
    assert args.steps_per_generation == 100_000 and args.learning_rate == 0.001
    assert args.kl_coef == TrainConfig().kl_coef and args.resume
    assert config_from_args(args) == TrainConfig(learning_rate=0.001)


def test_notebook_parameters_are_config_fields():
    """The train_role notebook's parameters are TrainConfig fields (None = the package's
    QUICK_START size, else the field's default) plus a few notebook-only ones: the
    notebook declares no defaults of its own."""
    import nbformat
    from helpers import ROOT

    nb = nbformat.read(ROOT / "notebooks" / "train_role.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    ns: dict = {}
    exec(cell.source, ns)  # noqa: S102 - our own notebook's literal assignments
    params = {k: v for k, v in ns.items() if not k.startswith("__")}
    notebook_only = {"config", "run_dir", "progress", "league_dir", "runs_root", "resume",
                     "clone_dir", "clone_args"}
    assert set(QUICK_START) <= set(config_fields())
    TrainConfig.from_dict({**QUICK_START, "init_from": "clone.zip"}).validate()
    assert set(params) - notebook_only <= set(config_fields())
    for k in set(params) - notebook_only:
        assert params[k] is None or (k == "role" and params[k] == TrainConfig().role), k


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


# ------------------------------------------------------------------ tiny real runs
@pytest.mark.training
def test_every_setting_reaches_the_run_and_its_metadata(tmp_path):
    from brawlkit.training.ppo import scratch_checkpoint

    run = tmp_path / "run"
    shape = {k: NON_DEFAULT[k] for k in ("action_repeat", "input_layout", "log_std_init", "hidden")}
    values = {**NON_DEFAULT, "init_from": str(scratch_checkpoint(
        tmp_path / "init.zip", learn_steps=0, cfg=TrainConfig(**shape)))}
    r = run_cli("train", *_flags(values), "--run-dir", str(run), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads((run / "gen_0000.json").read_text())
    assert meta["config"] == TrainConfig(**values).to_dict()
    assert meta["parent"] == values["init_from"]
    assert meta["role"] == "main_exploiter" and meta["seed"] == 3
    assert meta["policy"]["action_repeat"] == 3 and meta["policy"]["reward"] == "outcome"
    assert meta["reward_config"]["win"] == 2.0 and set(meta["eval"]) == {"cpu_2"}
    data = json.loads(zipfile.ZipFile(run / "gen_0000.zip").read("data"))
    assert data["brawlkit"] == {"action_repeat": 3, "input_layout": 1, "reward": "outcome"}
    assert meta["policy"]["obs_dim"] == 31  # layout 1: the plain observation
    assert data["learning_rate"] == 1e-4 and data["n_epochs"] == 1 and data["gamma"] == 0.98


@pytest.mark.training
def test_tiny_train_resume_and_eval_cli(tmp_path):
    run = tmp_path / "runs" / "main" / "t"
    common = ["--role", "main", "--steps-per-generation", "256", "--n-envs", "2",
              "--run-dir", str(run), "--seed", "3", "--eval-levels", "1", "--eval-episodes", "1",
              "--max-episode-steps", "60", "--no-progress", "--json"]
    r = run_cli("train", "--generations", "1", *common)
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    zip0, meta0 = run / "gen_0000.zip", run / "gen_0000.json"
    assert zip0.is_file() and zipfile.is_zipfile(zip0) and meta0.is_file()
    assert out["final_checkpoint"] == str(zip0)
    meta = json.loads(meta0.read_text())
    for key in ("role", "generation", "parent", "steps", "created", "seed", "eval", "policy", "config"):
        assert key in meta
    assert meta["role"] == "main" and meta["generation"] == 0 and meta["parent"] is None
    assert meta["policy"]["obs_dim"] == 79 and meta["policy"]["act_dim"] == 6  # layout 2
    assert meta["policy"]["input_layout"] == 2
    assert meta["policy"]["net_arch"] == {"pi": [64, 64], "vf": [64, 64]}
    assert meta["steps"] >= 256
    assert set(meta["eval"]) == {"cpu_1"} and meta["eval"]["cpu_1"]["episodes"] == 1
    assert 0.0 <= meta["eval"]["cpu_1"]["sampled_win_rate"] <= 1.0
    # the generation whose deterministic policy plays best is named in best.json
    best = json.loads((run / "best.json").read_text())
    assert best["checkpoint"] == "gen_0000.zip" and best["score"] == meta["selection_score"]
    assert out["best_checkpoint"] == str(zip0)

    df = pd.read_csv(run / "progress.csv")
    for key in ("train/entropy_loss", "train/std", "train/approx_kl", "rollout/ep_rew_mean",
                "reward/outcome", "reward/survival", "reward/activity", "reward/time_pressure",
                "reward/streak", "eval/win_rate/cpu_1", "eval/sampled_win_rate/cpu_1",
                "play/spam_fraction"):
        assert key in df.columns, key
    assert list(run.glob("events.out.tfevents.*")), "no TensorBoard log"

    # --resume continues from the newest checkpoint, with the run's settings: only the
    # flag given now changes one (and the model trains with it), and the run says so
    # (the machine's resources, --n-envs among them, are always the call's: given as
    # the run had them)
    r = run_cli("train", "--generations", "1", "--resume", "--run-dir", str(run), "--n-envs", "2",
                "--ent-coef", "0.01", "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    meta1 = json.loads((run / "gen_0001.json").read_text())
    assert meta1["parent"] == "gen_0000.zip" and meta1["steps"] > meta["steps"]
    assert meta1["config"] == {**meta["config"], "ent_coef": 0.01}
    assert json.loads(zipfile.ZipFile(run / "gen_0001.zip").read("data"))["ent_coef"] == 0.01
    assert (f"resume {run} after generation 0: the run's settings, changed by this call: "
            "ent_coef 0.003 -> 0.01") in r.stderr
    assert (run / "progress_until_gen_0000.csv").is_file()

    # eval CLI: JSON on the last line
    r = run_cli("eval", "--checkpoint", str(zip0), "--vs", "cpu:1", "--episodes", "1", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["episodes"] == 1 and res["vs"] == "cpu:1" and res["action_repeat"] == 4
    assert res["input_layout"] == 2
    assert res["win_rate"] + res["draw_rate"] + res["loss_rate"] == pytest.approx(1.0)
    # the sampled policy is reported beside the deterministic one, never instead of it
    assert res["sampled"]["episodes"] == 1 and set(res["press_rate"]) == set(res["sampled"]["press_rate"])


@pytest.mark.training
def test_seeded_runs_are_reproducible(tmp_path):
    import torch
    from stable_baselines3 import PPO

    from brawlkit.training.ppo import train

    params = []
    for name in ("a", "b"):
        cfg = TrainConfig(generations=1, steps_per_generation=128, n_envs=2, seed=11,
                          eval_levels=(), n_steps=64, max_episode_steps=40)
        res = train(cfg, run_dir=tmp_path / name, progress=False)
        model = PPO.load(str(res.final_checkpoint), device="cpu")
        params.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert torch.equal(params[0], params[1])


def test_cli_doc_lists_every_setting():
    """docs/cli.md's flag table is the one generated from TrainConfig."""
    from helpers import ROOT

    from brawlkit.training.config import markdown_table

    doc = (ROOT / "docs" / "cli.md").read_text()
    start = doc.index("<!-- TrainConfig table")
    block = doc[doc.index("\n", start) + 1:doc.index("<!-- end of TrainConfig table")].strip()
    assert block == markdown_table(), (
        "docs/cli.md's TrainConfig table is stale: paste the output of "
        "brawlkit.training.config.markdown_table() between its markers")


def test_best_checkpoint_is_chosen_by_the_deterministic_score(tmp_path):
    from brawlkit.training.checkpoints import update_best

    for gen in range(4):
        (tmp_path / f"gen_{gen:04d}.zip").write_bytes(b"zip")
    assert update_best(tmp_path, 0, tmp_path / "gen_0000.zip", 0.5).name == "gen_0000.zip"
    assert update_best(tmp_path, 1, tmp_path / "gen_0001.zip", 0.8).name == "gen_0001.zip"
    assert update_best(tmp_path, 2, tmp_path / "gen_0002.zip", 0.6).name == "gen_0001.zip"
    assert update_best(tmp_path, 3, tmp_path / "gen_0003.zip", 0.8).name == "gen_0003.zip"  # tie: newer
    assert json.loads((tmp_path / "best.json").read_text())["generation"] == 3
    (tmp_path / "best.json").write_text("{torn")  # a corrupt record is replaced, not fatal
    assert update_best(tmp_path, 3, tmp_path / "gen_0003.zip", 0.1).name == "gen_0003.zip"


def test_an_exploiters_reset_returns_to_the_init_from_weights(tmp_path):
    """With --init-from (an imitation start), an exploiter's reset goes back to that
    checkpoint's weights — AlphaStar's exploiters reset to the supervised agent — and
    without it to fresh random weights, the same for the same generation."""
    import torch

    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.export.actor import load_sb3_policy
    from brawlkit.training.ppo import _fresh_weights, scratch_checkpoint

    init = scratch_checkpoint(tmp_path / "init.zip", seed=3, learn_steps=64)
    env = ZeroCostEnv(input_layout=2)

    def params(policy) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in policy.parameters()])

    ref = params(load_sb3_policy(init))
    with_init = TrainConfig(role="main_exploiter", init_from=str(init), n_envs=1)
    assert torch.equal(params(_fresh_weights(with_init, env, 2, None).policy), ref)
    plain = TrainConfig(role="main_exploiter", n_envs=1)
    a, b = (params(_fresh_weights(plain, env, 2, None).policy) for _ in range(2))
    assert torch.equal(a, b) and not torch.equal(a, ref)


@pytest.mark.training
def test_the_widest_width_trains_a_generation_and_evaluates_it(tmp_path):
    """At MAX_N_ENVS the training arenas and the evaluation's share one server (the old
    limit of 64 arenas lost a whole generation at its first evaluation, "server full"),
    and every batched step stays in the fast lane."""
    from brawlkit.training.config import MAX_N_ENVS
    from brawlkit.training.ppo import train

    cfg = TrainConfig(n_envs=MAX_N_ENVS, n_steps=8, batch_size=1024, n_epochs=1,
                      steps_per_generation=8 * MAX_N_ENVS, generations=1, eval_levels=(1,),
                      eval_episodes=1)
    res = train(cfg, run_dir=tmp_path / "run", progress=False)
    meta = json.loads(res.checkpoints[0].with_suffix(".json").read_text())
    assert meta["eval"]["cpu_1"]["episodes"] == 1
    assert meta["lane"]["fallbacks"] == 0 and meta["lane"]["batched_steps"] >= 8
    with pytest.raises(ValueError, match="n_envs must be <="):
        TrainConfig(n_envs=MAX_N_ENVS + 1).validate()
