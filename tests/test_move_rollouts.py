"""Rollouts and the language-model adapter through real processes (docs/move_training.md).

* The rollout runner's worker processes play real fights on their own brawlpit_server
  through a real endpoint; a killed worker, a hung endpoint and a server that dies
  each void one fight, the batch completes, and what is written afterwards (the JSONL
  export, the league's match log) holds the finished fights only, whole.
* The LLM adapter (``policy serve --llm``) plays a full match against a fake
  chat-completions server (only the far end is fake) whose answers are valid, shouted,
  chatty, invalid, malformed, empty, missing or slow — each handled as documented.
* ``policy train`` runs end to end (two tiny batches) with ``--export`` and
  ``--league-dir`` and ``--registry``: its fights are in the league directory and in
  the registry, rated beside everything else.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Listening, RegistryServer, add_agent, last_json, run_cli

from brawlkit.league.directory import LeagueDir
from brawlkit.policy_server.move_reward import MoveRewardWeights
from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.policy import MoveRequest
from brawlkit.policy_server.results import ResultSink
from brawlkit.policy_server.rollouts import FightSpec, RolloutRunner, WorkerConfig
from brawlkit.policy_server.trainer import export_rows, fight_rewards, write_jsonl

EXAMPLE = ROOT / "examples" / "move_clients" / "random_server.py"
FAKE_CHAT = ROOT / "tests" / "fake_chat_server.py"
pytestmark = pytest.mark.servers


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _kill_when(runner: RolloutRunner, job: int, what: str, done: threading.Event) -> None:
    """As soon as fight ``job`` is being played (a whole match: seconds), kill its worker
    or its worker's game server."""
    while not done.is_set():
        for pid, j, _ in runner.busy():
            if j == job and pid:
                time.sleep(0.05)
                target = pid if what == "worker" else next(iter(_children(pid)), 0)
                if target:
                    os.kill(target, signal.SIGKILL)
                    return
        time.sleep(0.005)


def test_killed_worker_hung_endpoint_dead_server_void_one_fight_each(tmp_path: Path) -> None:
    ep = Listening([sys.executable, str(EXAMPLE), "--port", "0"], tmp_path / "ep.log")
    hung = Listening([sys.executable, str(EXAMPLE), "--port", "0", "--sleep-ms", "60000"],
                     tmp_path / "hung.log")
    cfg = WorkerConfig(ep.url, decision_ticks=8, reaction_frames=6, call_timeout_s=0.5,
                       fight_timeout_s=60.0, max_failed_streak=2)
    runner = RolloutRunner(cfg, workers=2, progress=False)
    specs = [FightSpec(seed=i, opponent="cpu:1", max_ticks=2400) for i in range(7)]
    specs[3] = FightSpec(seed=3, opponent="cpu:1", max_ticks=2400, endpoint=hung.url)
    for i in (1, 5):  # the fights to kill: whole matches, so the kill lands mid-fight
        specs[i] = FightSpec(seed=i, opponent="cpu:1")
    done = threading.Event()
    killers = [threading.Thread(target=_kill_when, args=(runner, 1, "worker", done), daemon=True),
               threading.Thread(target=_kill_when, args=(runner, 5, "server", done), daemon=True)]
    try:
        for k in killers:
            k.start()
        results = runner.run(specs)
        again = runner.run([FightSpec(seed=99, opponent="cpu:2", max_ticks=600)])  # the pool recovered
    finally:
        done.set()
        runner.close()
        ep.stop()
        hung.stop()
    assert len(results) == 7 and [r.spec.seed for r in results] == [s.seed for s in specs]
    void = {i: r.void for i, r in enumerate(results) if not r.ok}
    assert set(void) == {1, 3, 5}, void
    assert void[1].startswith("worker:") and void[3].startswith("fight:") and void[5].startswith("server:")
    assert runner.voids == {"worker": 1, "fight": 1, "server": 1} and runner.replaced == 1
    assert again[0].ok and again[0].spec.opponent == "cpu:2"
    ok = [r for r in results if r.ok]
    for r in ok:
        assert r.outcome in ("win", "loss", "draw") and r.ticks <= 2400 and r.steps
        s = r.steps[0]
        assert s.state["available"] and s.frames >= 8 and s.delay >= 7 and not s.failed
        assert sum(x.frames for x in r.steps) == r.ticks
    # what the trainer writes after a batch: the finished fights only, each whole
    rewards = fight_rewards(ok, MoveRewardWeights())
    write_jsonl(tmp_path / "batch.jsonl", export_rows(ok, rewards, rewards, 0))
    rows = [json.loads(x) for x in (tmp_path / "batch.jsonl").read_text().splitlines()]
    assert len(rows) == sum(len(r.steps) for r in ok) and {x["seed"] for x in rows} == {0, 2, 4, 6}
    sink = ResultSink(str(tmp_path / "league"), source="move")
    sink.post([sink.record("scripted-x", r.opponent_id, str(r.outcome), r.ticks) for r in ok])
    sink.close()
    matches = LeagueDir(tmp_path / "league").matches()
    assert len(matches) == 4 and {m.a for m in matches} == {"scripted-x"}
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temp file left


# ----------------------------------------------------------------- the LLM adapter
def _req(**me: Any) -> MoveRequest:
    f = dict(x=-40.0, y=0.0, vx=0.0, vy=0.0, damage=12.0, shield=60.0, stocks=3, facing=1, flags=1)
    return MoveRequest.model_validate({"self": {**f, **me}, "opponent": {**f, "x": 40.0}, "ticks_left": 8000})


def test_llm_adapter_handles_every_kind_of_answer(tmp_path: Path) -> None:
    from brawlkit.policy_server.llm import ChatClient, LlmChooser

    script = "valid,case,chatty,invalid,valid,invalid,invalid,malformed,valid,missing,empty,slow,valid"
    fake = Listening([sys.executable, str(FAKE_CHAT), "--port", "0", "--script", script,
                      "--slow-ms", "1500"], tmp_path / "fake.log")
    try:
        llm = LlmChooser(ChatClient(fake.url, "fake-7b"), budget_s=0.5)
        got = [llm.answer(_req()) for _ in range(8)]
        with urllib.request.urlopen(fake.url + "/stats") as resp:
            log = json.loads(resp.read())
    finally:
        fake.stop()
    moves = [g["move"] for g in got]
    assert moves[0] in NAMES and moves[1] in NAMES and moves[2] in NAMES  # valid, shouted, chatty
    assert got[1]["response"].endswith("!") and got[2]["response"].startswith("I think")
    assert moves[3] in NAMES and got[3]["asks"] == 2  # invalid, re-asked once: valid
    assert moves[4] == "moonwalk" and got[4]["asks"] == 2  # invalid twice: handed on as it was
    assert moves[5] in NAMES and got[5]["asks"] == 2  # malformed, then valid
    assert "error" in got[5] and "error" not in got[0]  # the failed first call is kept, not dropped
    assert got[3]["messages"][2] == {"role": "assistant", "content": "moonwalk"}  # the re-ask's messages
    assert moves[6] == "" and got[6]["asks"] == 2 and "error" in got[6]  # missing, then empty
    assert moves[7] == "" and got[7]["asks"] == 1 and "timed out" in got[7]["error"]  # slow: no time left
    assert all(isinstance(g["logprob"], float) for g in got)
    assert got[0]["tokens"] and got[0]["logprob"] == pytest.approx(-0.25 * len(got[0]["tokens"]))
    assert [x["reask"] for x in log[:8]] == [False, False, False, False, True, False, True, False]
    assert all(x["model"] == "fake-7b" for x in log)
    assert "available moves: no_move, left" in got[0]["prompt"] and "you: x -40 y 0" in got[0]["prompt"]


def _play(procs: list[Listening], *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``policy play ARGS --json`` (one match), then stop ``procs``: (summary, the match)."""
    try:
        r = run_cli("policy", "play", *args, "--json", timeout=300)
    finally:
        for p in procs:
            p.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    res = last_json(r.stdout)
    return res, res["matches"][0]


def test_llm_serve_plays_a_full_match_and_is_rated(tmp_path: Path) -> None:
    script = "valid*12,case,chatty,invalid,valid,invalid,invalid,malformed,valid,missing,empty,valid*10,slow"
    fake = Listening([sys.executable, str(FAKE_CHAT), "--port", "0", "--script", script,
                      "--slow-ms", "400"], tmp_path / "fake.log")
    srv = Listening([sys.executable, "-m", "brawlkit", "policy", "serve", "--llm", fake.url, "--model", "fake",
                     "--budget-ms", "250", "--member", "llm-fake", "--port", "0"], tmp_path / "serve.log")
    league = tmp_path / "league"
    res, m = _play([srv, fake], "--endpoint", srv.url, "--vs", "cpu:1", "--league-dir", str(league),
                   "--seed", "4", "--reaction-frames", "6")
    assert m["over"] and m["outcome"] in ("win", "loss", "draw") and m["recorded"], m
    assert m["failed_calls"] == 0 and m["invalid_moves"] > 0  # nothing fatal; bad answers penalised
    # the model server's 500 and malformed bodies: counted and named, in the match and the summary
    assert m["model_errors"] >= 2 and res["model_errors"] == m["model_errors"]
    assert any("500" in k for k in m["errors"]), m["errors"]
    assert res["member"] == "llm-fake" and res["decision_ticks"] == 8
    assert m["delay_ticks"]["min"] >= 7 and m["delay_ticks"]["max"] >= 6 + 15  # a slow answer: 250 ms
    assert set(m["moves"]) <= set(NAMES)
    (rec,) = LeagueDir(league).matches()
    assert rec.a == "llm-fake" and rec.b == "cpu:1" and rec.source == "move"
    assert rec.seed == 4 and rec.rated  # its seed; the endpoint as it plays: a fixed player


# ----------------------------------------------------------------- the trainer, end to end
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``policy train`` of a batch with ``--export``, ``--league-dir`` and
    ``--registry`` (a real registry service): its summary, files and what the registry holds."""
    import subprocess

    from brawlkit.registry.client import RegistryClient

    tmp = tmp_path_factory.mktemp("tiny_run")
    reg = RegistryServer(f"sqlite:///{tmp / 'registry.db'}", tmp / "registry-data")
    secret = add_agent(reg.db_url, "mover", "write")
    env = {**os.environ, "BRAWLKIT_AGENT_ID": "mover", "BRAWLKIT_AGENT_SECRET": secret,
           "BRAWLKIT_REGISTRY_CACHE": str(tmp / "cache")}
    out, league = tmp / "run", tmp / "league"
    try:
        r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "train", "--out", str(out),
                            "--batches", "1", "--fights-per-batch", "2", "--eval-fights", "1",
                            "--final-eval-fights", "1", "--export", "--league-dir", str(league),
                            "--registry", reg.url, "--member", "tp-test", "--no-progress", "--json",
                            "--seed", "5"], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        client = RegistryClient(reg.url, "mover", secret, cache_dir=tmp / "cache2")
        stored, ratings = client.matches(), client.ratings()
    finally:
        reg.stop()
    return {"summary": last_json(r.stdout), "out": out, "league": league, "stored": stored,
            "ratings": ratings}


@pytest.mark.training
def test_policy_train_exports_and_reaches_league_and_registry(tiny_run: dict[str, Any]) -> None:
    out, league, summary = tiny_run["out"], tiny_run["league"], tiny_run["summary"]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["eval", "batch", "eval"]
    assert all(set(x["win_rate"]) <= {"cpu:1"} and 0 <= x["invalid_rate"] <= 1 for x in lines)
    assert lines[1]["grad_steps"] >= 1 and lines[1]["cpu_s"] > 0
    rows = [json.loads(x) for p in sorted((out / "rollouts").glob("*.jsonl")) for x in p.read_text().splitlines()]
    assert rows and all(isinstance(x["prompt"], str) and isinstance(x["completion"], str)
                        and isinstance(x["reward"], float) and isinstance(x["advantage"], float)
                        and x["tokens"] and len(x["token_logprobs"]) == len(x["tokens"]) for x in rows)
    n = 1 + 2 + 1  # every finished fight: two evaluations and a batch
    assert summary["sent"]["league"] == n and summary["sent"]["registry"] == n
    assert len(LeagueDir(league).matches()) == n
    # a policy still learning: its fights are in the log with their seeds, never rated
    assert all(m.a_policy == "training" and not m.rated and m.seed is not None
               for m in LeagueDir(league).matches())
    assert sorted(m.to_json().items() for m in tiny_run["stored"]) == \
        sorted(m.to_json().items() for m in LeagueDir(league).matches())  # the same matches in both
    assert "tp-test" in json.dumps(tiny_run["ratings"])  # rated beside the league
    assert (out / "policy.pt").is_file() and (out / "summary.json").is_file()


# ----------------------------------------------------------------- the notebook
@pytest.mark.notebooks
@pytest.mark.training
def test_move_training_notebook_plots_a_run(tiny_run: dict[str, Any], tmp_path: Path) -> None:
    import nbformat
    import papermill

    out = tmp_path / "move_training.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "move_training.ipynb"), str(out),
                               parameters={"run_dir": str(tiny_run["out"])},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    nb = nbformat.read(str(out), as_version=4)
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []))
    assert images == 2  # the four curves, and the curriculum's level
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "1 batches, 2 fights, 2 evaluations" in text


def test_an_endpoint_plays_another_endpoint(tmp_path: Path) -> None:
    a = Listening([sys.executable, str(EXAMPLE), "--port", "0", "--member", "scripted-a"], tmp_path / "a.log")
    b = Listening([sys.executable, str(EXAMPLE), "--port", "0", "--policy", "random", "--member", "random-b"],
                  tmp_path / "b.log")
    res, m = _play([a, b], "--endpoint", a.url, "--vs", f"endpoint:{b.url}")
    assert res["opponent"] == "random-b" and m["over"] and m["outcome"] in ("win", "loss", "draw")
    assert m["failed_calls"] == 0 and m["invalid_moves"] == 0
    assert m["other_stocks"] < 3 or m["self_stocks"] < 3  # both fighters really played
