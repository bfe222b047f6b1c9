"""``league harden``: best-response rounds after a league, through the CLI on a real
league directory — each round's exploiter is trained against Main's newest checkpoint,
joins the pool frozen as a main exploiter, and Main resumes its run against it; a rerun
continues (nothing retrained), bad input is one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import last_json, run_cli

from brawlkit.league.directory import LeagueDir
from brawlkit.training.checkpoints import list_checkpoints
from brawlkit.training.config import TrainConfig
from brawlkit.training.harden import HardenSettings, member_id

#: full matches at action repeat 8 (at most 1125 steps), so each env finishes one
TINY = {"steps_per_generation": 2304, "n_envs": 2, "n_steps": 128, "batch_size": 256,
        "n_epochs": 1, "action_repeat": 8, "eval_levels": (1,), "eval_episodes": 1}


def test_harden_rounds_patch_main_against_exploiters_of_itself(tmp_path: Path) -> None:
    from brawlkit.training.ppo import scratch_checkpoint, train

    league = tmp_path / "league"
    clone = scratch_checkpoint(tmp_path / "clone.zip", seed=2,
                               cfg=TrainConfig(action_repeat=8))
    main_cfg = TrainConfig(**TINY, generations=1, seed=5, init_from=str(clone),
                           main_verify_matches=1)
    run_dir = train(main_cfg, run_dir=tmp_path / "main", league_dir=league,
                    progress=False).run_dir
    out = tmp_path / "harden"
    argv = ["league", "harden", "--league-dir", str(league), "--run-dir", str(run_dir),
            "--init-from", str(clone), "--rounds", "2", "--exploiter-steps", "2304",
            "--exploiter-generations", "1", "--matches", "2", "--curve-matches", "1",
            "--main-generations", "1", "--main-steps-per-generation", "2304",
            "--patch-share", "0.9", "--patch-pool", "newest", "--out", str(out),
            "--no-progress", "--json"]
    r = run_cli(*argv, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = last_json(r.stdout)
    rounds = res["rounds"]
    assert [x["round"] for x in rounds] == [0, 1]
    assert json.loads((out / "rounds.json").read_text())["rounds"] == rounds
    # round 0's exploiter trained against Main's league generation, round 1's against the
    # generation Main trained after round 0
    assert [Path(x["target"]).name for x in rounds] == ["gen_0000.zip", "gen_0001.zip"]
    assert [x["main_generation"] for x in rounds] == [1, 2]
    assert [g for g, _ in list_checkpoints(run_dir)] == [0, 1, 2]
    for x in rounds:
        assert x["exploiter"] == member_id(5, x["round"])
        f = x["fresh"]
        assert f["matches"] == 2 and f["wins"] + f["draws"] + f["losses"] == 2
        assert len(x["curve"]) == 1 and x["exploiter_env_steps"] >= 2304
    # each exploiter joined the pool frozen, as a main exploiter with its blob
    pool = LeagueDir(league, create=False)
    joined = {m.id: m for m in pool.members(include_permanent=False)}
    for x in rounds:
        m = joined[x["exploiter"]]
        assert m.role == "main_exploiter" and m.settings["harden_round"] == x["round"]
        assert pool.blob_path(m) is not None and pool.blob_path(m).is_file()
        # the exploiter was trained against that round's target alone, from the clone
        assert m.settings["init_from"] == str(clone)
        assert Path(m.settings["opponent"]).name == "target.bpw"
    # Main resumed its own run with the patch share, and its deterministic policy was
    # verified against the exploiters after each generation (eval records in the log)
    meta = json.loads((run_dir / "gen_0002.json").read_text())
    assert meta["config"]["main_patch_share"] == 0.9
    assert meta["config"]["main_patch_pool"] == "newest"
    assert meta["config"]["main_verify_matches"] == 1  # the run's own, kept on resume
    assert meta["config"]["action_repeat"] == 8
    verified = {(m.a, m.b) for m in pool.matches() if m.source == "eval"}
    assert (f"{meta['member']}", rounds[1]["exploiter"]) in verified
    assert (f"{meta['member']}", rounds[0]["exploiter"]) in verified
    # what the rounds ship: the Mains after each round, one played per match
    from brawlkit.export.bpw import split_mixture
    from brawlkit.export.cli import export_checkpoint

    raws = split_mixture((out / "mixture.bpw").read_bytes())
    for g, raw in zip((1, 2), raws, strict=True):
        export_checkpoint(run_dir / f"gen_{g:04d}.zip", tmp_path / f"g{g}.bpw")
        assert raw == (tmp_path / f"g{g}.bpw").read_bytes()
    # a rerun has nothing left to do: the same rounds, no generation retrained
    made = (run_dir / "gen_0002.zip").stat().st_mtime_ns
    r2 = run_cli(*argv, timeout=300)
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert last_json(r2.stdout)["rounds"] == rounds
    assert last_json(r2.stdout)["mixture"] == str(out / "mixture.bpw")
    assert (run_dir / "gen_0002.zip").stat().st_mtime_ns == made
    # other settings are refused, naming the record
    r3 = run_cli(*[("0.5" if a == "0.9" else a) for a in argv], timeout=300)
    assert r3.returncode == 2 and "rounds.json was made with other settings" in r3.stderr
    # what ships is chosen at the end: the same rounds (nothing retrained) shipped as the
    # rounds' targets in their maximin shares against every round's exploiter
    r4 = run_cli(*argv, "--mixture", "nash", "--mixture-matches", "2", timeout=300)
    assert r4.returncode == 0, r4.stderr[-3000:]
    assert last_json(r4.stdout)["rounds"] == rounds
    assert (run_dir / "gen_0002.zip").stat().st_mtime_ns == made
    nash = json.loads((out / "nash.json").read_text())
    assert nash["rows"] == [x["target"] for x in rounds]
    assert nash["columns"] == [x["exploiter"] for x in rounds]
    score = np.array(nash["score"])
    assert score.shape == (2, 2) and set(score.ravel()) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    w = np.array(nash["weights"])
    assert w.sum() == pytest.approx(1.0, abs=1e-3)
    low, high = nash["value"]
    assert low <= high + 1e-9 and (w @ score).min() == pytest.approx(low, abs=1e-3)
    # the file is the targets, each as many times as its slots say (one: a plain blob)
    want = [export_checkpoint(Path(p), tmp_path / f"t{i}.bpw")["out"]
            for i, p in enumerate(nash["rows"])]
    parts = [Path(want[i]).read_bytes() for i, n in enumerate(nash["slots"]) for _ in range(n)]
    shipped = (out / "mixture.bpw").read_bytes()
    assert (split_mixture(shipped) if len(parts) > 1 else [shipped]) == parts


def test_harden_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    r = run_cli("league", "harden", "--league-dir", str(tmp_path / "league"), "--run-dir",
                str(tmp_path / "nothing"), "--init-from", str(tmp_path / "clone.zip"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "league harden:" in r.stderr
    r = run_cli("league", "harden", "--league-dir", str(tmp_path), "--run-dir", str(tmp_path),
                "--init-from", "x.zip", "--patch-share", "1.5")
    assert r.returncode == 2 and "patch_share must be in [0, 1], got 1.5" in r.stderr
    from brawlkit.bench.learn import LearnConfig

    recipe = tmp_path / "r.toml"
    recipe.write_text('kind = "league"\nbudget_steps = 300000\nroles = ["main"]\n'
                      'pick = "mixture"\n[train]\nsteps_per_generation = 100000\n')
    with pytest.raises(ValueError, match="needs a \\[harden\\] table with rounds >= 2"):
        LearnConfig.load(recipe)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['round'\]"):
        HardenSettings.from_dict({"round": 2})
    with pytest.raises(ValueError, match="exploiter_steps .* must be >= exploiter_generations"):
        HardenSettings.from_dict({"exploiter_steps": 2, "exploiter_generations": 5})
