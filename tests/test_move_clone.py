"""The supervised start of ``policy train`` (brawlkit/policy_server/clone.py): the teacher is
the example endpoint's scripted player, its labels follow the state's available moves, the
cross-entropy fit learns a labelling, and a run with ``--clone-fights`` logs its clone
rounds and the cloned evaluation beside the random-init one (docs/move_training.md).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import ROOT, last_json

from brawlkit.policy_server.clone import ScriptedTeacher, encode_response, fit
from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.text_policy import TextPolicy, TextPolicyConfig


def _fighter(**kw: float) -> dict[str, Any]:
    base = {"x": 0.0, "y": 0.0, "vx": 0.0, "vy": 0.0, "damage": 0.0, "shield": 60.0, "stocks": 3,
            "facing": 1}
    return {**base, **kw}


@pytest.mark.parametrize("response", ["names", "pieces"])
def test_encode_response_writes_the_name_back(response: str) -> None:
    pol = TextPolicy(TextPolicyConfig(response=response))
    for name in NAMES:
        toks = encode_response(pol, name)
        assert len(toks) == pol.max_response
        assert pol.response_text([t for t in toks if t >= 0]) == name


def test_teacher_approaches_attacks_recovers_and_keeps_to_the_available_moves() -> None:
    t = ScriptedTeacher(seed=0)
    far = {"self": _fighter(x=-60.0), "opponent": _fighter(x=40.0)}
    assert t.label_body(far) == "dash_right"
    close = {"self": _fighter(x=0.0), "opponent": _fighter(x=-10.0)}
    assert {t.label_body(close) for _ in range(50)} <= {"attack_left", "shield"}
    off = {"self": _fighter(x=110.0, y=-40.0), "opponent": _fighter(x=0.0)}
    assert t.label_body(off) == "up_special_left"
    # helpless: the up-special is not offered, so the teacher drifts home (as the example does)
    helpless = {**off, "available": ["no_move", "left", "right", "dash_left", "dash_right", "fast_fall"]}
    assert t.label_body(helpless) == "dash_left"


def test_the_example_endpoint_answers_as_the_teacher(tmp_path: Path) -> None:
    """One scripted player (brawlkit/policy_server/scripted.py): the example endpoint, a
    real subprocess over HTTP, answers each body as the teacher labels it — the random
    branches too, both seeded alike — and the package runs no file of examples/."""
    import urllib.request

    from helpers import Listening

    bodies = [{"self": _fighter(x=x, y=y), "opponent": _fighter(x=ox, damage=dmg), "ticks_left": 900}
              for x, y, ox, dmg in [(-60, 0, 40, 0), (0, 0, -10, 0), (0, 0, 12, 95), (110, -40, 0, 0),
                                    (-95, -10, 0, 0), (5, 0, 30, 0)] * 4]
    bodies.append({**bodies[3], "available": ["no_move", "left", "right", "dash_left",
                                              "dash_right", "fast_fall"]})
    teacher = ScriptedTeacher(seed=7)
    srv = Listening([sys.executable, str(ROOT / "examples" / "move_clients" / "random_server.py"),
                     "--port", "0", "--seed", "7"], tmp_path / "example.log")
    try:
        for body in bodies:
            req = urllib.request.Request(f"{srv.url}/move", data=json.dumps(body).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                assert json.loads(r.read())["move"] == teacher.label_body(body), body
    finally:
        srv.stop()
    assert teacher.label_body(bodies[-1]) == "dash_left"  # helpless: drifts home
    assert {teacher.label_body(bodies[1]) for _ in range(40)} == {"attack_left", "shield"}
    for path in (ROOT / "brawlkit").rglob("*.py"):
        code = path.read_text().split('"""', 2)[-1]  # past the module docstring
        assert not re.search(r'/\s*"examples"|"examples"\s*/|examples/move_clients', code), \
            f"{path} reaches into examples/, which an installed package does not have"


def test_fit_learns_a_labelling_of_prompts() -> None:
    torch.set_num_threads(1)  # a tiny net: more threads only spin on a shared machine
    torch.manual_seed(0)
    pol = TextPolicy(TextPolicyConfig(), seed=3)
    texts = ["you: x -60 y 0, ground\nopponent: far 100 right 0 up", "you: x 60 y 0, ground\nopponent: far 100 left 0 up",
             "you: x 0 y 0, ground\nopponent: close 10 right 0 up"]
    labels = ["dash_right", "dash_left", "attack_right"]
    prompts = [pol.encode_prompt(t) for t in texts] * 20
    responses = [encode_response(pol, n) for n in labels] * 20
    opt = torch.optim.Adam(pol.net.parameters(), lr=1e-2)
    with torch.no_grad():  # untrained: about 1/19 on each label, far from "more than half"
        before, _ = pol.logprobs(torch.tensor(prompts), torch.tensor(responses))
    stats = fit(pol, opt, prompts, responses, epochs=30, minibatch=16)
    assert float(before.exp().max()) < 0.5
    assert stats["clone_acc"] == 1.0 and stats["clone_loss"] < 0.1
    for text, name in zip(texts, labels, strict=True):
        toks, _ = pol.sample(pol.encode_prompt(text), greedy=True)
        assert pol.response_text(toks) == name


@pytest.mark.servers
@pytest.mark.training
def test_policy_train_with_clone_logs_rounds_and_both_starting_points(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "train", "--out", str(out),
                        "--batches", "1", "--fights-per-batch", "2", "--eval-fights", "1",
                        "--final-eval-fights", "1", "--clone-fights", "2", "--clone-rounds", "1",
                        "--clone-epochs", "1", "--max-ticks", "600", "--no-progress", "--json", "--seed", "4"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["eval", "clone", "clone", "eval", "batch", "eval"]
    teacher, dagger = lines[1], lines[2]
    assert teacher["player"] == "teacher" and teacher["invalid_rate"] == 0.0  # it keeps to the offered moves
    assert dagger["player"] == "policy" and dagger["clone_pairs"] > teacher["clone_pairs"]  # aggregated
    assert lines[3].get("cloned") is True and "cloned" not in lines[0]
    assert all(a["cpu_s"] <= b["cpu_s"] for a, b in zip(lines, lines[1:], strict=False))  # one budget
    summary = last_json(r.stdout)
    assert summary["cloned_win_rate"] == lines[3]["eval_win_rate"]
    assert summary["untrained_win_rate"] == lines[0]["eval_win_rate"]
    assert (out / "policy_clone.pt").is_file()  # the cloned weights, before any RL
