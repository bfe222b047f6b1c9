"""``python -m brawlkit policy serve|play|train``: the ``/move`` endpoint, its worker and its trainer.

* ``serve (--checkpoint CKPT | --text-policy FILE | --hf DIR | --llm URL --model NAME) --port N
  [--host 127.0.0.1] [--member ID]`` serves a PPO checkpoint (SB3 zip or ``.bpw``), a
  trained text policy, a Hugging Face model in this process
  (:mod:`brawlkit.policy_server.hf_policy`) or a language model behind an
  OpenAI-compatible chat server (:mod:`brawlkit.policy_server.llm`) as ``POST /move``; prints ``listening <port>``
  once bound (``--port 0``: the kernel's choice), like the game server and the
  registry.
* ``play --endpoint URL --vs cpu:L [--matches K] [--league-dir DIR] [--member ID]``
  plays full matches on a real ``brawlpit_server`` through any endpoint of the
  contract (:mod:`brawlkit.policy_server.player`).
* ``train --out DIR [--minutes M] [--seed S] ...`` trains the small text policy through
  the real endpoint (:mod:`brawlkit.policy_server.train_run`).

docs/move.md documents them and the JSON contract; the sub-commands and their help are
:data:`SUBCOMMANDS`, one table for the dispatch and every help text.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from brawlkit.common.cli_args import command_parser
from brawlkit.common.net import listen_tcp


def _serve_parser() -> argparse.ArgumentParser:
    ap = command_parser(
        "policy serve",
        "Serve a model as the /move endpoint (docs/move.md): POST /move answers a game "
        "state with a named move and its log-probability; GET /moves lists the moves; GET /info "
        "says the decision period and the league member. The model is a PPO checkpoint, a text "
        "policy trained by `policy train`, or a language model behind an OpenAI-compatible "
        "chat-completions server (--llm). Prints 'listening <port>' once the socket is bound.")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="SB3 checkpoint zip or .bpw blob")
    which.add_argument("--text-policy", help="a text policy file (policy.pt of `policy train`)")
    which.add_argument("--hf", metavar="DIR",
                       help="a Hugging Face causal LM with a chat template, run in this process: a local "
                            "folder (a `policy train --hf` checkpoint, the tiny model of "
                            "`python -m brawlkit.policy_server.tiny_lm DIR`) or a hub id; needs the llm extra")
    which.add_argument("--llm", metavar="URL",
                       help="base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, SGLang), "
                            "e.g. http://127.0.0.1:8000; /v1/chat/completions is appended")
    ap.add_argument("--model", default=None, help="with --llm: the model name the server knows")
    ap.add_argument("--budget-ms", type=float, default=2000.0,
                    help="with --llm: time one decision may spend on the server, re-ask included (2000)")
    ap.add_argument("--temperature", type=float, default=0.7,
                    help="with --llm / --hf: sampling temperature (0.7; 0 with --hf: greedy, the most "
                         "likely token at each step)")
    ap.add_argument("--token-ids", action="store_true",
                    help="with --llm: ask the server for token ids and the prompt's ids (vLLM / SGLang: "
                         "return_tokens_as_token_ids, return_token_ids), kept for training")
    ap.add_argument("--reasks", type=int, default=1,
                    help="with --llm / --hf: how often an answer naming no available move is asked again (1)")
    ap.add_argument("--device", default=None, help="with --hf: torch device (default: cuda if present, else cpu)")
    ap.add_argument("--max-new-tokens", type=int, default=8, help="with --llm / --hf: answer length cap (8)")
    ap.add_argument("--api-key-env", default="OPENAI_API_KEY",
                    help="with --llm: the environment variable holding a bearer key, if the server wants one")
    ap.add_argument("--decision-ticks", type=int, default=8,
                    help="with --llm / --hf / --text-policy: the decision period GET /info reports (8)")
    ap.add_argument("--port", type=int, required=True, help="TCP port; 0 = the kernel chooses")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--member", default=None,
                    help="league member id the model plays as (default: for a checkpoint, the member "
                         "whose artifact it is, when it lies in a league directory)")
    ap.add_argument("--log-level", default="warning",
                    choices=("critical", "error", "warning", "info", "debug"))
    return ap


def _chooser(args: argparse.Namespace) -> tuple[object, str | None, str]:
    """(the chooser, its member id, a line describing it) for ``serve``'s flags."""
    import os

    if args.llm:
        from brawlkit.policy_server.llm import ChatClient, LlmChooser

        client = ChatClient(args.llm, args.model, temperature=args.temperature, max_tokens=args.max_new_tokens,
                            api_key=os.environ.get(args.api_key_env), token_ids=args.token_ids)
        llm = LlmChooser(client, budget_s=args.budget_ms / 1e3, decision_ticks=args.decision_ticks,
                         reasks=args.reasks)
        return llm, args.member, f"{llm.label} at {client.endpoint}, budget {args.budget_ms:g} ms"
    if args.hf:
        from brawlkit.policy_server.hf_policy import SERVE_MAX_BATCH, HfPolicy
        from brawlkit.policy_server.llm import LlmChooser

        # the endpoint's threads answer concurrent callers: their prompts share forwards
        hf = HfPolicy.load(args.hf, device=args.device, temperature=args.temperature,
                           max_new_tokens=args.max_new_tokens, max_batch=SERVE_MAX_BATCH)
        llm = LlmChooser(hf, budget_s=args.budget_ms / 1e3, decision_ticks=args.decision_ticks,
                         reasks=args.reasks)
        return llm, args.member, f"{llm.label} on {hf.device}, budget {args.budget_ms:g} ms"
    if args.text_policy:
        from brawlkit.policy_server.text_policy import TextPolicy

        pol = TextPolicy.load(args.text_policy)
        pol.decision_ticks = args.decision_ticks
        return pol, args.member, f"text policy {pol.label}"
    from brawlkit.policy_server.policy import CheckpointPolicy, find_member

    ck = CheckpointPolicy(args.checkpoint)
    return ck, args.member or find_member(args.checkpoint), \
        f"{ck.label}, input layout {ck.meta.input_layout}"


def _serve(argv: list[str]) -> int:
    ap = _serve_parser()
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        ap.error(f"--port must be in 0..65535, got {args.port}")
    if args.llm and not args.model:
        ap.error("--llm needs --model NAME (the model the server serves)")

    from brawlkit.common.threads import limit_threads

    limit_threads()
    from brawlkit.policy_server.app import create_app

    try:
        chooser, member, what = _chooser(args)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"policy serve: cannot load {args.checkpoint or args.text_policy or args.hf}: {e}", file=sys.stderr)
        return 2
    app = create_app(chooser, member=member)  # type: ignore[arg-type]
    try:
        sock = listen_tcp(args.host, args.port)  # TCP_NODELAY: see listen_tcp
    except OSError as e:
        print(f"policy serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    import uvicorn

    port = sock.getsockname()[1]
    print(f"policy serve: {what}, decides every {chooser.decision_ticks} ticks, "  # type: ignore[attr-defined]
          f"member {member or '(none)'}", file=sys.stderr)
    print(f"listening {port}", flush=True)
    config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=30,
                            server_header=False, access_log=args.log_level == "debug")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _play(argv: list[str]) -> int:
    from brawlkit.policy_server.player import main as play_main

    return play_main(argv)


def _train(argv: list[str]) -> int:
    from brawlkit.policy_server.train_run import main as train_main

    return train_main(argv)


#: sub-command -> (one-line help, runner of its own argv): the dispatch and every help
#: text that lists the sub-commands (``policy --help``, the top-level help) read this
SUBCOMMANDS: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "serve": ("serve a PPO checkpoint, a text policy or a language model as /move", _serve),
    "play": ("play matches through a /move endpoint and record them for the ratings", _play),
    "train": ("train the small text policy through the real /move endpoint", _train),
}


def build_parser() -> argparse.ArgumentParser:
    """``policy``'s own parser: its help lists :data:`SUBCOMMANDS`; each sub-command
    parses its arguments with its own parser (``policy serve --help``)."""
    ap = command_parser("policy", "The /move endpoint and its clients; docs/move.md has "
                        "the contract.", epilog="`python -m brawlkit policy SUB --help` shows "
                        "a sub-command's options.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{" + "|".join(SUBCOMMANDS) + "}")
    for name, (help_, _) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_, add_help=False)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        build_parser().print_usage(sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        build_parser().print_help()
        return 0
    if argv[0] not in SUBCOMMANDS:
        build_parser().error(f"unknown sub-command {argv[0]!r}; the sub-commands are "
                             + "|".join(SUBCOMMANDS))
    return SUBCOMMANDS[argv[0]][1](argv[1:])
