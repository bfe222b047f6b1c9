"""``python -m brawlkit imitate`` (brawlkit/training/imitation.py) and ``train --init-from``
(training/warmstart.py): the clone learns its teacher through the real collector, the
value targets are the env's own returns, the checkpoint is one ``eval``, ``export`` and
``train`` take as is, and bad input is refused with a message naming it."""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch as th
from helpers import last_json, run_cli

from brawlkit.cli import main as brawlkit_main
from brawlkit.env import BrawlpitEnv
from brawlkit.env.rewards import make_reward
from brawlkit.export.actor import torch_actor_mean
from brawlkit.training import demos as dm
from brawlkit.training import imitation as im
from brawlkit.training.config import TrainConfig


def _tiny(tmp_path: Path, *extra: str) -> list[str]:
    return ["imitate", "--teacher", "5", "--opponents", "3,4", "--matches", "3", "--epochs", "2",
            "--c-eval-matches", "2", "--eval-levels", "1", "--eval-episodes", "1",
            "--run-dir", str(tmp_path / "clone"), "--no-progress", "--json", *extra]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A tiny clone made by the real command (in this process: `brawlkit.cli.main`)."""
    tmp = tmp_path_factory.mktemp("imitate")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert brawlkit_main(_tiny(tmp)) == 0
    return tmp / "clone" / "gen_0000.zip", last_json(out.getvalue())


# ----------------------------------------------------------------- the clone and its data
def test_the_clone_learns_a_policy_teacher(tmp_path: Path) -> None:
    """A teacher of the clone's own network (a random PPO actor exported to .bpw), played
    by the C collector: cloning must bring the held-out buttons far above where they
    started, and the clone's commands close to the teacher's."""
    cfg = TrainConfig(seed=4)
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.ppo import build_model

    teacher = build_model(TrainConfig(seed=9), ZeroCostEnv())
    with th.no_grad():  # larger weights than SB3's tiny action head: buttons that toggle
        teacher.policy.action_net.weight.mul_(30.0)
    blob = im.export_blob(teacher, cfg, tmp_path / "teacher.bpw")
    ds = dm.collect_demos(blob, [3, 6], 4, 1, action_repeat=4)
    split = im._Split.of(ds, cfg, 0.25, cfg.seed)
    model = build_model(cfg, ZeroCostEnv())
    cloner = im.Cloner(model, im.ImitationConfig(lr=3e-3, batch_size=256), cfg.seed)
    before = cloner.metrics(split)
    after = cloner.fit(split, 8, "test", progress=False)[-1]
    assert min(after["button_accuracy"].values()) > 0.9, after["button_accuracy"]
    assert sum(after["button_accuracy"].values()) > sum(before["button_accuracy"].values()) + 0.3
    assert after["loss"] < 0.5 * before["loss"] and after["value_mse"] < before["value_mse"]
    assert set(after) >= {"press_recall", "stick_mae", "buttons_all_right", "teacher_press_rate"}


@pytest.mark.servers
def test_value_targets_are_the_envs_discounted_returns(server_factory: Any, tmp_path: Path) -> None:
    """A real match over UDP, recorded by the server: the value targets computed from its
    replay (demos_from_replay) are the discounted returns of the rewards the env gave."""
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", cpu_level=8, seed=5, extra_args=["--record", str(rec)])
    env = BrawlpitEnv(server=srv, opponent="cpu:8", reward=make_reward("tiered"), action_repeat=4)
    rng = np.random.default_rng(0)
    rewards: list[float] = []
    try:
        env.reset(seed=33)
        done = False
        while not done:
            _, r, term, trunc, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
            rewards.append(float(r))
            done = term or trunc
    finally:
        env.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            dm.demos_from_replay(p, 0).meta["complete"] for p in rec.glob("*.bpr")):
        time.sleep(0.05)
    (path,) = [p for p in rec.glob("*.bpr") if dm.demos_from_replay(p, 0).meta["complete"]]
    ds = dm.demos_from_replay(path, 0, action_repeat=4)
    assert len(ds) == len(rewards)
    want, g = np.zeros(len(rewards)), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        g = rewards[i] + 0.99 * g
        want[i] = g
    assert np.allclose(im.value_targets(ds, "tiered", 0.99), want, atol=1e-4)


def test_dataset_split_holds_out_whole_matches() -> None:
    ds = dm.collect_cpu_demos(5, [4, 6], 5, 2, action_repeat=4)
    train, val = im.split_rows(ds, 0.2, 0)
    assert len(np.intersect1d(ds.match[train], ds.match[val])) == 0
    assert len(np.union1d(train, val)) == len(ds) and len(np.unique(ds.match[val])) == 2


# ----------------------------------------------------------------- the command
@pytest.mark.servers
def test_imitate_writes_a_checkpoint_that_eval_and_export_take(
        clone: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    zip_path, out = clone
    meta = json.loads(zip_path.with_suffix(".json").read_text())
    # the keys of a training generation's metadata (ppo._Generations._metadata), plus imitation
    for key in ("role", "parent", "steps", "steps_this_generation", "created", "seed", "config",
                "policy", "reward_config", "sampler", "eval", "selection_score", "member",
                "reset_after", "generation", "checkpoint"):
        assert key in meta, key
    assert meta["generation"] == 0 and meta["steps"] == 0 and meta["policy"]["obs_dim"] == 79
    imi = meta["imitation"]
    assert imi["dataset"]["label_rule"] == "last_press" and imi["dataset"]["matches"] == 6
    assert len(imi["history"]) == 2 and set(imi["history"][-1]["button_accuracy"]) == set(im.BUTTONS)
    assert set(imi["c_eval"]) == {f"cpu_{lv}" for lv in range(1, 9)} and "cpu_1" in meta["eval"]
    assert json.loads((zip_path.parent / "best.json").read_text())["checkpoint"] == "gen_0000.zip"
    assert out["checkpoint"] == str(zip_path) and out["rows"] == imi["dataset"]["rows"]
    data = json.loads(zipfile.ZipFile(zip_path).read("data"))
    assert data["brawlkit"] == {"action_repeat": 4, "input_layout": 2, "reward": "tiered"}

    r = run_cli("eval", "--checkpoint", str(zip_path), "--vs", "cpu:1", "--episodes", "2",
                "--seed", "12345", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["episodes"] == 2 and res["action_repeat"] == 4 and res["input_layout"] == 2
    blob = tmp_path / "clone.bpw"
    r = run_cli("export", str(zip_path), "-o", str(blob), "--json")
    assert r.returncode == 0, r.stderr
    # the blob plays the clone's deterministic commands (the C forward = the torch actor)
    from brawlkit.export.actor import load_sb3_policy

    rows = dm.collect_cpu_demos(6, [6], 1, 3, action_repeat=4).inputs[:300]
    with dm.NativePolicy(blob) as pol:
        c_cmds = pol.commands(rows)
    mean = torch_actor_mean(load_sb3_policy(zip_path), rows)
    assert [int(b) for b in c_cmds["buttons"]] == [
        sum(bit for bit, v in zip((1, 2, 4, 8), m[2:], strict=True) if v > 0) for m in mean]


def test_imitate_dagger_rounds_add_the_students_states(tmp_path: Path) -> None:
    cfg = TrainConfig(seed=2, eval_episodes=0, hidden=(32, 16))  # the metadata says its shape
    icfg = im.ImitationConfig(teachers=(5,), opponents=(4,), matches=3, epochs=1, dagger_rounds=1,
                              dagger_beta=0.5, dagger_matches=2, dagger_epochs=1, c_eval_matches=0)
    res = im.imitate(icfg, cfg, run_dir=tmp_path / "d", progress=False)
    (rnd,) = res.dagger
    assert rnd["matches"] == 2 and 0 < rnd["student_decisions"] < rnd["rows"]
    meta = json.loads((tmp_path / "d" / "gen_0000.json").read_text())
    assert meta["imitation"]["dataset"]["matches"] == 5 and meta["eval"] == {}
    assert meta["selection_score"] is None and not (tmp_path / "d" / "best.json").exists()
    assert any(p.get("student") for p in meta["imitation"]["dataset"]["parts"])
    assert meta["policy"]["net_arch"] == {"pi": [32, 16], "vf": [32, 16]}


def test_imitate_takes_trainconfigs_flags_from_trainconfig(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``imitate``'s TrainConfig flags are ``train``'s own declarations (same option
    strings, default and help), ``--hidden`` among them, and the clone has that network."""
    from brawlkit.training.cli import build_parser as train_parser

    def options(ap: Any) -> dict[str, tuple[Any, ...]]:
        return {a.dest: (tuple(a.option_strings), a.default, a.help, a.choices)
                for a in ap._actions if a.dest in im.TRAIN_FIELDS}

    assert set(options(im.build_parser())) == set(im.TRAIN_FIELDS)
    assert options(im.build_parser()) == options(train_parser())
    assert brawlkit_main(_tiny(tmp_path, "--hidden", "32,16", "--eval-episodes", "0",
                               "--c-eval-matches", "0", "--epochs", "1")) == 0
    meta = json.loads((tmp_path / "clone" / "gen_0000.json").read_text())
    assert meta["policy"]["net_arch"] == {"pi": [32, 16], "vf": [32, 16]}
    assert meta["config"]["hidden"] == [32, 16]
    assert last_json(capsys.readouterr().out)["checkpoint"].endswith("gen_0000.zip")


@pytest.mark.parametrize(("extra", "message"), [
    (["--label-rule", "sometimes"], "invalid choice"),
    (["--replay", "x.bpr"], "FILE.bpr:SLOT"),
    (["--replay", "missing.bpr:0"], "missing.bpr not found"),
    (["--matches", "0"], "no data"),
    (["--matches", "0", "--data", "d.npz", "--dagger-rounds", "1"], "DAgger needs the CPU"),
    (["--teacher", "9"], "teachers must be CPU levels"),
    (["--holdout", "1.5"], "holdout must be in"),
    (["--teacher", "x"], "comma-separated CPU levels"),
])
def test_imitate_refuses_bad_input_naming_it(tmp_path: Path, extra: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        brawlkit_main(_tiny(tmp_path, *extra))
    assert message in capsys.readouterr().err


def test_imitate_refuses_a_set_of_another_cadence_and_a_used_run_dir(tmp_path: Path) -> None:
    data = dm.collect_cpu_demos(4, [3], 1, 0, action_repeat=2).save(tmp_path / "r2.npz")
    cfg = TrainConfig(eval_episodes=0)
    icfg = im.ImitationConfig(matches=0, data=(str(data),), epochs=1, c_eval_matches=0)
    with pytest.raises(ValueError, match="r2.npz: action repeat 2, this run --action-repeat 4"):
        im.imitate(icfg, cfg, run_dir=tmp_path / "a", progress=False)
    ok = im.imitate(im.ImitationConfig(matches=0, data=(str(data),), epochs=1, c_eval_matches=0),
                    TrainConfig(action_repeat=2, eval_episodes=0), run_dir=tmp_path / "b",
                    progress=False)
    assert ok.checkpoint.is_file()
    with pytest.raises(FileExistsError, match="already holds checkpoints"):
        im.imitate(icfg, TrainConfig(action_repeat=2, eval_episodes=0), run_dir=tmp_path / "b",
                   progress=False)


def test_imitate_ensure_builds_the_clone_once_and_again_only_for_other_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``imitate --ensure`` (make train's, and ensure_clone's for the notebook and the Colab
    bootstrap): the shipped settings under the given ones, built when absent, reused when
    built alike, rebuilt in place when built otherwise; a directory of other checkpoints
    is refused."""
    run = tmp_path / "imitate"
    tiny = ["imitate", "--ensure", "--run-dir", str(run), "--opponents", "3", "--matches", "2",
            "--epochs", "1", "--dagger-rounds", "0", "--no-progress"]
    assert brawlkit_main(tiny) == 0
    meta = json.loads((run / "gen_0000.json").read_text())
    settings = meta["imitation"]["settings"]  # CLONE_ARGS under the flags given
    assert settings["teachers"] == [8] and settings["label_rule"] == "last_press"
    assert settings["matches"] == 2 and settings["dagger_beta"] == 1.0 and settings["epochs"] == 1
    built = (run / "gen_0000.zip").stat().st_mtime_ns
    capsys.readouterr()
    assert brawlkit_main(tiny) == 0  # the same settings: reused, not rebuilt
    assert "already built with these settings" in capsys.readouterr().out
    assert (run / "gen_0000.zip").stat().st_mtime_ns == built
    # the Python side (the notebook's): the same clone, shaped like the run
    assert im.ensure_clone(run, tiny[4:-1], like=TrainConfig(), progress=False) == run / "gen_0000.zip"
    assert (run / "gen_0000.zip").stat().st_mtime_ns == built
    # another network cadence: rebuilt in place
    again = im.ensure_clone(run, tiny[4:-1], like=TrainConfig(action_repeat=8), progress=False)
    assert json.loads(again.with_suffix(".json").read_text())["config"]["action_repeat"] == 8
    with pytest.raises(ValueError, match=r"unknown `imitate` flag\(s\) \['--bogus'\]"):
        im.ensure_clone(run, ["--bogus"])
    (run / "gen_0001.json").write_text("{}")  # not one clone any more
    (run / "gen_0001.zip").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="not one imitation clone"):
        im.ensure_clone(run, tiny[4:-1], progress=False)


def test_the_held_teacher_table_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert brawlkit_main(["imitate", "table", "--teachers", "6", "--repeats", "1,4",
                          "--rules", "held,last_press", "--matches", "4", "--json"]) == 0
    out = last_json(capsys.readouterr().out)
    cells = {(r["opponent"], r["repeat"], r["rule"]): r for r in out["rows"]}
    assert set(cells) == {(o, r, rule) for o in (5, 6) for r, rule in
                          ((1, "full rate"), (4, "held"), (4, "last_press"))}
    for r in out["rows"]:
        assert r["win"] + r["draw"] + r["loss"] == 4
    full = [dm.full_rate_cpu_match(*((6, 5) if j % 2 == 0 else (5, 6)), 1 + j)[0] for j in range(4)]
    assert cells[(5, 1, "full rate")]["win"] == sum(w == j % 2 for j, w in enumerate(full))
    assert cells[(5, 4, "held")]["dropped"] > cells[(5, 4, "last_press")]["dropped"]


# ----------------------------------------------------------------- train --init-from
@pytest.mark.training
def test_train_init_from_the_clone_with_kl(clone: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """A new league run whose generation 0 starts from the clone (policy and value): at a
    learning rate of ~0 its weights are the clone's; the parent is recorded; the KL term
    is logged."""
    zip_path, _ = clone
    run = tmp_path / "runs" / "main" / "k"
    r = run_cli("train", "--role", "main", "--generations", "1", "--steps-per-generation", "128",
                "--n-envs", "1", "--n-steps", "64", "--batch-size", "32", "--learning-rate", "1e-12",
                "--init-from", str(zip_path), "--kl-coef", "0.5", "--kl-decay-steps", "1000",
                "--eval-levels", "1", "--eval-episodes", "1", "--max-episode-steps", "40",
                "--league-dir", str(tmp_path / "league"), "--run-dir", str(run), "--no-progress",
                "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads((run / "gen_0000.json").read_text())
    assert meta["parent"] == str(zip_path) and meta["config"]["init_from"] == str(zip_path)
    assert meta["config"]["kl_coef"] == 0.5 and meta["member"]
    from brawlkit.export.actor import load_sb3_policy

    got, want = load_sb3_policy(run / "gen_0000.zip").state_dict(), load_sb3_policy(zip_path).state_dict()
    assert set(got) == set(want) and all(th.allclose(got[k], want[k], atol=1e-6) for k in want)
    df = pd.read_csv(run / "progress.csv")
    assert "train/kl_teacher" in df.columns and df["train/kl_coef"].dropna().iloc[0] < 0.5


@pytest.mark.parametrize(("cfg", "message"), [
    ({"action_repeat": 2}, "action repeat 4 (this run: --action-repeat 2)"),
    ({"input_layout": 1}, "input layout 2 (this run: --input-layout 1); network: "),
])
def test_init_from_refuses_a_checkpoint_of_another_shape(
        clone: tuple[Path, dict[str, Any]], cfg: dict[str, Any], message: str) -> None:
    from brawlkit.training.warmstart import check_init_from

    zip_path, _ = clone
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_init_from(TrainConfig(init_from=str(zip_path), **cfg))


def test_init_from_refuses_a_missing_file_and_a_non_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through `train`'s own entry point, before any server starts."""
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    for name, message in (("nope.zip", "nope.zip not found"),
                          ("junk.zip", "junk.zip is not a zip, so not an SB3 checkpoint")):
        assert brawlkit_main(["train", "--init-from", str(tmp_path / name), "--no-progress",
                              "--run-dir", str(tmp_path / "run")]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    with pytest.raises(SystemExit):
        brawlkit_main(["train", "--kl-coef", "0.1"])
    assert "kl_coef > 0 needs init_from" in capsys.readouterr().err
