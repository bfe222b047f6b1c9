"""Training any model through ``/move``: the write-up's recipe (docs/move_training.md).

One batch of the loop (:func:`train`):

1. **Opponents.** Each fight's CPU level is drawn by the p(1 − p) curriculum with the
   unlock rule (:class:`brawlkit.league.curriculum.CpuCurriculum`, the one the PPO
   runs use).
2. **Rollouts.** The fights are played through the real endpoint by the rollout
   workers (:class:`~brawlkit.policy_server.rollouts.RolloutRunner`); void fights are
   counted and dropped.
3. **Rewards.** Every move gets the backward per-move reward
   (:func:`~brawlkit.policy_server.move_reward.assign_rewards`).
4. **Advantages.** Against a moving-average baseline *stratified by difficulty*
   (:class:`StratifiedBaseline`, 0.9 / 0.1), so easy and hard fights do not share
   one mean; fights that carry no learning signal are dropped (:func:`signal_filter`).
5. **Update.** REINFORCE on the response tokens' log-probabilities (optionally
   PPO-clipped, over several epochs), for a model served by brawlkit itself
   (:class:`~brawlkit.policy_server.text_policy.TextPolicy`).
6. **Export.** Optionally every move as one JSONL row — prompt, response tokens and
   logprobs, reward, advantage — for an external trainer (:func:`export_rows`).
7. **Results.** Every finished fight to a league directory and/or the registry
   (:class:`~brawlkit.policy_server.results.ResultSink`), and one metrics line
   (win rate per difficulty, reward, invalid-move rate, spam fraction) to
   ``metrics.jsonl``, which ``notebooks/move_training.ipynb`` plots.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from brawlkit.common.io import atomic_write_bytes
from brawlkit.league.curriculum import CpuCurriculum
from brawlkit.policy_server.move_reward import MoveRewardWeights, assign_rewards
from brawlkit.policy_server.rollouts import FightResult, spam_fraction
from brawlkit.policy_server.text_policy import TextPolicy


class StratifiedBaseline:
    """A moving-average reward baseline per stratum (difficulty), as in the write-up.

    ``advantages`` subtracts each sample's stratum baseline *before* updating it with
    the batch: ``b ← decay · b + (1 − decay) · mean(batch rewards of the stratum)``.
    An unseen stratum starts at 0 (the write-up's rule, ``start="zero"``) or at its
    first batch's mean (``start="mean"``, the trainer's default): measured here, a
    from-scratch policy loses every early fight, and 0 then makes every advantage
    about −0.6 for the ~20 batches the average needs to catch up — a push away from
    whatever was sampled, which flattens the policy toward invalid answers."""

    def __init__(self, decay: float = 0.9, start: str = "zero") -> None:
        if start not in ("zero", "mean"):
            raise ValueError(f"start must be 'zero' or 'mean', got {start!r}")
        self.decay = float(decay)
        self.start = start
        self.values: dict[str, float] = {}

    def advantages(self, rewards: Sequence[float], strata: Sequence[str]) -> list[float]:
        if len(rewards) != len(strata):
            raise ValueError("one stratum per reward")
        groups: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(strata):
            groups[s].append(i)
        out = [float(r) for r in rewards]
        for s, members in groups.items():
            mean = statistics.fmean(rewards[i] for i in members)
            b = self.values.get(s, mean if self.start == "mean" else 0.0)
            for i in members:
                out[i] -= b
            self.values[s] = self.decay * b + (1.0 - self.decay) * mean
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "start": self.start, "values": dict(self.values)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay = float(state.get("decay", self.decay))
        self.values = {str(k): float(v) for k, v in state.get("values", {}).items()}


class WriteupCurriculum(CpuCurriculum):
    """The write-up's CPU curriculum exactly: at **every draw** (and after every result)
    the unlocked levels are recomputed as 1 … (the hardest level won) + 1, where a level
    is won when its last ``k`` fights (at least ``min_results`` of them) were won at
    least ``unlock_win_rate`` (0.5) of the time — so a level **locks again** when its
    recent rate falls.  :class:`CpuCurriculum` (the PPO runs') only ever unlocks.  The
    draw is the shared ``max(p(1 − p), floor)`` (``floor`` 0 is the write-up's draw)."""

    kind = "writeup_curriculum"

    def __init__(self, levels: Sequence[int] | None = None, k: int = 10, floor: float = 0.05,
                 unlock_win_rate: float = 0.5, seed: int | None = None, min_results: int | None = None) -> None:
        kw: dict[str, Any] = {} if levels is None else {"levels": levels}
        super().__init__(k=k, floor=floor, unlock_win_rate=unlock_win_rate, seed=seed, **kw)
        self.min_results = int(min_results if min_results is not None else k)

    def hardest_won(self) -> int:
        """How many rungs up the hardest won level is (0: none won yet)."""
        return max((i + 1 for i, n in enumerate(self.ladder)
                    if len(self.recent[n]) >= self.min_results and self.win_rate(n) >= self.unlock_win_rate),
                   default=0)

    def _recompute(self) -> None:
        self.unlocked = min(self.hardest_won() + 1, len(self.ladder))

    def sample(self) -> str:
        self._recompute()
        return super().sample()

    def record(self, opponent: str, outcome: str) -> None:
        super().record(opponent, outcome)
        self._recompute()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._recompute()


def signal_filter(advantages: Sequence[Sequence[float]], eps: float = 1e-6) -> list[bool]:
    """Which fights (groups of moves) to keep: one whose every advantage is within
    ``eps`` of 0 pushes no token's probability anywhere (the write-up's dynamic-sampling
    filter), and so only dilutes the batch mean."""
    return [bool(a) and max(abs(x) for x in a) > eps for a in advantages]


@dataclass
class Batch:
    """The moves of a batch as tensors: prompts (N, P), responses (N, R; -1 pads),
    advantages (N,), the log-probabilities they were sampled with (N,)."""

    prompts: torch.Tensor
    responses: torch.Tensor
    advantages: torch.Tensor
    old_logp: torch.Tensor

    @classmethod
    def build(cls, policy: TextPolicy, fights: list[FightResult],
              advantages: list[list[float]]) -> Batch | None:
        prompts, responses, adv, old = [], [], [], []
        for fight, a in zip(fights, advantages, strict=True):
            for step, x in zip(fight.steps, a, strict=True):
                toks, text = step.extra.get("tokens"), step.extra.get("prompt")
                if not isinstance(toks, list) or not isinstance(text, str) or not toks:
                    continue  # a failed call: no tokens were generated
                prompts.append(policy.encode_prompt(text))
                responses.append(toks + [-1] * (policy.max_response - len(toks)))
                adv.append(x)
                old.append(sum(step.extra.get("token_logprobs") or [0.0]))
        if not prompts:
            return None
        return cls(torch.tensor(prompts), torch.tensor(responses), torch.tensor(adv, dtype=torch.float32),
                   torch.tensor(old, dtype=torch.float32))


def update(policy: TextPolicy, opt: torch.optim.Optimizer, batch: Batch, *, epochs: int = 1,
           clip: float | None = None, entropy_coef: float = 0.0, minibatch: int = 512,
           max_grad_norm: float = 1.0, seed: int = 0) -> dict[str, float]:
    """Policy-gradient steps on ``batch``: REINFORCE ``−A · log π(response)`` (with
    ``clip``: PPO's clipped ratio against the sampling log-probabilities), minus
    ``entropy_coef`` times the response tokens' entropy.  Returns the last loss,
    the mean entropy per token and the ratio's drift."""
    n = len(batch.advantages)
    g = torch.Generator().manual_seed(seed)
    stats: dict[str, float] = {}
    t0 = time.perf_counter()
    steps = 0
    with policy.lock:
        for _ in range(max(1, epochs)):
            for idx in torch.randperm(n, generator=g).split(minibatch):
                logp_tok, ent = policy.logprobs(batch.prompts[idx], batch.responses[idx])
                logp, adv = logp_tok.sum(-1), batch.advantages[idx]
                if not clip:  # None or 0: plain REINFORCE
                    pg = -(adv * logp).mean()
                else:
                    ratio = torch.exp(logp - batch.old_logp[idx])
                    pg = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
                n_tok = (batch.responses[idx] >= 0).sum().clamp(min=1)
                entropy = ent.sum() / n_tok
                loss = pg - entropy_coef * entropy
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.net.parameters(), max_grad_norm)
                opt.step()
                steps += 1
                stats = {"loss": float(loss.detach()), "entropy": float(entropy.detach()),
                         "logp_drift": float((logp.detach() - batch.old_logp[idx]).abs().mean())}
    return {**stats, "grad_steps": steps, "update_s": round(time.perf_counter() - t0, 3)}


def fight_rewards(fights: list[FightResult], weights: MoveRewardWeights) -> list[list[float]]:
    """Every move's reward, fight by fight (:func:`assign_rewards`)."""
    return [assign_rewards([s.invalid for s in f.steps], [s.hp_diff for s in f.steps],
                           [s.frames for s in f.steps], str(f.outcome), weights) for f in fights]


def export_rows(fights: list[FightResult], rewards: list[list[float]],
                advantages: list[list[float]], batch: int) -> list[dict[str, Any]]:
    """One row per move for an external RL trainer (docs/move_training.md, "Export"):
    ``prompt`` / ``completion`` (the text the model read and wrote), ``reward``,
    ``advantage``, the response ``tokens`` and ``token_logprobs``, and where it came
    from (batch, seed, opponent, stratum, tick, the move played, invalid).  A language
    model's row adds what TRL and verl take unchanged: ``messages`` (the full list the
    model saw: system, user, re-asks), ``prompt_ids`` (their rendering), ``completion_ids``
    (the sampled ids) and ``logprobs`` (one per completion id)."""
    rows = []
    for f, rs, ads in zip(fights, rewards, advantages, strict=True):
        for s, r, a in zip(f.steps, rs, ads, strict=True):
            toks = s.extra.get("tokens")
            ids = toks if isinstance(toks, list) and toks and all(
                isinstance(t, int) and not isinstance(t, bool) for t in toks) else None
            row = {"prompt": s.extra.get("prompt"), "completion": s.extra.get("response", s.answer),
                   "reward": r, "advantage": a, "tokens": toks,
                   "token_logprobs": s.extra.get("token_logprobs"), "logprob": s.logprob,
                   "batch": batch, "seed": f.spec.seed, "opponent": f.spec.opponent,
                   "stratum": f.spec.difficulty, "tick": s.tick, "move": s.move,
                   "invalid": s.invalid, "outcome": f.outcome, "error": s.error}
            if "messages" in s.extra:
                row.update(messages=s.extra["messages"], prompt_ids=s.extra.get("prompt_ids"),
                           completion_ids=ids, logprobs=s.extra.get("token_logprobs") if ids else None,
                           asks=s.extra.get("asks"))
            rows.append(row)
    return rows


def write_jsonl(path: Any, rows: list[dict[str, Any]]) -> None:
    """All rows at once, atomically: a reader sees the whole batch or none of it."""
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in rows).encode())


def batch_metrics(results: list[FightResult], rewards: list[list[float]]) -> dict[str, Any]:
    """What the write-up measured, per batch: win rate per difficulty, the reward,
    the invalid-move rate and the spam fraction over named moves; voids by reason."""
    ok = [r for r in results if r.ok]
    per: dict[str, list[float]] = defaultdict(list)
    for r in ok:
        per[r.spec.difficulty].append(1.0 if r.outcome == "win" else 0.0)
    moves = [s for r in ok for s in r.steps]
    flat = [x for rs in rewards for x in rs]
    return {
        "fights": len(results), "completed": len(ok),
        "voids": dict(Counter(str(r.void).split(":", 1)[0] for r in results if not r.ok)),
        "moves": len(moves),
        "win_rate": {k: float(np.mean(v)) for k, v in sorted(per.items())},
        "games": {k: len(v) for k, v in sorted(per.items())},
        "reward_mean": float(np.mean(flat)) if flat else None,
        "reward_fight_mean": float(np.mean([np.mean(rs) for rs in rewards if rs])) if flat else None,
        "invalid_rate": float(np.mean([s.invalid for s in moves])) if moves else None,
        "spam_fraction": float(np.mean([spam_fraction(r.steps) for r in ok])) if ok else None,
        "top_moves": dict(Counter(s.move for s in moves).most_common(5)),
        # calls without a usable answer, and answers behind which the model had failed
        # (an LLM server's 500s, malformed bodies): counted, never dropped
        "failed_calls": sum(s.failed for s in moves),
        "model_errors": sum(s.error is not None and not s.failed for s in moves),
        "errors": dict(Counter(str(s.error)[:80] for s in moves if s.error is not None).most_common(5)),
    }
