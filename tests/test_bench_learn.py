"""``bench learn``: a recipe file trained over seeds and judged on fresh matches with
intervals — the recipe checks, the Wilson interval, and one tiny run through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import last_json, run_cli

from brawlkit.bench.learn import LearnConfig, pooled
from brawlkit.common.stats import wilson_interval
from brawlkit.training.evaluate import opponent_seed

TINY = """
name = "tiny"
kind = "{kind}"
budget_steps = 512
seeds = [4]
roles = ["main"]
pick = "best"
[train]
steps_per_generation = 256
n_envs = 2
n_steps = 128
batch_size = 64
n_epochs = 1
max_episode_steps = 150
eval_levels = [1]
eval_episodes = 1
main_fixed_share = 0.5
main_pfsp_share = 0.3
main_pfsp_pool = "learned"
[eval]
matches = 3
opponents = ["baseline", "cpu:2"]
"""


def test_wilson_interval_matches_the_formula() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-5), pytest.approx(0.76341, abs=1e-5))
    lo, hi = wilson_interval(100, 100)
    assert hi == 1.0 and lo == pytest.approx(0.96300, abs=1e-5)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_recipes_in_the_repository_load(tmp_path: Path) -> None:
    from brawlkit.bench.learn import CONFIG_DIR
    from brawlkit.common.paths import repo_root

    files = sorted((repo_root() / CONFIG_DIR).glob("*.toml"))
    assert files, "configs/learn/ holds the README's recipes"
    for f in files:
        cfg = LearnConfig.load(f)
        assert cfg.generations() >= 1 and cfg.matches >= 100, f.name


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("budget_steps = 512", "budget_steps = 500"), "multiple"),
    (lambda t: t.replace('kind = "curriculum"', 'kind = "tournament"'), "kind must be"),
    (lambda t: t.replace("n_epochs = 1", "n_epochs = 1\ngenerations = 3"), "generations"),
    (lambda t: t.replace("n_epochs = 1", "n_epoch = 1"), "n_epoch"),
    (lambda t: t + "colour = 1\n", "unknown key"),
    (lambda t: t.replace('"cpu:2"', '"cpu:9"'), "cpu:9"),
    (lambda t: t.replace("[eval]", '[eval]\npolicy = "greedy"'), "eval.policy must be one of"),
    (lambda t: t.replace("main_pfsp_share = 0.3", "main_pfsp_share = 0.6"), r"\[train\] main_fixed"),
    (lambda t: t + "[exploit]\nsteps = 0\n", r"\[exploit\] --steps \(0\) must be"),
    (lambda t: t + "[exploit]\nseed = [1]\n", r"unknown key\(s\) \['exploit.seed'\]"),
    (lambda t: t + "[exploit]\nrandom = false\n", r"\[exploit\] no exploiter to train"),
    (lambda t: t + "[exploit]\nsteps = 'many'\n", r"\[exploit\] a value is not a number"),
])
def test_a_bad_recipe_is_refused_naming_the_key(tmp_path: Path, edit, message) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(edit(TINY.format(kind="curriculum")))
    with pytest.raises(ValueError, match=message):
        LearnConfig.load(f)


def test_pooled_sums_seeds_and_reports_their_spread() -> None:
    seeds = [{"eval": {"cpu:1": {"wins": w, "draws": 0, "losses": 10 - w, "win_rate": w / 10}}}
             for w in (2, 8)]
    p = pooled(seeds, ("cpu:1",))["cpu:1"]
    assert (p["wins"], p["losses"], p["win_rate"], p["spread"]) == (10, 10, 0.5, [0.2, 0.8])
    assert p["win_ci"] == [round(x, 4) for x in wilson_interval(10, 20)]
    assert len({opponent_seed(o) for o in ("baseline", "cpu:1", "cpu:8")}) == 3


@pytest.mark.training
@pytest.mark.servers
def test_a_tiny_recipe_trains_and_is_judged_through_the_cli(tmp_path: Path) -> None:
    """A league recipe (its runner, flags and run directories; the curriculum kind calls
    ``train`` directly, tested in test_train.py), stopped after its first generation and
    continued from there, judged, then found done on a rerun."""
    from brawlkit.training.checkpoints import list_checkpoints

    recipe = tmp_path / "tiny.toml"
    out = tmp_path / "out"
    # what a call stopped in its second generation leaves: the first one finished (a
    # budget of one generation), no train.json
    recipe.write_text(TINY.format(kind="league").replace("budget_steps = 512", "budget_steps = 256"))
    r = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = (out / "s4" / "runs" / "main").iterdir()
    assert [g for g, _ in list_checkpoints(run_dir)] == [0]
    for f in out.glob("s4/*.json"):
        f.unlink()
    recipe.write_text(TINY.format(kind="league"))
    r = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", "--json",
                timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "continuing the generations an earlier call finished (main 1/2)" in r.stderr, r.stderr
    assert [g for g, _ in list_checkpoints(run_dir)] == [0, 1]  # the same run, one more
    assert list((out / "s4" / "runs" / "main").iterdir()) == [run_dir]
    res = last_json(r.stdout)
    (seed,) = res["seeds"]
    assert seed["resumed"] == {"main": 1}
    assert seed["seed"] == 4 and seed["env_steps"] >= 512 and seed["pick"] == "best"
    assert seed["verified"] == []  # a league that did not verify Main
    assert Path(seed["checkpoint"]).is_file()
    for opp in ("baseline", "cpu:2"):
        ev = seed["eval"][opp]
        assert ev["wins"] + ev["draws"] + ev["losses"] == ev["episodes"] == 3
        lo, hi = ev["win_ci"]
        assert lo <= ev["win_rate"] <= hi
        assert res["pooled"][opp]["wins"] == ev["wins"]
    assert set(seed["playstyle"]["press_rate"]) == {"jump", "attack", "special", "shield"}
    assert "pooled W/D/L" in r.stdout and json.loads((out / "result.json").read_text()) == res
    # a rerun finds both halves done and trains nothing
    again = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", "--json",
                    timeout=120)
    assert again.returncode == 0 and last_json(again.stdout) == res
    # --policy sampled judges the same run's sampled policy (export --sampled) on the same
    # matches, beside the deterministic record, and trains nothing
    trained = (out / "s4" / "train.json").stat().st_mtime_ns
    r = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", "--json",
                "--policy", "sampled", timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    sampled = last_json(r.stdout)
    assert sampled["policy"] == "sampled" and res["policy"] == "deterministic"
    assert (out / "s4" / "train.json").stat().st_mtime_ns == trained
    assert json.loads((out / "s4" / "eval_sampled.json").read_text())["policy"] == "sampled"
    assert sampled["seeds"][0]["checkpoint"] == seed["checkpoint"]
    assert sampled["seeds"][0]["eval"]["cpu:2"]["episodes"] == 3
    assert "sampled policy" in r.stdout


IMITATION = """
name = "clone"
kind = "imitation"
budget_steps = 0
seeds = [2]
[train]
eval_levels = [1]
eval_episodes = 1
[imitation]
teachers = [5]
opponents = [2, 4]
matches = 2
epochs = 1
c_eval_matches = 0
[eval]
matches = 2
opponents = ["cpu:1"]
"""


@pytest.mark.training
@pytest.mark.servers
def test_an_imitation_recipe_judges_the_clone_itself(tmp_path: Path) -> None:
    """kind "imitation": demonstrations collected, the actor cloned (docs/imitation.md), and
    the clone — before any RL — judged like any shipped policy."""
    recipe = tmp_path / "clone.toml"
    recipe.write_text(IMITATION)
    r = run_cli("bench", "learn", str(recipe), "--out", str(tmp_path / "out"), "--no-progress",
                "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (seed,) = last_json(r.stdout)["seeds"]
    assert seed["env_steps"] == 0 and seed["imitation_seconds"] > 0
    assert Path(seed["checkpoint"]).name == "gen_0000.zip" == Path(seed["init_from"]).name
    assert seed["eval"]["cpu:1"]["episodes"] == 2
    bad = tmp_path / "bad.toml"
    bad.write_text(IMITATION.replace("budget_steps = 0", "budget_steps = 10"))
    with pytest.raises(ValueError, match="budget_steps = 0"):
        LearnConfig.load(bad)
    bad.write_text(IMITATION.replace("teachers = [5]", "teachers = [9]"))
    with pytest.raises(ValueError, match="teachers"):
        LearnConfig.load(bad)


@pytest.mark.training
@pytest.mark.servers
def test_a_recipe_started_from_a_clone_judges_the_clone_too(tmp_path: Path) -> None:
    """RL started from a clone: the clone itself is judged on the same fresh matches, so
    the table shows what the RL added on top of the start.  Main alone, stopped after its
    first generation, continues from it (the league's continuation: the tiny recipe)."""
    from brawlkit.training.checkpoints import list_checkpoints

    recipe = tmp_path / "warm.toml"
    text = TINY.format(kind="curriculum").replace("[eval]", """[imitation]
teachers = [5]
opponents = [2, 4]
matches = 2
epochs = 1
c_eval_matches = 0
[eval]""") + """[exploit]
seeds = [0]
steps = 256
generations = 1
matches = 2
curve_matches = 1
[exploit.train]
n_envs = 2
n_steps = 128
batch_size = 64
n_epochs = 1
eval_levels = []
"""
    out = tmp_path / "out"
    recipe.write_text(text.replace("budget_steps = 512", "budget_steps = 256"))
    r = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    first = json.loads((out / "s4" / "train.json").read_text())
    clone = out / "s4" / "imitation" / "gen_0000.zip"
    stamp = clone.stat().st_mtime_ns
    for f in out.glob("s4/*.json"):
        f.unlink()
    recipe.write_text(text)
    r = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress",
                "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "continuing the generations an earlier call finished (main 1/2)" in r.stderr, r.stderr
    assert [g for g, _ in list_checkpoints(out / "s4" / "main")] == [0, 1]
    res = last_json(r.stdout)
    (seed,) = res["seeds"]
    assert seed["resumed"] == {"main": 1} and seed["env_steps"] >= 512
    assert seed["init_from"] and seed["checkpoint"] != seed["init_from"]
    for opp in ("baseline", "cpu:2"):
        start = seed["start"]["eval"][opp]
        assert start["wins"] + start["draws"] + start["losses"] == start["episodes"] == 3
        assert res["start_pooled"][opp]["wins"] == start["wins"]
    assert "the clone each seed started from" in r.stdout
    assert (tmp_path / "out" / "s4" / "start_eval.json").is_file()
    # the exploitability column: fresh exploiters from the clone against what ships (from
    # random weights too only when asked: random defaults to false where there is a clone)
    ex = seed["exploit"]
    assert [(e["start"], e["seed"]) for e in ex["exploiters"]] == [("clone", 0)]
    assert ex["best"]["matches"] == 2 and len(ex["exploiters"][0]["curve"]) == 1
    rec = json.loads((Path(ex["out"]) / "clone_s0" / "exploiter.json").read_text())
    assert rec["config"]["init_from"] == seed["init_from"] and rec["config"]["n_envs"] == 2
    played = json.loads((Path(ex["out"]) / "result.json").read_text())["target"]
    assert played["checkpoint"] == seed["checkpoint"]
    assert Path(ex["out"]).name == Path(seed["checkpoint"]).stem
    assert "seed 4: exploited by the best of 1 (0.000256 M env steps each): " in r.stdout
    # the continuation reused the clone the first call built, not rebuilt it
    assert seed["init_from"] == first["init_from"] and clone.stat().st_mtime_ns == stamp
    assert seed["imitation_seconds"] < first["imitation_seconds"]
    # records gone, every generation finished: nothing trains, the same checkpoint ships
    for name in ("train.json", "eval.json", "start_eval.json"):
        (out / "s4" / name).unlink()
    again = run_cli("bench", "learn", str(recipe), "--out", str(out), "--no-progress", "--json",
                    timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(main 2/2)" in again.stderr
    (seed2,) = last_json(again.stdout)["seeds"]
    assert seed2["checkpoint"] == seed["checkpoint"] and seed2["env_steps"] == seed["env_steps"]


def test_a_roles_steps_count_every_generation_across_a_reset(tmp_path: Path) -> None:
    """An exploiter's reset starts a fresh model whose own ``steps`` restart at 0: the
    benchmark's env steps are the sum of every generation's, not the last ``steps``."""
    from brawlkit.bench.learn import _steps_of

    run = tmp_path / "runs" / "league_exploiter" / "r"
    run.mkdir(parents=True)
    for gen, steps in enumerate([100, 200, 100]):  # gen 1 ends with a reset
        (run / f"gen_{gen:04d}.zip").write_bytes(b"")
        (run / f"gen_{gen:04d}.json").write_text(json.dumps(
            {"steps": steps, "steps_this_generation": 100}))
    assert _steps_of(tmp_path, "league_exploiter", tmp_path / "unused") == 300


def test_a_seed_reports_mains_verified_standing_from_its_league(tmp_path: Path) -> None:
    """Each league seed's row carries Main's verified standing read from the seed's own
    league (its verification matches against the main exploiters), and the table prints
    the lowest per generation: the in-league forecast of the exploitability column."""
    from brawlkit.bench.learn import _verified, verified_line
    from brawlkit.league.directory import LeagueDir
    from brawlkit.league.records import MatchRecord, Member, MemberId

    assert _verified(tmp_path) == []  # no league at all
    pool = LeagueDir(tmp_path / "league")
    main = [str(MemberId("main", "20261205-000000-s0", g)) for g in range(3)]
    exp = [str(MemberId("main_exploiter", "20261205-000001-s0", g)) for g in range(2)]
    for role, ids in (("main", main), ("main_exploiter", exp)):
        for g, i in enumerate(ids):
            pool.register(Member(id=i, role=role, generation=g, parent=ids[g - 1] if g else None))
    t = iter(range(1, 100))
    log = [MatchRecord(next(t), main[g], b, res, 100, "eval") for g, b, res in (
        (1, exp[0], "win"), (1, exp[0], "draw"), (1, exp[1], "win"),
        (2, exp[0], "loss"), (2, exp[1], "win"), (2, "cpu:5", "loss"))]
    log.append(MatchRecord(next(t), main[2], exp[1], "loss", 100, "train:main"))  # not verified
    with pool.writer("test") as w:
        w.write_many(log)
    assert _verified(tmp_path) == [[1, 0.75, 0.875], [2, 0.0, 0.5]]
    assert verified_line(_verified(tmp_path)) == (
        "Main's lowest verified win rate against its main exploiters, generations 1-2: 0.8 0.0")
