"""``python -m brawlkit league run --league-dir DIR``: the whole league at once.

Starts one ``python -m brawlkit train --role R --league-dir DIR`` child process per
role (main, main exploiter, league exploiter by default), all on one league
directory (the pool needs no locks: docs/league.md), shows one progress display
(a bar per role: generations done, its latest deterministic win rates), and on
Ctrl-C stops them cleanly: SIGINT to each child, which closes its envs and game
servers and never leaves half a record (registrations are write-once renames); a role
that fails after a finished generation is started again where it stopped
(:data:`MAX_RESTARTS`).  Every other argument after ``--`` goes to each ``train`` (e.g.
``-- --generations 10 --steps-per-generation 100000``), ``--ray`` too
(docs/distributed.md): each role's envs then run as Ray env workers — on the cluster at
``--ray ADDRESS``, which the roles share, or, with ``--ray`` alone, on a local Ray instance
of each role's own.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from brawlkit.common.cli_args import add_progress_flag, command_parser
from brawlkit.common.kernel import in_kernel
from brawlkit.league.directory import LeagueDir
from brawlkit.league.opponents import permanent_opponent
from brawlkit.league.role_specs import role_names
from brawlkit.training.config import TrainConfig
from brawlkit.training.evaluate import evaluate_shipped
from brawlkit.training.ladder import BASELINE_GAMES, ensure_ladder
from brawlkit.wire.server_process import usable_cores

_GEN = re.compile(r"^gen (\d+): steps (\d+) (.*)$")
#: a line that states why a child failed: a traceback's last line or the CLI's own error
_REASON = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b|train: )")
#: seconds a child gets to stop after SIGINT before SIGTERM, then SIGKILL
STOP_GRACE_S = 30.0
#: times a role that fails after finishing a generation is started again, from there
#: (``--resume-or-new``, the generations it has left): an hour's league must not lose a
#: role to one crash (a main exploiter's env died of a starved server 12 generations in;
#: the others trained on without it).  One that fails before its first generation (a bad
#: flag, no credentials) fails at once: starting it again would fail the same way.
MAX_RESTARTS = 3


def postfix(rest: str) -> str:
    """A generation line's tail (``win rate deterministic/sampled cpu_1=1.00/0.90 ...
    max_level=3``) made short without losing a number: the bar's postfix.  Cutting the
    text to its last 60 characters left ``stic/sampled`` and dropped the first level."""
    pairs = re.findall(r"(\S+)=(\S+)", rest)
    if not pairs:
        return rest.strip()
    rates = " ".join(f"{k.replace('cpu_', 'L')} {v}" for k, v in pairs if k != "max_level")
    lvl = dict(pairs).get("max_level")
    return f"win det/sampled {rates}" + (f" | max level {lvl}" if lvl else "")


class _Lines:
    """The progress display where output is not a terminal (CI, Colab's ``!`` cells, a
    log file): one plain line per finished generation, never a carriage return or a
    cursor movement (which turn three bars into one garbled line there)."""

    def __init__(self, roles: list[str], gens: int | None, stream: TextIO) -> None:
        self.stream, self.gens = stream, gens
        self._lock = threading.Lock()  # one reader thread per role
        total = f"{gens} generation(s) each" if gens else "until their time budget"
        print(f"league: training {', '.join(roles)} ({total})", file=stream, flush=True)

    def update(self, role: str, gen: int, rest: str) -> None:
        of = f"/{self.gens}" if self.gens else ""
        with self._lock:
            print(f"league: {role} gen {gen + 1}{of} done: {postfix(rest)}", file=self.stream,
                  flush=True)

    def close(self) -> None:
        pass


class _Bars:
    """A terminal (or a notebook): one tqdm bar per role, the latest rates as postfix."""

    def __init__(self, roles: list[str], gens: int | None, stream: TextIO) -> None:
        from tqdm.auto import tqdm

        self.bars = {role: tqdm(total=gens, desc=f"{role:<16}", unit="gen", position=i,
                                leave=True, file=stream) for i, role in enumerate(roles)}

    def update(self, role: str, gen: int, rest: str) -> None:
        bar = self.bars[role]
        bar.update(1)
        bar.set_postfix_str(postfix(rest))

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def progress_display(roles: list[str], gens: int | None,
                     stream: TextIO | None = None) -> _Lines | _Bars:
    """Bars on a terminal or in a notebook kernel, plain lines anywhere else."""
    stream = stream or sys.stderr
    live = in_kernel() or (hasattr(stream, "isatty") and stream.isatty())
    return (_Bars if live else _Lines)(roles, gens, stream)


def last_error(lines: list[str]) -> str:
    """What a failed child said last: the reason — a traceback's exception line, ``train:
    error: ...``, ``train: no registry credentials ...`` — else the last non-empty line of
    its log that is not a generation line, cut to 300 characters.  The exception line is
    looked for first because a message may go on after it (EnvError's "the game server
    died" is followed by the server's log tail)."""
    texts = [t for t in (line.strip().replace("\r", " ") for line in lines)
             if t and not _GEN.match(t)]
    said = next((t for t in reversed(texts) if _REASON.match(t)), texts[-1] if texts else "")
    return said if len(said) <= 300 else said[:297] + "..."


def _read(proc: subprocess.Popen[str], role: str, status: dict[str, str], log: Path,
          display: _Lines | _Bars | None, tail: dict[str, list[str]] | None = None,
          finished: dict[str, int] | None = None) -> None:
    """Copy a child's stderr to its log, keep its last lines (``tail``), and on each
    generation line update ``status``, the display and ``finished`` (generations this
    child finished)."""
    assert proc.stderr is not None
    kept = tail.setdefault(role, []) if tail is not None else []
    with open(log, "a", encoding="utf-8") as f:
        for line in proc.stderr:
            f.write(line)
            f.flush()
            kept.append(line)
            del kept[:-50]
            m = _GEN.match(line.strip())
            if m:
                status[role] = f"gen {m.group(1)}: {m.group(3)}"
                if finished is not None:
                    finished[role] = finished.get(role, 0) + 1
                if display is not None:
                    display.update(role, int(m.group(1)), m.group(3))


def run(league_dir: str, roles: list[str], train_args: list[str], runs_root: str,
        progress: bool = True, ladder_baseline_games: int = BASELINE_GAMES,
        role_args: dict[str, list[str]] | None = None) -> int:
    """Record the fixed ladder if the league lacks it (:func:`ensure_ladder`: once per
    league, before any role, so three roles never play it three times), then run
    ``roles`` concurrently; returns the worst child exit code (0 = all ended well).
    ``role_args``: flags for one role only, after ``train_args`` (so they win), e.g. the
    generations a resumed role has left.  A role that fails after a finished generation
    is started again for the generations it has left (:func:`_restart_args`)."""
    Path(league_dir).mkdir(parents=True, exist_ok=True)
    try:
        ensure_ladder(LeagueDir(league_dir), baseline_games=ladder_baseline_games,
                      say=lambda s: print(f"league: {s}", file=sys.stderr))
    except KeyboardInterrupt:  # nothing of it written: the next run plays it
        print("\nleague: stopped while the ladder played", file=sys.stderr)
        return 130
    logs = Path(league_dir) / "logs"
    logs.mkdir(exist_ok=True)
    env = dict(os.environ)
    if len(roles) >= usable_cores():
        # several trainers share the cores: no game server may busy-poll one
        env.setdefault("BRAWLKIT_SERVER_SPIN_US", "0")
    note = _ray_note(train_args, roles)
    if note:
        print(note, file=sys.stderr)
    # a time budget ends the roles first: count generations without a total then
    budget = any(a == "--time-budget" or a.startswith("--time-budget=") for a in train_args)
    gens = None if budget or role_args else _generations(train_args)
    display = progress_display(roles, gens) if progress else None
    procs: dict[str, subprocess.Popen[str]] = {}
    readers: dict[str, threading.Thread] = {}
    status: dict[str, str] = {}
    tails: dict[str, list[str]] = {}
    finished: dict[str, int] = {}  # generations the role's current child finished
    wanted: dict[str, int | None] = {}  # generations the role's current child was asked for
    restarts: dict[str, int] = {}
    base = {role: [sys.executable, "-m", "brawlkit", "train", "--role", role, "--league-dir",
                   league_dir, "--runs-root", runs_root, "--no-progress", *train_args,
                   *(role_args or {}).get(role, [])] for role in roles}

    def start(role: str, extra: list[str]) -> None:
        cmd = base[role] + extra
        wanted[role] = None if budget else _generations(cmd)
        finished[role] = 0
        procs[role] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, env=env)
        readers[role] = threading.Thread(
            target=_read, args=(procs[role], role, status, logs / f"{role}.log", display,
                                tails, finished), daemon=True)
        readers[role].start()

    try:
        for role in roles:
            start(role, [])
        settled: set[str] = set()  # roles whose last child ended and stays ended
        while len(settled) < len(procs):
            time.sleep(0.5)
            for role, p in list(procs.items()):
                if role in settled or p.poll() is None:
                    continue
                again = None if p.returncode == 0 else _restart_args(
                    role, p.returncode, base[role], readers[role], finished, wanted,
                    restarts, tails)
                if again is None:
                    settled.add(role)
                else:
                    start(role, again)
    except KeyboardInterrupt:
        print("\nleague: stopping the roles (SIGINT) ...", file=sys.stderr)
        _stop(procs)
    finally:
        for t in readers.values():
            t.join(timeout=5)
        if display is not None:
            display.close()
    codes = {role: p.returncode for role, p in procs.items()}
    for role, code in codes.items():
        done = status.get(role, "no generation finished")
        why = last_error(tails.get(role, [])) if code else ""
        print(f"{role}: exit {code}; last: {done}" + (f"; error: {why}" if why else "")
              + f" (log {logs / (role + '.log')})", file=sys.stderr)
    return max((c for c in codes.values() if c is not None), default=0)


def _restart_args(role: str, code: int, cmd: list[str], reader: threading.Thread,
                  finished: dict[str, int], wanted: dict[str, int | None],
                  restarts: dict[str, int], tails: dict[str, list[str]]) -> list[str] | None:
    """The flags that start a failed role again after its last finished generation, or
    None to leave it failed (:data:`MAX_RESTARTS`): only an error exit (a signal, e.g.
    Ctrl-C's SIGINT or a kill, is a stop), not before it finished a generation (it would
    fail the same way), not after its last, not with a time budget (what is left of it is
    the child's to know), not more than MAX_RESTARTS times.  Says so on stderr."""
    reader.join(timeout=5)  # its last lines (the generation count, the error) are read
    done, asked, n = finished.get(role, 0), wanted.get(role), restarts.get(role, 0)
    if code <= 0 or done == 0 or asked is None or asked - done <= 0 or n >= MAX_RESTARTS:
        return None
    restarts[role] = n + 1
    why = last_error(tails.get(role, []))
    print(f"league: {role} failed (exit {code}{'; error: ' + why if why else ''}) after "
          f"{done} generation(s) of {asked}: starting it again for the {asked - done} left "
          f"(restart {n + 1} of {MAX_RESTARTS})", file=sys.stderr)
    resume = [] if "--resume" in cmd or "--resume-or-new" in cmd else ["--resume-or-new"]
    return [*resume, "--generations", str(asked - done)]


def _stop(procs: dict[str, subprocess.Popen[str]]) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _ray_note(train_args: list[str], roles: list[str]) -> str | None:
    """With ``--ray`` and no cluster address every role starts a Ray instance of its own:
    say how to share one instead (the run still works as asked)."""
    for i, a in enumerate(train_args):
        if a == "--ray" or a.startswith("--ray="):
            value = a.split("=", 1)[1] if "=" in a else (
                train_args[i + 1] if i + 1 < len(train_args)
                and not train_args[i + 1].startswith("-") else "local")
            if value.strip().lower() in ("", "local") and len(roles) > 1:
                return (f"league: --ray without an address: each of the {len(roles)} roles starts "
                        "a local Ray instance of its own; to share one, run `ray start --head "
                        "--num-cpus N` first and pass `-- --ray auto` (docs/distributed.md)")
    return None


def _generations(train_args: list[str]) -> int | None:
    """The generations ``train_args`` ask for: the last ``--generations`` (argparse's
    rule: a later flag wins), else TrainConfig's default."""
    found = None
    for i, a in enumerate(train_args):
        if a == "--generations" and i + 1 < len(train_args):
            found = int(train_args[i + 1])
        elif a.startswith("--generations="):
            found = int(a.split("=", 1)[1])
    return found if found is not None else TrainConfig().generations


def report(league_dir: str, vs: list[str], matches: int, target: float,
           progress: bool = True) -> str:
    """Judge Main's newest generation as it ships (the deterministic policy, fresh match
    seeds, 95 % Wilson intervals); one line per opponent, the last one the verdict on
    ``vs[0]`` against ``target`` — what ``make train`` ends with."""
    pool = LeagueDir(league_dir, create=False)
    mains = [m for m in pool.members() if m.role == "main"]
    ckpt = pool.checkpoint_path(mains[-1]) if mains else None
    if ckpt is None:
        raise FileNotFoundError(f"no generation of main with a checkpoint in {league_dir}")
    ev = evaluate_shipped(ckpt, tuple(vs), matches, progress=progress)
    lines = []
    for opp, r in ev.items():
        lo, hi = r["win_ci"]
        lines.append(f"  {mains[-1].id} vs {opp}: won {r['wins']} of {r['episodes']} fresh "
                     f"matches ({r['win_rate']:.2f}, 95 % {lo:.2f}-{hi:.2f})")
    head = ev[vs[0]]
    verdict = "meets" if head["win_rate"] >= target else "does NOT meet"
    lines.append(f"league: main (generation {mains[-1].generation}) beats {vs[0]} in "
                 f"{head['win_rate']:.2f} of {matches} fresh matches with its deterministic "
                 f"policy: {verdict} the {target:.2f} aim")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """``league``'s parser: ``run``, ``report`` and ``harden`` (whose own parser is
    :func:`brawlkit.training.harden.main`'s)."""
    ap = command_parser("league", __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train every role concurrently on one league directory",
                       usage="python -m brawlkit league run --league-dir DIR [--roles R,...] "
                       "[--runs-root DIR] [--no-progress] [-- TRAIN FLAGS...]")
    r.add_argument("--league-dir", required=True)
    r.add_argument("--roles", default=",".join(role_names()),
                   help=f"comma list of roles (default {','.join(role_names())})")
    r.add_argument("--runs-root", default="runs", help="where each role's run directory goes")
    r.add_argument("--ladder-baseline-games", type=int, default=BASELINE_GAMES,
                   help="the fixed ladder, played once per league before the roles: the "
                   f"baseline's games against each CPU level (default {BASELINE_GAMES}; 0: the "
                   "CPU pairs only, in C, a few seconds)")
    add_progress_flag(r)
    rp = sub.add_parser("report", help="judge Main's newest generation on fresh matches")
    rp.add_argument("--league-dir", required=True)
    rp.add_argument("--vs", default="cpu:3", help="comma list of opponents; the first one's "
                    "win rate is the verdict (default cpu:3)")
    rp.add_argument("--matches", type=int, default=50, help="fresh matches each (default 50)")
    rp.add_argument("--target", type=float, default=0.8, help="the verdict's aim (default 0.8)")
    add_progress_flag(rp)
    sub.add_parser("harden", add_help=False,
                   help="best-response rounds after a league: exploiters of Main's newest "
                   "checkpoint join the pool frozen, Main trains on against them")
    return ap


def _subparser(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)
                ).choices[name]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["harden"]:  # its own flags and parser
        from brawlkit.training.harden import main as harden_main

        return harden_main(argv[1:])
    train_args: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, train_args = argv[:k], argv[k + 1:]
    ap = build_parser()
    args, extra = ap.parse_known_args(argv)
    sub = _subparser(ap, args.cmd)
    if extra:
        from brawlkit.training.cli import build_parser as train_parser

        hint = ""
        if args.cmd == "run" and not train_parser().parse_known_args(extra)[1]:
            hint = ("; they are `train`'s flags, which go after `--`: python -m brawlkit league "
                    f"run --league-dir {shlex.quote(args.league_dir)} -- {shlex.join(extra)}")
        sub.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    if args.cmd == "report":
        if train_args:
            sub.error(f"`league report` passes nothing to `train`: drop `-- {' '.join(train_args)}`")
        vs = [x.strip() for x in args.vs.split(",") if x.strip()]
        try:  # refused here, not after Main's checkpoint loads
            vs = [permanent_opponent(x) for x in vs] or [permanent_opponent(args.vs)]
        except ValueError as e:
            sub.error(f"--vs (comma-separated opponents): {e}")
        if args.matches < 1:
            sub.error(f"--matches must be >= 1, got {args.matches}")
        try:
            print(report(args.league_dir, vs, args.matches, args.target,
                         progress=not args.no_progress))
        except (FileNotFoundError, ValueError) as e:
            print(f"league report: {e}", file=sys.stderr)
            return 2
        return 0
    roles = [x.strip() for x in args.roles.split(",") if x.strip()]
    bad = [x for x in roles if x not in role_names()]
    if bad or not roles:
        sub.error(f"unknown role(s) {bad}; roles are {', '.join(role_names())}")
    if args.ladder_baseline_games < 0:
        sub.error("--ladder-baseline-games must be >= 0")
    # each role's `train` would refuse a bad flag after starting: refuse it once, now
    from brawlkit.training.cli import parse as parse_train

    parse_train(["--role", roles[0], "--league-dir", args.league_dir, "--runs-root",
                 args.runs_root, *train_args])
    return run(args.league_dir, roles, train_args, args.runs_root, progress=not args.no_progress,
               ladder_baseline_games=args.ladder_baseline_games)
