"""A small text policy trained from scratch: it reads the state as words and writes a move name.

Why this and not a language model: the machine has no GPU and no weights can be
downloaded, but the training machinery must be the one a GPU user points at an LLM —
prompts in, *generated tokens* and their log-probabilities out.  So the model is a
tiny decoder-only language model over words (docs/move_training.md):

* **Prompt.** :func:`brawlkit.policy_server.prompt.render_state`'s lines, tokenised
  into words (:func:`~brawlkit.policy_server.prompt.tokenize`), left-padded to
  :data:`PROMPT_TOKENS` (the same padding when serving and when training, so a
  token's log-probability is the same number in both), then ``<sep>``.
* **Response.** Up to :data:`MAX_PIECES` move pieces (``attack``, ``right``, ``no``,
  ``move``, …; :data:`OUT_TOKENS`) and ``<eos>``, sampled one token at a time; the
  move name is the pieces joined by ``_``.  Nothing forces the pieces to form a move:
  ``up_shield`` is a possible answer, which the worker plays as ``no_move`` and the
  reward penalises — so the invalid-move rate is a real number that training drives
  down, as it is for an LLM.
* **Net.** One GRU (embedding 32, hidden 96) over prompt, ``<sep>`` and the response
  so far; a linear head over :data:`OUT_TOKENS`.  ~50 k parameters: a forward pass
  per decision is well under a millisecond on one core.

:class:`TextPolicy` answers ``/move`` requests (``answer`` returns the move, its
log-probability, the response tokens, their log-probabilities, the prompt and the
response text: what the rollout export needs) and computes the log-probabilities of
whole batches with gradients for the trainer.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.prompt import render_state, tokenize, vocabulary

PAD, UNK, SEP, EOS = "<pad>", "<unk>", "<sep>", "<eos>"
#: prompt length in tokens (longer prompts keep their last tokens)
PROMPT_TOKENS = 48
#: the most pieces a response has (``up_special_right`` is three)
MAX_PIECES = 3
#: what the head can write: every piece of every move name, then ``<eos>``
OUT_TOKENS: tuple[str, ...] = (*dict.fromkeys(p for n in NAMES for p in tokenize(n)), EOS)
EOS_ID = len(OUT_TOKENS) - 1


@dataclass(frozen=True)
class TextPolicyConfig:
    """The net's shape and its sampling temperature."""

    embed: int = 32
    hidden: int = 96
    temperature: float = 1.0


class _Net(nn.Module):
    def __init__(self, vocab: int, n_out: int, cfg: TextPolicyConfig) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, cfg.embed)
        self.gru = nn.GRU(cfg.embed, cfg.hidden, batch_first=True)
        self.head = nn.Linear(cfg.hidden, n_out)


class TextPolicy:
    """The text policy: tokenizer, net, sampler, batch log-probabilities, save/load."""

    label = "text-policy"

    def __init__(self, cfg: TextPolicyConfig | None = None, seed: int = 0,
                 decision_ticks: int = 8) -> None:
        self.cfg = cfg or TextPolicyConfig()
        self.vocab = [PAD, UNK, SEP, *vocabulary()]
        self.index = {t: i for i, t in enumerate(self.vocab)}
        torch.manual_seed(seed)
        self.net = _Net(len(self.vocab), len(OUT_TOKENS), self.cfg)
        #: the vocabulary id of each output token (what a sampled piece reads as next)
        self.out_in = torch.tensor([self.index.get(t, self.index[UNK]) for t in OUT_TOKENS])
        self.gen = torch.Generator().manual_seed(seed)
        self.decision_ticks = decision_ticks
        self.lock = threading.Lock()  # the endpoint's thread samples, the trainer updates

    # ------------------------------------------------------------------ tokens
    def encode_prompt(self, text: str) -> list[int]:
        """The prompt's token ids, left-padded (or cut from the left) to PROMPT_TOKENS."""
        unk = self.index[UNK]
        ids = [self.index.get(t, unk) for t in tokenize(text)][-PROMPT_TOKENS:]
        return [self.index[PAD]] * (PROMPT_TOKENS - len(ids)) + ids

    @staticmethod
    def response_text(tokens: list[int]) -> str:
        """The move name the response tokens spell (pieces joined by ``_``)."""
        return "_".join(OUT_TOKENS[t] for t in tokens if t != EOS_ID)

    # ------------------------------------------------------------------ serving
    @torch.no_grad()
    def sample(self, prompt_ids: list[int], greedy: bool = False) -> tuple[list[int], list[float]]:
        """Response tokens and each one's log-probability, one token at a time."""
        net = self.net
        x = torch.tensor([prompt_ids + [self.index[SEP]]])
        out, h = net.gru(net.emb(x))
        last = out[:, -1]
        tokens: list[int] = []
        logps: list[float] = []
        for _ in range(MAX_PIECES + 1):
            logp = torch.log_softmax(net.head(last) / self.cfg.temperature, dim=-1)[0]
            t = int(logp.argmax()) if greedy else int(torch.multinomial(logp.exp(), 1, generator=self.gen))
            tokens.append(t)
            logps.append(float(logp[t]))
            if t == EOS_ID or len(tokens) > MAX_PIECES:
                break
            last, h = net.gru(net.emb(self.out_in[t].view(1, 1)), h)
            last = last[:, -1]
        if tokens[-1] != EOS_ID and len(tokens) > MAX_PIECES:  # a 4th piece is never kept
            tokens, logps = tokens[:MAX_PIECES], logps[:MAX_PIECES]
        return tokens, logps

    def answer(self, req: Any) -> dict[str, Any]:
        """The ``/move`` reply: move, logprob, and what a trainer needs besides."""
        prompt = render_state(req)
        with self.lock:
            tokens, logps = self.sample(self.encode_prompt(prompt))
        name = self.response_text(tokens)
        return {"move": name, "logprob": float(sum(logps)), "tokens": tokens,
                "token_logprobs": logps, "prompt": prompt, "response": name}

    def choose(self, req: Any) -> tuple[str, float]:
        a = self.answer(req)
        return a["move"], a["logprob"]

    # ------------------------------------------------------------------ training
    def logprobs(self, prompts: torch.Tensor, responses: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probabilities and entropies, both (B, R), of ``responses``
        (B, R; -1 = padding, masked to 0) after ``prompts`` (B, PROMPT_TOKENS), with
        gradients.  The same arithmetic as :meth:`sample` (temperature included)."""
        b, r = responses.shape
        net = self.net
        sep = torch.full((b, 1), self.index[SEP], dtype=torch.long)
        prev = responses[:, :-1].clamp(min=0)
        x = torch.cat([prompts, sep, self.out_in[prev]], dim=1)
        out, _ = net.gru(net.emb(x))
        logits = net.head(out[:, PROMPT_TOKENS:]) / self.cfg.temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        mask = responses >= 0
        logp = logp_all.gather(-1, responses.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
        ent = -(logp_all.exp() * logp_all).sum(-1) * mask
        return logp, ent

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        """Write the policy (config, vocabulary, weights) to ``path``, atomically."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save({"format": "brawlkit-text-policy", "version": 1, "config": asdict(self.cfg),
                    "vocab": self.vocab, "out_tokens": list(OUT_TOKENS),
                    "decision_ticks": self.decision_ticks, "state_dict": self.net.state_dict(),
                    "meta": meta or {}}, tmp)
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> TextPolicy:
        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
        if blob.get("format") != "brawlkit-text-policy":
            raise ValueError(f"{path} is not a text policy")
        pol = cls(TextPolicyConfig(**blob["config"]), decision_ticks=int(blob["decision_ticks"]))
        if blob["vocab"] != pol.vocab or tuple(blob["out_tokens"]) != OUT_TOKENS:
            raise ValueError(f"{path} was trained with another vocabulary")
        pol.net.load_state_dict(blob["state_dict"])
        pol.label = Path(path).name
        return pol
