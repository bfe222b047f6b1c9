"""Training through /move (docs/move_training.md): the per-move reward pinned to numbers
computed by hand, the stratified baseline on a synthetic batch of two difficulties, the
curriculum shared with the PPO runs, the available moves, the text policy's tokens, and
the answer parser of the language-model adapter.  Pure Python: no servers.
"""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from brawlkit.league.curriculum import CpuCurriculum, LadderCurriculum
from brawlkit.policy_server.move_reward import (
    HEALTH_MAX,
    STOCK_PERCENT,
    MoveRewardWeights,
    assign_rewards,
    hp_diff,
)
from brawlkit.policy_server.moves import HELPLESS_MOVES, NAMES, available_moves
from brawlkit.policy_server.rollouts import spam_fraction
from brawlkit.policy_server.trainer import StratifiedBaseline, signal_filter
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import PlayerState, Snapshot


# ----------------------------------------------------------------- the reward, by hand
def test_health_max_mapping_is_the_documented_one() -> None:
    assert STOCK_PERCENT == 100.0 and HEALTH_MAX == 300.0  # 3 stocks x 100 percent
    w = MoveRewardWeights()
    assert (w.half_life_frames, w.damage_weight, w.win_bonus) == (3600.0, 0.1, 1.0)
    assert w.invalid_penalty == pytest.approx(20 / 300)


def test_reward_matches_the_formula_computed_by_hand() -> None:
    # three moves of a won fight that ended 120 + 1800 + 3600 frames after the first
    # move's decision; the middle answer was invalid
    frames, hp, bad = [120, 1800, 3600], [30.0, -100.0, 12.5], [False, True, False]
    got = assign_rewards(bad, hp, frames, "win")
    # backward, by hand: move 2 (the last): discount 0.5^(3600/3600) = 0.5
    o2 = 1.0 * 0.5
    d2 = 12.5 / 300 + 0.5 * 0.0
    r2 = o2 + 0.1 * d2
    # move 1: discount 0.5^(1800/3600) = sqrt(0.5); its own invalid penalty 20/300
    o1 = o2 * math.sqrt(0.5)
    d1 = -100 / 300 + math.sqrt(0.5) * d2
    r1 = o1 + 0.1 * d1 - 20 / 300
    # move 0: discount 0.5^(120/3600) = 2^(-1/30)
    o0 = o1 * 2 ** (-1 / 30)
    d0 = 30 / 300 + 2 ** (-1 / 30) * d1
    r0 = o0 + 0.1 * d0
    assert got == pytest.approx([r0, r1, r2], abs=1e-12)
    # the numbers themselves, so that a formula changed on both sides still fails
    assert got == pytest.approx([0.3257853, 0.2564997, 0.5041667], abs=1e-6)
    # the outcome reaches the first move discounted by the frames to the fight's real end
    assert o0 == pytest.approx(0.5 ** ((120 + 1800 + 3600) / 3600))


def test_reward_clamps_the_damage_return_and_signs_the_outcome() -> None:
    # 900 percent of net damage in the last move: the return 3.0 is clamped to 1
    got = assign_rewards([False], [900.0], [0], "loss")
    assert got == pytest.approx([-1.0 + 0.1 * 1.0])
    got = assign_rewards([False, False], [-700.0, 0.0], [0, 0], "draw")
    assert got == pytest.approx([0.1 * -1.0, 0.0])  # -700/300 clamped to -1; a draw is 0
    w = MoveRewardWeights(half_life_frames=60.0, damage_weight=0.5, invalid_penalty=0.25)
    got = assign_rewards([True], [60.0], [60], "win", w)
    assert got == pytest.approx([0.5 + 0.5 * (60 / 300) - 0.25])
    with pytest.raises(ValueError):
        assign_rewards([False], [1.0, 2.0], [1], "win")


def _snap(me: PlayerState, op: PlayerState, tick: int = 0) -> Snapshot:
    return Snapshot(seq=0, tick=tick, match_id=1, ticks_left=9000 - tick, phase=int(C.BP_PHASE_PLAYING),
                    winner=255, n_players=2, mode=0, ack_cmd_seq=0, players=(me, op), raw=b"")


def _p(**kw: float) -> PlayerState:
    base = dict(x=0.0, y=0.0, vx=0.0, vy=0.0, damage=0.0, shield=60.0, stocks=3, facing=1,
                flags=int(C.BP_PLAYER_FLAG_ON_GROUND), action_state=0, hitstun_ticks=0, jumps_left=1, slot=0)
    return PlayerState(**{**base, **kw})  # type: ignore[arg-type]


def test_hp_diff_counts_percent_and_stocks() -> None:
    a = _snap(_p(damage=10.0), _p(damage=40.0, slot=1))
    b = _snap(_p(damage=22.0), _p(damage=75.0, slot=1), 8)
    assert hp_diff(a, b) == pytest.approx(35.0 - 12.0)
    c = _snap(_p(damage=22.0), _p(damage=0.0, stocks=2, slot=1), 16)  # a stock taken: +100
    assert hp_diff(b, c) == pytest.approx(100.0)
    d = _snap(_p(damage=0.0, stocks=2), _p(damage=5.0, stocks=2, slot=1), 24)  # a stock lost
    assert hp_diff(c, d) == pytest.approx(5.0 - 100.0)
    assert hp_diff(b, c, slot=1) == pytest.approx(-100.0 + 0.0)


# ----------------------------------------------------------------- the stratified baseline
def test_stratified_baseline_on_two_difficulties() -> None:
    base = StratifiedBaseline(0.9)  # the write-up's: an unseen stratum starts at 0
    rewards = [1.0, 0.5, 0.0, -1.0, -0.5]
    strata = ["cpu:1", "cpu:1", "cpu:1", "cpu:3", "cpu:3"]
    assert base.advantages(rewards, strata) == pytest.approx(rewards)
    assert base.values["cpu:1"] == pytest.approx(0.1 * 0.5)       # 0.9*0 + 0.1*mean(1, .5, 0)
    assert base.values["cpu:3"] == pytest.approx(0.1 * -0.75)
    adv = base.advantages([0.25, -0.25, 1.0], ["cpu:3", "cpu:1", "cpu:3"])
    assert adv == pytest.approx([0.25 + 0.075, -0.25 - 0.05, 1.0 + 0.075])
    assert base.values["cpu:1"] == pytest.approx(0.9 * 0.05 + 0.1 * -0.25)
    assert base.values["cpu:3"] == pytest.approx(0.9 * -0.075 + 0.1 * 0.625)
    # one shared mean would have mixed them: the two baselines have opposite signs
    assert base.values["cpu:3"] < 0 < base.values["cpu:1"]
    started = StratifiedBaseline(0.9, start="mean")
    assert started.advantages([1.0, 0.0], ["cpu:2", "cpu:2"]) == pytest.approx([0.5, -0.5])
    assert started.values["cpu:2"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        StratifiedBaseline(start="median")


def test_signal_filter_drops_groups_without_signal() -> None:
    assert signal_filter([[0.0, 0.0], [0.1, 0.0], [], [-1e-9]]) == [False, True, False, False]


# ----------------------------------------------------------------- one curriculum
def test_curriculum_is_one_implementation_with_the_same_draws() -> None:
    from brawlkit.policy_server import train_run
    from brawlkit.training import ppo

    assert train_run.CpuCurriculum is CpuCurriculum is ppo.CpuCurriculum
    assert issubclass(CpuCurriculum, LadderCurriculum)
    c = CpuCurriculum(k=6, floor=0.05, seed=123)
    draws = []
    for i in range(400):
        o = c.sample()
        draws.append(o)
        lv = int(o[4:])
        c.record(o, "win" if (i * 7 + lv * 3) % 10 < (9 - lv) else ("draw" if i % 13 == 0 else "loss"))
    # recorded from CpuCurriculum before it became a LadderCurriculum: the PPO runs draw the same
    assert hashlib.sha256(",".join(draws).encode()).hexdigest() == \
        "75677191fe8d587d177e7c1c0fab3b63f2b48eed434d1dc472eab1549fc4b21c"
    assert c.unlocked == 7 and c.stats()["max_level"] == 7.0
    assert set(c.state_dict()) == {"kind", "levels", "k", "floor", "unlock_win_rate", "unlocked",
                                   "recent", "totals", "rng"}


def test_ladder_unlocks_at_half_and_draws_by_p_one_minus_p() -> None:
    lad = LadderCurriculum(["a", "b", "c"], k=4, floor=0.0, seed=0)
    for out in ("win", "loss", "win", "draw"):  # 2 of 4 won at the top rung: b unlocks
        lad.record("a", out)
    assert lad.unlocked == 2 and lad.top == "b"
    lad.record("b", "win")  # p(b) = 1 -> weight 0; p(a) = 0.5 -> 0.25
    assert lad.weights() == pytest.approx({"a": 1.0, "b": 0.0})
    assert {lad.sample() for _ in range(20)} == {"a"}
    with pytest.raises(ValueError):
        LadderCurriculum(["a", "a"])


def test_writeup_curriculum_recomputes_the_levels_at_every_draw_and_relocks() -> None:
    from brawlkit.policy_server.trainer import WriteupCurriculum

    c = WriteupCurriculum(k=4, floor=0.05, seed=0)
    assert {c.sample() for _ in range(30)} == {"cpu:1"} and c.hardest_won() == 0
    for out in ("win", "win", "loss", "win"):  # 3 of the last 4 won at cpu:1: cpu:2 opens
        c.record("cpu:1", out)
    assert c.unlocked == 2 and {c.sample() for _ in range(60)} == {"cpu:1", "cpu:2"}
    for out in ("win", "loss", "win", "win"):  # cpu:2 won: cpu:3 opens
        c.record("cpu:2", out)
    assert c.max_level == 3
    for _ in range(2):  # cpu:2's recent rate falls to 2 of 4, still won: nothing moves
        c.record("cpu:2", "loss")
    assert c.max_level == 3
    c.record("cpu:2", "loss")  # 1 of 4: cpu:2 is no longer won, cpu:1 still is -> cpu:3 locks again
    assert c.max_level == 2 and "cpu:3" not in {c.sample() for _ in range(60)}
    for _ in range(3):
        c.record("cpu:1", "loss")  # cpu:1 falls too: back to the first level only
    assert c.max_level == 1 and {c.sample() for _ in range(30)} == {"cpu:1"}
    # the PPO runs' curriculum, fed the same results, never locks a level again
    r = CpuCurriculum(k=4, floor=0.05, seed=0)
    for opp, outs in (("cpu:1", "wwlw"), ("cpu:2", "wlwwlll"), ("cpu:1", "lll")):
        for o in outs:
            r.record(opp, {"w": "win", "l": "loss"}[o])
    assert r.max_level == 3
    # the state travels with a checkpoint and the levels follow the restored record
    again = WriteupCurriculum(k=4, seed=1)
    again.load_state_dict(c.state_dict())
    assert again.max_level == 1 and again.state_dict()["kind"] == "writeup_curriculum"


# ----------------------------------------------------------------- moves offered per state
def test_available_moves_follow_the_state() -> None:
    assert available_moves(_p()) == NAMES
    helpless = available_moves(_p(action_state=int(C.BP_AS_HELPLESS), flags=0))
    assert helpless == HELPLESS_MOVES and "up_special" not in helpless
    air_no_jump = available_moves(_p(flags=0, jumps_left=0, action_state=int(C.BP_AS_AIR)))
    assert "jump" not in air_no_jump and "shield" not in air_no_jump and "up_special" in air_no_jump
    air = available_moves(_p(flags=0, jumps_left=1, action_state=int(C.BP_AS_AIR)))
    assert "jump_left" in air and "shield" not in air


def test_spam_fraction_is_the_share_of_the_most_played_move() -> None:
    class S:
        def __init__(self, move: str) -> None:
            self.move = move

    assert spam_fraction([S("jump"), S("attack"), S("jump"), S("jump")]) == 0.75  # type: ignore[list-item]
    assert spam_fraction([]) == 0.0


# ----------------------------------------------------------------- the text policy's tokens
def _text_req() -> object:
    from brawlkit.policy_server.policy import MoveRequest

    f = dict(x=-40.0, y=0.0, vx=0.0, vy=0.0, damage=12.0, shield=60.0, stocks=3, facing=1, flags=1)
    return MoveRequest.model_validate({"self": f, "opponent": {**f, "x": 40.0}, "ticks_left": 8880,
                                       "last_moves": ["jump", "attack_right"]})


@pytest.mark.parametrize("response", ["names", "pieces"])
def test_text_policy_logprobs_are_the_sampled_ones_and_learnable(response: str) -> None:
    from brawlkit.policy_server.text_policy import TextPolicy, TextPolicyConfig

    torch.set_num_threads(1)
    req = _text_req()
    pol = TextPolicy(TextPolicyConfig(response=response), seed=3)
    a = pol.answer(req)
    assert a["move"] == pol.response_text(a["tokens"]) and len(a["tokens"]) <= pol.max_response
    assert "opponent: far 80 right 0 up" in a["prompt"] and "your last moves: jump attack_right" in a["prompt"]
    toks = a["tokens"] + [-1] * (pol.max_response - len(a["tokens"]))
    prompts = torch.tensor([pol.encode_prompt(a["prompt"])])
    lp, _ = pol.logprobs(prompts, torch.tensor([toks]))
    assert float(lp.detach().sum()) == pytest.approx(a["logprob"], abs=1e-5)
    # a few likelihood steps on "attack_right" make it the greedy answer
    out = pol.out_tokens
    target = [out.index("attack"), out.index("right"), out.index("<eos>"), -1] if response == "pieces" \
        else [out.index("attack_right")]
    opt = torch.optim.Adam(pol.net.parameters(), lr=0.05)
    for _ in range(30):
        lp, _ = pol.logprobs(prompts, torch.tensor([target]))
        opt.zero_grad()
        (-lp.sum()).backward()
        opt.step()
    assert pol.response_text(pol.sample(pol.encode_prompt(a["prompt"]), greedy=True)[0]) == "attack_right"


def test_untrained_text_policy_invalid_rates() -> None:
    """What the two response vocabularies start from (docs/move_training.md): spelling
    pieces, almost every answer is no move; naming moves, every answer is one."""
    from brawlkit.policy_server.text_policy import TextPolicy, TextPolicyConfig

    torch.set_num_threads(1)
    req = _text_req()
    rates = {}
    for response in ("pieces", "names"):
        pol = TextPolicy(TextPolicyConfig(response=response), seed=0)
        rates[response] = sum(pol.answer(req)["move"] not in NAMES for _ in range(400)) / 400
    assert rates["pieces"] > 0.85 and rates["names"] == 0.0


# ----------------------------------------------------------------- the adapter's parser
def test_llm_answers_are_parsed_case_and_punctuation_tolerant() -> None:
    from brawlkit.policy_server.llm import parse_move

    av = NAMES
    assert parse_move("Dash-Right!", av) == "dash_right"
    assert parse_move("  UP SPECIAL left.", av) == "up_special_left"
    assert parse_move("I'll go with attack_right, then jump.", av) == "attack_right"
    assert parse_move("up_special_left", ("up_special", "up_special_left")) == "up_special_left"
    assert parse_move("moonwalk", av) is None and parse_move("", av) is None and parse_move(None, av) is None
    assert parse_move("shield", HELPLESS_MOVES) is None  # named, but not available in this state
