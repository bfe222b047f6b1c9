"""A small text policy trained from scratch: it reads the state as words and writes a move name.

Why this and not a language model: the machine has no GPU and no weights can be
downloaded, but the training machinery must be the one a GPU user points at an LLM —
prompts in, *generated tokens* and their log-probabilities out.  So the model is a
tiny decoder-only language model over words (docs/move_training.md):

* **Prompt.** :func:`brawlkit.policy_server.prompt.render_state`'s lines, tokenised
  into words (:func:`~brawlkit.policy_server.prompt.tokenize`), left-padded to
  :data:`PROMPT_TOKENS` (the same padding when serving and when training, so a
  token's log-probability is the same number in both), then ``<sep>``.
* **Response.** Sampled one token at a time from the head's vocabulary
  (:data:`OUT_VOCABS`): by default one token, a move name — so an answer can still be
  invalid, a move the state does not offer (a jump with no jump left, the up-special
  while helpless), which the worker plays as ``no_move`` and the reward penalises; or
  (``response="pieces"``) up to :data:`MAX_PIECES` pieces (``attack``, ``right``,
  ``no``, ``move``, …) and ``<eos>``, joined by ``_``, where nothing forces the pieces
  to form a move (``up_shield``).
* **Net.** One GRU (embedding 32, hidden 96) over prompt, ``<sep>`` and the response
  so far; a linear head over the response vocabulary.  ~50 k parameters: a forward pass
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
#: what the head can write, by response vocabulary (:class:`TextPolicyConfig.response`):
#: ``pieces`` — every piece of every move name, then ``<eos>``; ``names`` — the move names
OUT_VOCABS: dict[str, tuple[str, ...]] = {
    "pieces": (*dict.fromkeys(p for n in NAMES for p in tokenize(n)), EOS),
    "names": NAMES,
}


@dataclass(frozen=True)
class TextPolicyConfig:
    """The net's shape, its response vocabulary and its sampling temperature.

    ``response``: ``names`` (default) — one token, a move name (the vocabulary an LLM's
    tokenizer gives common words: a move is a word), so an invalid answer is a move the
    state does not offer; ``pieces`` — the name spelled in pieces, up to three and
    ``<eos>`` (``up_shield`` possible), so the model must first learn to spell: untrained,
    96 % of its answers are no move (docs/move_training.md measures both)."""

    embed: int = 32
    hidden: int = 96
    temperature: float = 1.0
    response: str = "names"


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
        if self.cfg.response not in OUT_VOCABS:
            raise ValueError(f"response must be one of {sorted(OUT_VOCABS)}, got {self.cfg.response!r}")
        self.out_tokens = OUT_VOCABS[self.cfg.response]
        #: tokens in a response at most (a names response is one token, no <eos>)
        self.max_response = MAX_PIECES + 1 if self.cfg.response == "pieces" else 1
        self.eos_id = self.out_tokens.index(EOS) if EOS in self.out_tokens else None
        self.vocab = [PAD, UNK, SEP, *vocabulary()]
        self.index = {t: i for i, t in enumerate(self.vocab)}
        torch.manual_seed(seed)
        self.net = _Net(len(self.vocab), len(self.out_tokens), self.cfg)
        #: the vocabulary id of each output token (what a sampled piece reads as next)
        self.out_in = torch.tensor([self.index.get(t, self.index[UNK]) for t in self.out_tokens])
        self.gen = torch.Generator().manual_seed(seed)
        self.decision_ticks = decision_ticks
        self.lock = threading.Lock()  # the endpoint's thread samples, the trainer updates
        #: answer with the most likely tokens instead of sampling: the deterministic policy
        #: (``policy train --eval-greedy`` evaluates it)
        self.greedy = False

    # ------------------------------------------------------------------ tokens
    def encode_prompt(self, text: str) -> list[int]:
        """The prompt's token ids, left-padded (or cut from the left) to PROMPT_TOKENS."""
        unk = self.index[UNK]
        ids = [self.index.get(t, unk) for t in tokenize(text)][-PROMPT_TOKENS:]
        return [self.index[PAD]] * (PROMPT_TOKENS - len(ids)) + ids

    def response_text(self, tokens: list[int]) -> str:
        """The move name the response tokens spell (pieces joined by ``_``)."""
        return "_".join(self.out_tokens[t] for t in tokens if t != self.eos_id)

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
        while True:
            logp = torch.log_softmax(net.head(last) / self.cfg.temperature, dim=-1)[0]
            t = int(logp.argmax()) if greedy else int(torch.multinomial(logp.exp(), 1, generator=self.gen))
            if self.eos_id is not None and t != self.eos_id and len(tokens) == MAX_PIECES:
                break  # a 4th piece is never kept: the response ends after three
            tokens.append(t)
            logps.append(float(logp[t]))
            if t == self.eos_id or len(tokens) >= self.max_response:
                break
            last, h = net.gru(net.emb(self.out_in[t].view(1, 1)), h)
            last = last[:, -1]
        return tokens, logps

    def answer(self, req: Any) -> dict[str, Any]:
        """The ``/move`` reply: move, logprob, and what a trainer needs besides."""
        prompt = render_state(req)
        with self.lock:
            tokens, logps = self.sample(self.encode_prompt(prompt), self.greedy)
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
                    "vocab": self.vocab, "out_tokens": list(self.out_tokens),
                    "decision_ticks": self.decision_ticks, "state_dict": self.net.state_dict(),
                    "meta": meta or {}}, tmp)
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> TextPolicy:
        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
        if blob.get("format") != "brawlkit-text-policy":
            raise ValueError(f"{path} is not a text policy")
        pol = cls(TextPolicyConfig(**blob["config"]), decision_ticks=int(blob["decision_ticks"]))
        if blob["vocab"] != pol.vocab or tuple(blob["out_tokens"]) != pol.out_tokens:
            raise ValueError(f"{path} was trained with another vocabulary")
        pol.net.load_state_dict(blob["state_dict"])
        pol.label = Path(path).name
        return pol
