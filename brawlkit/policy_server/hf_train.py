"""The update of a Hugging Face model trained through ``/move`` (``policy train --hf``).

The rest of the recipe is the text policy's, one implementation
(:mod:`brawlkit.policy_server.trainer`: the per-move reward, the stratified baseline,
the signal filter, the export, the metrics; the curriculum; the rollout workers).
What differs for a language model is only what a batch is and how a step is taken:

* **A batch** (:class:`HfBatch`) is, per move, the prompt ids the model read (the
  chat template over the full message list), the completion ids it sampled, their
  sampling log-probabilities and the move's advantage — all recorded by the endpoint
  (:class:`~brawlkit.policy_server.hf_policy.HfPolicy`), never re-tokenised.
* **The loss** (:func:`policy_loss`) is GRPO's as TRL computes it (``loss_type="dapo"``):
  per token, PPO's clipped ratio against the sampling log-probability times the
  move's advantage, plus ``kl_coef`` times the k3 estimate of the KL to the frozen
  reference (``exp(ref − logp) − (ref − logp) − 1``), averaged over every completion
  token of the minibatch.
* **Memory.** A minibatch (one optimizer step) is split into micro-batches whose
  gradients accumulate (each normalised by the minibatch's token count, so the step
  is the same as one big forward); prompts are left-padded so only the completion's
  logits are computed (``logits_to_keep``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch

from brawlkit.policy_server.hf_policy import HfPolicy
from brawlkit.policy_server.rollouts import FightResult

#: pairs ``clone_acc`` is measured on (a sample: its 95 % interval is within ±0.03)
ACC_SAMPLE = 1024


def _ids(v: Any) -> TypeGuard[list[int]]:
    return isinstance(v, list) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


@dataclass
class HfBatch:
    """Per move: prompt ids, completion ids, the completion's sampling logprobs, the advantage."""

    prompts: list[list[int]]
    completions: list[list[int]]
    old_logps: list[list[float]]
    advantages: list[float]

    def __len__(self) -> int:
        return len(self.prompts)

    @classmethod
    def build(cls, fights: list[FightResult], advantages: list[list[float]]) -> HfBatch | None:
        """The moves whose reply carried prompt ids, completion ids and one logprob per
        id (a failed call carries none: nothing to train on)."""
        out = cls([], [], [], [])
        for fight, adv in zip(fights, advantages, strict=True):
            for step, a in zip(fight.steps, adv, strict=True):
                p, c, lp = step.extra.get("prompt_ids"), step.extra.get("tokens"), step.extra.get("token_logprobs")
                if not (_ids(p) and _ids(c) and isinstance(lp, list) and len(lp) == len(c)):
                    continue
                out.prompts.append(p)
                out.completions.append(c)
                out.old_logps.append([float(x) for x in lp])
                out.advantages.append(float(a))
        return out if out.prompts else None


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
                adv: torch.Tensor, mask: torch.Tensor, *, clip: float, kl_coef: float,
                n_tokens: int | float) -> tuple[torch.Tensor, dict[str, float]]:
    """The summed per-token loss of a micro-batch divided by ``n_tokens`` (the
    minibatch's completion tokens): ``−min(r·A, clip(r)·A) + kl_coef · k3`` with
    ``r = exp(logp − old_logp)``; ``clip`` 0 is plain REINFORCE (``−A · logp``)."""
    a = adv.unsqueeze(-1)
    m = mask.float()
    if clip:
        ratio = torch.exp(logp - old_logp)
        per = -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
    else:
        per = -a * logp
    stats: dict[str, float] = {}
    if ref_logp is not None and kl_coef:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        per = per + kl_coef * kl
        stats["kl"] = float((kl * m).sum().detach()) / max(1.0, float(m.sum()))
    loss = (per * m).sum() / max(1.0, float(n_tokens))
    return loss, stats


def _steps(policy: HfPolicy, opt: torch.optim.Optimizer, lengths: list[int], *, epochs: int,
           minibatch: int, micro_batch: int, max_grad_norm: float, seed: int,
           micro: Callable[[list[int], int, bool], None]) -> int:
    """The one optimizer loop of the RL update and the supervised start: ``epochs`` passes
    of shuffled minibatches of ``minibatch`` items, each computed ``micro_batch`` items at
    a time. ``micro(indices, n_tok, first)`` runs one micro-batch's forward and backward
    with its loss divided by the minibatch's completion tokens ``n_tok`` (so gradients
    accumulate to the minibatch's per-token mean whatever the micro-batch size); ``first``
    marks a minibatch's first micro-batch. Returns the optimizer steps taken."""
    rng = random.Random(seed)
    params = policy.trainable_parameters()
    steps = 0
    for _ in range(max(1, epochs)):
        order = list(range(len(lengths)))
        rng.shuffle(order)
        for s in range(0, len(order), minibatch):
            mb = order[s:s + minibatch]
            n_tok = sum(lengths[i] for i in mb)
            opt.zero_grad()
            for u in range(0, len(mb), micro_batch):
                micro(mb[u:u + micro_batch], n_tok, u == 0)
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            steps += 1
    return steps


def update(policy: HfPolicy, opt: torch.optim.Optimizer, batch: HfBatch, *, epochs: int = 1,
           clip: float | None = 0.2, kl_coef: float = 0.0, minibatch: int = 64, micro_batch: int = 8,
           max_grad_norm: float = 1.0, seed: int = 0) -> dict[str, float]:
    """Optimizer steps over ``batch``: ``epochs`` passes of shuffled minibatches of
    ``minibatch`` moves, each computed ``micro_batch`` moves at a time; the stats are the
    last minibatch's (loss, per-token KL to the reference, drift from the sampling
    logprobs)."""
    t0 = time.perf_counter()
    dev = policy.device
    acc = {"loss": 0.0, "kl": 0.0, "drift": 0.0, "n_tok": 1.0}

    def micro(idx: list[int], n_tok: int, first: bool) -> None:
        if first:
            acc.update(loss=0.0, kl=0.0, drift=0.0, n_tok=float(max(1, n_tok)))
        prompts = [batch.prompts[i] for i in idx]
        comps = [batch.completions[i] for i in idx]
        # the reference first: its forward may swap parameters in place, which
        # must not happen while the policy's graph holds them for backward
        ref = policy.logprobs(prompts, comps, reference=True)[0] if kl_coef else None
        logp, mask = policy.logprobs(prompts, comps)
        r = logp.shape[1]
        old = torch.tensor([batch.old_logps[i] + [0.0] * (r - len(batch.old_logps[i])) for i in idx],
                           device=dev)
        adv = torch.tensor([batch.advantages[i] for i in idx], device=dev)
        loss, st = policy_loss(logp, old, ref, adv, mask, clip=clip or 0.0, kl_coef=kl_coef,
                               n_tokens=n_tok)
        loss.backward()
        acc["loss"] += float(loss.detach())
        acc["kl"] += st.get("kl", 0.0) * float(mask.sum())
        acc["drift"] += float(((logp.detach() - old).abs() * mask).sum())

    with policy.lock:
        policy.lm.train()
        steps = _steps(policy, opt, [len(c) for c in batch.completions], epochs=epochs,
                       minibatch=minibatch, micro_batch=micro_batch, max_grad_norm=max_grad_norm,
                       seed=seed, micro=micro)
        policy.lm.eval()
    last = ({"loss": acc["loss"], "kl": acc["kl"] / acc["n_tok"], "logp_drift": acc["drift"] / acc["n_tok"]}
            if steps else {})
    return {**last, "grad_steps": steps, "update_s": round(time.perf_counter() - t0, 3)}


def fit(policy: HfPolicy, opt: torch.optim.Optimizer, prompts: list[list[int]], completions: list[list[int]],
        *, epochs: int = 3, minibatch: int = 64, micro_batch: int = 16, seed: int = 0) -> dict[str, float]:
    """The supervised start's cross-entropy on (prompt ids, answer ids) pairs, averaged
    per token; returns the last minibatch's loss, the share of pairs whose first answer
    token gets more than half the probability (``clone_acc``, over a random
    :data:`ACC_SAMPLE` of them), steps, pairs and seconds."""
    t0 = time.perf_counter()
    loss_v = [0.0]

    def micro(idx: list[int], n_tok: int, first: bool) -> None:
        logp, _ = policy.logprobs([prompts[i] for i in idx], [completions[i] for i in idx])
        loss = -logp.sum() / n_tok
        loss.backward()
        loss_v[0] = (0.0 if first else loss_v[0]) + float(loss.detach())

    with policy.lock:
        policy.lm.train()
        steps = _steps(policy, opt, [len(c) for c in completions], epochs=epochs, minibatch=minibatch,
                       micro_batch=micro_batch, max_grad_norm=1.0, seed=seed, micro=micro)
        policy.lm.eval()
        hits = 0
        # on a sample: a forward over every pair costs a third of an epoch, for one figure
        look = random.Random(seed).sample(range(len(prompts)), min(len(prompts), ACC_SAMPLE))
        with torch.no_grad():
            for u in range(0, len(look), micro_batch):
                idx = look[u:u + micro_batch]
                logp, _ = policy.logprobs([prompts[i] for i in idx], [completions[i] for i in idx])
                hits += int((logp[:, 0] > -0.6931).sum())
    return {"clone_loss": loss_v[0], "clone_acc": round(hits / max(1, len(look)), 4), "clone_steps": steps,
            "clone_pairs": len(prompts), "clone_s": round(time.perf_counter() - t0, 2)}


def trl_batch(rows: list[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Exported rows as the batch TRL's GRPO trainer builds from its rollouts
    (``prompt_ids`` left-padded with ``prompt_mask``, ``completion_ids`` right-padded
    with ``completion_mask``, ``old_per_token_logps``, ``advantages``, ``rewards``): the
    shape an external trainer takes the rows in, unchanged."""
    rows = [r for r in rows if _ids(r.get("prompt_ids")) and _ids(r.get("completion_ids"))]
    p_len = max(len(r["prompt_ids"]) for r in rows)
    c_len = max(len(r["completion_ids"]) for r in rows)

    def left(v: list[Any], n: int, pad: Any) -> list[Any]:
        return [pad] * (n - len(v)) + list(v)

    def right(v: list[Any], n: int, pad: Any) -> list[Any]:
        return list(v) + [pad] * (n - len(v))

    return {
        "prompt_ids": torch.tensor([left(r["prompt_ids"], p_len, pad_id) for r in rows]),
        "prompt_mask": torch.tensor([left([1] * len(r["prompt_ids"]), p_len, 0) for r in rows]),
        "completion_ids": torch.tensor([right(r["completion_ids"], c_len, pad_id) for r in rows]),
        "completion_mask": torch.tensor([right([1] * len(r["completion_ids"]), c_len, 0) for r in rows]),
        "old_per_token_logps": torch.tensor([right(r["logprobs"], c_len, 0.0) for r in rows]),
        "advantages": torch.tensor([float(r["advantage"]) for r in rows]),
        "rewards": torch.tensor([float(r["reward"]) for r in rows]),
    }


def clone_pairs(policy: HfPolicy, fights: list[FightResult], teacher: Any = None
                ) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, answer ids) of every decision of ``fights`` for the supervised start:
    the chat prompt the model reads for the state (system and user message, rendered by
    its template) and the move the fight played — or, with ``teacher``, the teacher's
    label for the state (a DAgger round) — written as the model's answer."""
    from brawlkit.policy_server.llm import build_messages
    from brawlkit.policy_server.policy import MoveRequest

    prompts, answers = [], []
    for f in fights:
        for s in f.steps:
            name = teacher.label_body(s.state) if teacher is not None else s.move
            req = MoveRequest.model_validate(s.state)
            prompts.append(policy.render(build_messages(req, req.available_moves())))
            answers.append(policy.completion_ids(name))
    return prompts, answers
