"""A tiny chat language model, built and saved here: the Hugging Face path without a download.

The tests, the docs' CPU benchmark and anyone without weights at hand need a real
``transformers`` causal LM to serve through ``/move`` and train: :func:`build_tiny_lm`
makes one in a second, from nothing but this repository —

* **Tokenizer.** A byte-level BPE (the ``tokenizers`` library, as GPT-2 and Qwen use)
  trained on the project's own text: the adapter's system prompt, the state text of
  random requests (:func:`brawlkit.policy_server.prompt.render_state`), the available
  moves, re-asks and every move name — with ChatML's special tokens and a chat template
  (``<|im_start|>role\\n…<|im_end|>``, the generation prompt ``<|im_start|>assistant\\n``).
* **Model.** A randomly initialised Qwen2 decoder (``Qwen2ForCausalLM``): by default 2
  layers, hidden 64, 4 heads (2 key-value), tied embeddings — about 0.1 M parameters,
  the size TRL's own tests use for a "tiny Qwen2".

``python -m brawlkit.policy_server.tiny_lm OUT_DIR`` writes one (``policy serve --hf
OUT_DIR`` serves it; ``policy train --hf OUT_DIR`` trains it).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

#: ChatML, the template of Qwen's chat models; the tiny model speaks it too
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _random_request(rng: random.Random) -> Any:
    from brawlkit.policy_server.moves import NAMES
    from brawlkit.policy_server.policy import MoveRequest

    def fighter() -> dict[str, Any]:
        ground = rng.random() < 0.6
        return {"x": rng.uniform(-140, 140), "y": 0.0 if ground else rng.uniform(-80, 120),
                "vx": 0.0, "vy": 0.0, "damage": rng.uniform(0, 160), "shield": rng.uniform(0, 60),
                "stocks": rng.randint(1, 3), "facing": rng.choice((-1, 1)), "flags": 1 if ground else 0,
                "action_state": rng.randint(0, 9), "jumps_left": rng.randint(0, 1)}

    return MoveRequest.model_validate({"self": fighter(), "opponent": fighter(),
                                       "ticks_left": rng.randint(0, 9000),
                                       "last_moves": rng.sample(NAMES, rng.randint(0, 4))})


def corpus(n_states: int = 300, seed: int = 0) -> list[str]:
    """The text the tokenizer learns from: whole rendered conversations (system prompt,
    state, available moves, a re-ask) and the move names on their own."""
    from brawlkit.policy_server.llm import build_messages
    from brawlkit.policy_server.moves import NAMES

    rng = random.Random(seed)
    out: list[str] = []
    for i in range(n_states):
        req = _random_request(rng)
        avail = req.available_moves()
        msgs = build_messages(req, avail, bad=rng.choice(NAMES) if i % 3 == 0 else None)
        out += [m["content"] for m in msgs]
        out.append(rng.choice(avail))
    out += list(NAMES) * 20
    return out


def build_tiny_lm(out: str | Path, *, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4,
                  kv_heads: int = 2, vocab: int = 1024) -> Path:
    """Train the tokenizer, initialise the model, save both (with the chat template) to
    ``out``; returns ``out``.  The same ``seed`` gives the same files' contents."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from brawlkit.policy_server.hf_policy import _require

    tf = _require()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=list(SPECIAL), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(seed=seed), trainer)
    fast = tf.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    cfg = tf.Qwen2Config(vocab_size=len(fast), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None)
    model = tf.Qwen2ForCausalLM(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    model.save_pretrained(str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m brawlkit.policy_server.tiny_lm OUT_DIR", file=sys.stderr)
        return 2
    print(build_tiny_lm(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
