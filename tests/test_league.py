"""The league end to end with real processes: three roles training concurrently on one
directory (python -m brawlkit league run), what they leave behind, a trainer killed with
SIGKILL, Ctrl-C on the league, the elo command and the elo_drift notebook on the result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import ROOT, last_json, run_cli

from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import permanent_ids
from brawlkit.league.role_specs import role_names

pytestmark = [pytest.mark.training, pytest.mark.servers]

#: a few tiny generations: full matches (action repeat 8 halves their steps), so the
#: roles meet the CPU, the baseline and each other's frozen checkpoints
TINY = ["--generations", "3", "--steps-per-generation", "2048", "--n-envs", "2", "--n-steps", "256",
        "--batch-size", "128", "--n-epochs", "1", "--action-repeat", "8", "--eval-levels", "1",
        "--eval-episodes", "1", "--exploiter-reset-every", "1"]


@pytest.fixture(scope="module")
def small_league(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("league")
    r = subprocess.run([sys.executable, "-m", "brawlkit", "league", "run", "--league-dir",
                        str(d / "league"), "--runs-root", str(d / "runs"), "--no-progress", "--",
                        *TINY], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "league"


def _n_members(league: Path) -> int:
    d = league / "members"
    return len(list(d.glob("*.json"))) if d.is_dir() else 0


def _servers_under(root: int) -> set[int]:
    """The game servers ``root`` started (its descendants), found while it lives.

    Why not every orphaned server on the machine: a job beside the suite (a benchmark
    started from a plain ``python`` script) has servers whose parent is no brawlkit
    process, and counting those made this check fail on a busy machine."""
    out = subprocess.run(["pgrep", "-f", "native/build/brawlpit_server"], capture_output=True,
                         text=True).stdout
    mine = set()
    for pid in map(int, out.split()):
        p = pid
        while p > 1:
            p = _ppid(p)
            if p == root:
                mine.add(pid)
                break
    return mine


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0  # gone already


def _alive_servers(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running a game server (a reused pid is another process)."""
    alive = set()
    for pid in pids:
        try:
            if b"brawlpit_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.add(pid)
        except OSError:
            pass
    return alive


def test_three_roles_register_every_generation_exactly_once(small_league):
    pool = LeagueDir(small_league, create=False)
    members = pool.members()
    trained = [m for m in members if not m.permanent]
    assert Counter(m.role for m in trained) == {role: 3 for role in role_names()}
    assert len({m.id for m in members}) == len(members)
    assert [m.id for m in members[:9]] == list(permanent_ids())
    for m in trained:  # artifacts present, blob playable, parent chain within the role
        assert pool.checkpoint_path(m).is_file() and pool.blob_path(m).is_file()
        assert m.settings["action_repeat"] == 8 and "stats" in m.settings
    lines = []
    for f in (small_league / "matches").glob("*.jsonl"):
        lines += f.read_text().splitlines()
    assert len(lines) == len(set(lines)) == len(pool.matches()) > 0
    known = {m.id for m in members}
    matches = pool.matches()
    assert all(r.a in known and r.b in known for r in matches)
    # frozen checkpoints were drawn as opponents: their rating moves long after they froze
    assert any(r.b in known - set(permanent_ids()) for r in matches), Counter(r.b for r in matches)
    # every record is a real match that says who played as what (docs/league.md): the
    # trainer's episodes were its policy in training (never rated); each generation's
    # evaluation is one record per match played, with its own seed, deterministic
    # ("fixed": what ships) and sampled, --eval-episodes 1 at --eval-levels 1
    training = [r for r in matches if r.source.startswith("train:")]
    assert training and all(r.a_policy == "training" and not r.rated for r in training)
    evals = [r for r in matches if r.source == "eval"]
    for m in trained:
        mine = sorted((r.a_policy, r.b, r.seed) for r in evals if r.a == m.id)
        assert [(p, b) for p, b, _ in mine] == [("fixed", "cpu:1"), ("sampled", "cpu:1")], mine
        assert all(s is not None for _, _, s in mine)
    assert all(r.ticks > 0 and r.b_policy == "fixed" for r in evals)
    # the fixed ladder, played once before the roles: the CPU levels rated in order
    ladder = [r for r in matches if r.source.startswith("ladder:")]
    assert len({r.source for r in ladder}) == 1 and {r.a for r in ladder} >= {"baseline", "cpu:1"}
    from brawlkit.league.ratings import league_table

    table = league_table(members, matches, bootstrap=0)
    bt = {r["id"]: r["bt_rating"] for r in table["members"]}
    assert [bt[f"cpu:{lv}"] for lv in range(1, 9)] == sorted(bt[f"cpu:{lv}"] for lv in range(1, 9))
    assert table["anchor"] == {"id": "cpu:1", "rating": 1000.0}


def test_an_exploiters_reset_keeps_its_log_and_starts_a_lineage(small_league):
    """--exploiter-reset-every 1: the main exploiter starts over after every generation;
    each reset is a new lineage, and the trainer's progress.csv still holds the
    rollouts of the generations before it (a new SB3 logger used to truncate it)."""
    from brawlkit.report import league_overview as overview
    from brawlkit.report.league_plots import LeagueView

    view = LeagueView.load(small_league, bootstrap=0)
    assert overview.resets(view.members, "main_exploiter") == [1, 2]
    rows = overview.read_progress(small_league.parent / "runs", "main_exploiter")
    steps = [r["time/total_timesteps"] for r in rows if "time/total_timesteps" in r]
    assert len(steps) >= 3 * 4 and steps == sorted(steps), steps  # 4 rollouts a generation
    gens, share = overview.opponent_draws(view, "main")
    assert gens == [0, 1, 2]
    assert all(abs(sum(share[g][i] for g in overview.GROUPS) - 1) < 1e-9 for i in range(3))


def test_elo_command_reads_the_league(small_league):
    r = run_cli("elo", "--league-dir", str(small_league), "--json", "--bootstrap", "20")
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    ratings = [m["rating"] for m in out["members"]]
    assert out["matches"] > 0 and len(out["members"]) == 18
    # zero-sum, baseline included: the mean is the initial rating, moved with the anchor
    assert out["anchor"] == {"id": "cpu:1", "rating": 1000.0}
    assert sum(ratings) / len(ratings) == pytest.approx(out["elo_initial"])
    assert next(m["rating"] for m in out["members"] if m["id"] == "cpu:1") == pytest.approx(1000.0)


@pytest.mark.notebooks
def test_elo_drift_notebook_runs_headless(small_league, tmp_path):
    import nbformat
    import papermill

    out = tmp_path / "elo_drift.out.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "elo_drift.ipynb"), str(out),
                               parameters={"league_dir": str(small_league), "bootstrap": 20},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    nb = nbformat.read(str(out), as_version=4)
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []))
    assert images >= 4


@pytest.mark.notebooks
def test_league_overview_notebook_runs_headless(small_league, tmp_path):
    """Every plot of the overview draws from a real league, and the kept upset (a bot
    pool's index.json naming a .bpr) is re-simulated, verified and shown as a GIF."""
    import nbformat
    import papermill

    from brawlkit.replay.format import replay_filename, write_replay
    from brawlkit.replay.play import record_cpu_match

    replays = tmp_path / "replays"
    rec = record_cpu_match(None, 2, 6, seed=11, max_ticks=600)
    path = write_replay(replays / replay_filename(rec), rec)
    entry = {"file": path.name, "a": "cpu:2", "b": "cpu:6", "rating_a": 1100.0,
             "rating_b": 1500.0, "result": "win", "expected": 0.09, "surprise": 0.91,
             "ticks": rec.n_ticks, "time": 1.0, "source": "botpool", "arena": 1, "match_id": 1}
    (replays / "index.json").write_text(json.dumps({"keep": 1, "replays": [entry]}))
    out = tmp_path / "overview.out.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "league_overview.ipynb"), str(out),
                               parameters={"league_dir": str(small_league),
                                           "runs_root": str(small_league.parent / "runs"),
                                           "replays_dir": str(replays), "bootstrap": 10,
                                           "replay_every": 30},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    nb = nbformat.read(str(out), as_version=4)
    kinds = [k for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             for k in o.get("data", {}) if k.startswith("image/")]
    assert kinds.count("image/png") >= 4 and "image/gif" in kinds, kinds
    assert (replays / "latest_upset.gif").stat().st_size > 0


def test_a_trainer_killed_mid_run_leaves_the_pool_readable(tmp_path):
    league = tmp_path / "league"
    p = subprocess.Popen([sys.executable, "-m", "brawlkit", "train", "--role", "main",
                          "--league-dir", str(league), "--runs-root", str(tmp_path / "runs"),
                          "--no-progress", *TINY[:1], "20", *TINY[2:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        deadline = time.monotonic() + 300
        while _n_members(league) == 0:
            assert time.monotonic() < deadline and p.poll() is None, "no registration"
            time.sleep(0.2)
        time.sleep(1.3)  # into the next generation, maybe into its registration
        ours = _servers_under(p.pid)
        assert ours, "the trainer runs no game server to leave behind"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    pool = LeagueDir(league, create=False)
    trained = [m for m in pool.members() if not m.permanent]
    assert trained and all(pool.blob_path(m).is_file() for m in trained)
    pool.matches()  # every line readable or skipped with a warning; never fatal
    deadline = time.monotonic() + 5
    while _alive_servers(ours) and time.monotonic() < deadline:  # PDEATHSIG: servers follow
        time.sleep(0.1)
    assert not _alive_servers(ours)


def test_ctrl_c_stops_the_league_cleanly(tmp_path):
    league = tmp_path / "league"
    p = subprocess.Popen([sys.executable, "-m", "brawlkit", "league", "run", "--league-dir",
                          str(league), "--runs-root", str(tmp_path / "runs"), "--no-progress",
                          "--", *TINY[:1], "50", *TINY[2:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         # Ctrl-C as a terminal delivers it: a suite started in the background
                         # (`make test-busy &`) passes SIGINT on ignored, and Python then
                         # installs no KeyboardInterrupt handler in the child
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while _n_members(league) < 3:
        assert time.monotonic() < deadline and p.poll() is None, "roles did not register"
        time.sleep(0.2)
    ours = _servers_under(p.pid)
    assert ours, "the roles run no game server to leave behind"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert "stopping the roles" in err
    pool = LeagueDir(league, create=False)
    assert all(pool.blob_path(m).is_file() for m in pool.members() if not m.permanent)
    assert not list((league / "members").glob(".*")), "a half-written record was left"
    deadline = time.monotonic() + 5
    while _alive_servers(ours) and time.monotonic() < deadline:  # PDEATHSIG: servers follow
        time.sleep(0.1)
    assert not _alive_servers(ours), "orphan game servers"
    assert json.loads(json.dumps([m.to_json() for m in pool.members()]))


def test_a_role_that_crashes_mid_run_is_started_again_where_it_stopped(tmp_path):
    """A role whose child fails after a finished generation (here: its game server is
    killed, as a crash or the OOM killer would) is started again by ``league run`` for
    the generations it has left (``--resume-or-new``), and the league ends well with
    every generation registered once, instead of training on without that role."""
    league, runs = tmp_path / "league", tmp_path / "runs"
    args = [*TINY[:1], "3", "--steps-per-generation", "4096", *TINY[4:]]
    p = subprocess.Popen([sys.executable, "-m", "brawlkit", "league", "run", "--league-dir",
                          str(league), "--runs-root", str(runs), "--roles", "main",
                          "--ladder-baseline-games", "0", "--no-progress", "--", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline, log = time.monotonic() + 300, league / "logs" / "main.log"
        while not (log.is_file() and "gen 0: " in log.read_text()):  # a generation finished
            assert time.monotonic() < deadline and p.poll() is None, "no generation finished"
            time.sleep(0.2)

        def children(pid: int) -> list[int]:
            out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
            return [int(x) for x in out.stdout.split()]

        servers = [s for c in children(p.pid) for s in children(c)
                   if "brawlpit_server" in Path(f"/proc/{s}/cmdline").read_text()]
        assert servers, "the trainer's game servers were not found"
        for s in servers:
            os.kill(s, signal.SIGKILL)
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    assert "server died" in err and "starting it again for the 2 left (restart 1 of 3)" in err
    trained = [m for m in LeagueDir(league, create=False).members() if not m.permanent]
    assert sorted(m.generation for m in trained) == [0, 1, 2]
    (run,) = (runs / "main").iterdir()
    assert sorted(f.name for f in run.glob("gen_*.zip")) == [f"gen_000{g}.zip" for g in range(3)]


def test_an_exploiters_reset_survives_a_resume(tmp_path):
    """A run stopped right after a reset generation resumes from the *fresh* weights the
    uninterrupted run would have trained on, as a new lineage (no parent) — not from the
    generation's saved pre-reset weights with that generation as its parent.  (It failed
    before the fix: the zip is saved before the reset swaps the weights in.)"""
    import numpy as np
    from stable_baselines3 import PPO

    from brawlkit.training.checkpoints import list_checkpoints

    league, run = tmp_path / "league", tmp_path / "run"
    tiny = TINY[TINY.index("--n-envs"):]  # everything but the generation count and steps
    base = ["train", "--role", "main_exploiter", "--league-dir", str(league), "--run-dir",
            str(run), "--no-progress", "--steps-per-generation", "256", *tiny]
    for extra in ((), ("--resume",)):
        r = run_cli(*base, "--generations", "1", *extra, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
    meta0 = json.loads(list_checkpoints(run)[0][1].read_text())
    meta1 = json.loads(list_checkpoints(run)[-1][1].read_text())
    assert meta1["generation"] == 1 and meta1["parent"] is None
    pool = LeagueDir(league, create=False)
    g1 = next(m for m in pool.members() if m.id == meta1["member"])
    assert g1.parent is None, "the generation after a reset starts a lineage"

    def weights(zip_path: Path) -> np.ndarray:
        pol = PPO.load(str(zip_path), device="cpu").policy
        return np.concatenate([p.detach().numpy().ravel() for p in pol.parameters()])

    w0, w1 = weights(run / "gen_0000.zip"), weights(run / "gen_0001.zip")
    # the fresh weights the reset after generation 0 draws (seeded by seed and generation)
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import _fresh_weights

    cfg = TrainConfig.from_dict(meta0["config"])
    fresh = _fresh_weights(cfg, ZeroCostEnv(input_layout=cfg.input_layout), 0, None).policy
    wf = np.concatenate([p.detach().numpy().ravel() for p in fresh.parameters()])
    # one generation of training moves the weights far less than a re-initialisation does
    assert np.linalg.norm(w1 - wf) < 0.5 * np.linalg.norm(w1 - w0), \
        (np.linalg.norm(w1 - wf), np.linalg.norm(w1 - w0))
    assert meta0["reset_after"] is True  # --exploiter-reset-every 1: every generation resets


def test_league_report_judges_mains_newest_generation_on_fresh_matches(small_league):
    """What ``make train`` ends with: Main's newest generation, deterministic, fresh seeds,
    an interval per opponent, and the verdict on the last line."""
    r = run_cli("league", "report", "--league-dir", str(small_league), "--vs", "cpu:1,baseline",
                "--matches", "3", "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    newest = max((m for m in LeagueDir(small_league, create=False).members() if m.role == "main"),
                 key=lambda m: m.generation)
    assert [ln.split(" vs ")[0].strip() for ln in lines[:2]] == [newest.id] * 2
    assert "of 3 fresh matches" in lines[0] and "95 %" in lines[0]
    assert lines[-1].startswith(f"league: main (generation {newest.generation}) beats cpu:1 in ")
    assert lines[-1].endswith("the 0.80 aim")
    bad = run_cli("league", "report", "--league-dir", str(small_league.parent / "nope"))
    assert bad.returncode == 2 and "league report:" in bad.stderr


def test_main_verifies_what_ships_against_its_exploiters(tmp_path):
    """``--main-verify-matches N``: after its generation Main's deterministic policy plays
    N matches against each of its newest main exploiters; the matches go to the log as
    fixed-against-fixed evaluation records (rated like any member's game), the sampler's
    struggle test reads them, and the checkpoint's sampler state carries them (a resume
    keeps them).  Both trainers are real runs on one league directory."""
    from brawlkit.training.checkpoints import list_checkpoints
    from brawlkit.training.evaluate import VERIFY_SEED_BASE

    league = tmp_path / "league"
    tiny = TINY[TINY.index("--n-envs"):]
    common = ["--league-dir", str(league), "--no-progress", "--steps-per-generation", "256",
              "--generations", "1", *tiny]
    r = run_cli("train", "--role", "main_exploiter", "--run-dir", str(tmp_path / "exp"),
                *common, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (exploiter,) = [m.id for m in LeagueDir(league, create=False).members()
                    if m.role == "main_exploiter"]
    r = run_cli("train", "--role", "main", "--run-dir", str(tmp_path / "main"), *common,
                "--main-verify-matches", "3", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    pool = LeagueDir(league, create=False)
    (main,) = [m.id for m in pool.members() if m.role == "main"]
    verified = sorted((m for m in pool.matches() if m.a == main and m.b == exploiter),
                      key=lambda m: m.seed or 0)
    assert [(m.source, m.a_policy, m.b_policy, m.seed) for m in verified] == \
        [("eval", "fixed", "fixed", VERIFY_SEED_BASE + j) for j in range(3)]
    meta = json.loads(list_checkpoints(tmp_path / "main")[0][1].read_text())
    state = meta["sampler"]["verified"]
    assert state["games"] == {exploiter: 3.0}
    won = sum(m.result == "win" for m in verified) + 0.5 * sum(m.result == "draw" for m in verified)
    assert state["wins"].get(exploiter, 0.0) + 0.5 * state["draws"].get(exploiter, 0.0) == won
    # the run's log has the record's win rate
    import csv
    rows = list(csv.DictReader((tmp_path / "main" / "progress.csv").open()))
    logged = [float(r["eval/verified/min_win_rate"]) for r in rows
              if r.get("eval/verified/min_win_rate")]
    assert logged == [pytest.approx(won / 3)]
