"""A supervised start for the text policy: clone the scripted ``/move`` endpoint, then RL.

Why: the write-up trains an LLM that already knows how to play (a pretrained model wins
a good share of its fights before any RL).  The text policy here starts from random
weights, loses every early fight, and the per-move reward of an all-loss batch
rewards stalling (docs/move_training.md measures both).  The analogous start for a
from-scratch model is a model that has read a player's fights: this module clones the
example endpoint's scripted player (:mod:`~brawlkit.policy_server.scripted`, what
``examples/move_clients/random_server.py --policy scripted`` answers: approach, attack
when close, side-special a heavy opponent, up-special home) before ``policy train``'s RL loop takes over.  It is an
*imitation* start, documented as such, and every number a run reports keeps the
random-init value beside the cloned one (``policy train --clone-fights N``).

How, all through the real machinery:

1. **Teacher fights.** The scripted player is served as a real ``/move`` endpoint (a
   thread of the trainer, like the text policy) and plays ``clone_fights`` fights with
   the same rollout workers and game servers; every decision is a (prompt, move)
   pair: the prompt the text policy would read for that request, the move the teacher
   played.
2. **DAgger rounds** (``clone_rounds``, Ross et al. 2011).  The cloned text policy then
   plays fights itself and the teacher labels *the states the student reached* (the
   teacher is a pure function of the request, so labelling is a call, not a fight);
   the pairs are added to the set and the policy is fitted again.  Plain cloning
   only sees the teacher's states and drifts once the student leaves them.
3. **Fit.** Cross-entropy of the teacher's response tokens under the policy
   (:meth:`TextPolicy.logprobs`, the same arithmetic as sampling), Adam, minibatches.

The CPU of all of it is counted in the run's ``cpu_s`` (same process, same workers).
"""

from __future__ import annotations

import random
import time
from typing import Any

import torch

from brawlkit.policy_server.prompt import render_state, tokenize
from brawlkit.policy_server.rollouts import FightResult
from brawlkit.policy_server.scripted import scripted_move
from brawlkit.policy_server.text_policy import EOS, TextPolicy


class ScriptedTeacher:
    """The scripted player (:func:`~brawlkit.policy_server.scripted.scripted_move`, the
    example endpoint's) as a chooser (served by
    :func:`~brawlkit.policy_server.app.create_app`) and as a labeller of request bodies."""

    label = "example:scripted"

    def __init__(self, seed: int = 0, decision_ticks: int = 8) -> None:
        self.rng = random.Random(seed)
        self.decision_ticks = decision_ticks

    def label_body(self, body: dict[str, Any]) -> str:
        """The teacher's move for a ``/move`` request body (what the worker sent)."""
        return scripted_move(body, self.rng)

    def choose(self, req: Any) -> tuple[str, float]:
        body = {"self": req.me.model_dump(), "opponent": req.opponent.model_dump(),
                "available": list(req.available_moves())}
        return self.label_body(body), 0.0


def encode_response(policy: TextPolicy, name: str) -> list[int]:
    """The response tokens that write ``name`` in the policy's vocabulary, padded with
    -1 to ``max_response`` (a names policy: one token; pieces: the pieces and ``<eos>``)."""
    out = policy.out_tokens
    toks = [out.index(name)] if policy.max_response == 1 else [out.index(p) for p in tokenize(name)] + [
        out.index(EOS)]
    return toks + [-1] * (policy.max_response - len(toks))


def clone_pairs(policy: TextPolicy, fights: list[FightResult],
                teacher: ScriptedTeacher | None = None) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, response ids) of every decision of ``fights``: the move the fight
    played (teacher fights) or, with ``teacher``, the teacher's label for the state."""
    from brawlkit.policy_server.policy import MoveRequest

    prompts, responses = [], []
    for f in fights:
        for s in f.steps:
            name = teacher.label_body(s.state) if teacher is not None else s.move
            text = s.extra.get("prompt")
            if not isinstance(text, str):
                text = render_state(MoveRequest.model_validate(s.state))
            prompts.append(policy.encode_prompt(text))
            responses.append(encode_response(policy, name))
    return prompts, responses


def fit(policy: TextPolicy, opt: torch.optim.Optimizer, prompts: list[list[int]],
        responses: list[list[int]], *, epochs: int = 3, minibatch: int = 256,
        seed: int = 0) -> dict[str, float]:
    """Cross-entropy steps on the pairs; returns the last loss, the share of pairs
    whose teacher token the policy now gives more than half its probability, the step
    count, the pairs and the seconds."""
    p, r = torch.tensor(prompts), torch.tensor(responses)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    loss = torch.tensor(0.0)
    steps = 0
    with policy.lock:
        for _ in range(max(1, epochs)):
            for idx in torch.randperm(len(p), generator=g).split(minibatch):
                logp, _ = policy.logprobs(p[idx], r[idx])
                loss = -logp.sum(-1).mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.net.parameters(), 1.0)
                opt.step()
                steps += 1
        with torch.no_grad():
            logp, _ = policy.logprobs(p, r)
            acc = float((logp[:, 0] > -0.6931).float().mean())  # the teacher's first token has p > 1/2
    return {"clone_loss": float(loss.detach()), "clone_acc": round(acc, 4), "clone_steps": steps,
            "clone_pairs": len(p), "clone_s": round(time.perf_counter() - t0, 2)}
