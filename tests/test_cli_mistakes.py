"""A new user's command-line mistakes (issue 30), run as a user runs them: each a real
``python -m brawlkit ...`` subprocess that must end with exit 2 and ONE line on stderr
naming the fix — no traceback, nothing on stdout — checked before any model loads or
server starts: the process never imports torch (a ``sitecustomize`` beside the test
records what it imported), and spends under 3 s of CPU (the guard of issue 30: loading a
model and starting servers took 15-33 s before).  CPU time, not the wall clock: on the
shared 2-core machine at load 15 a 0.3 s command took 3.2 s of wall time.

And the help texts: ``bench --help`` exits 0, every sub-command a parser has is listed
by the help that names its command, and docs/cli.md names every command the help shows.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT
from helpers import run_cli as brawlkit

#: the guard against a model load or a server start, in CPU seconds (module docstring)
WITHIN_S = 3.0


def _meta_ok_zip(path: Path) -> Path:
    """A zip whose ``data`` entry reads as a brawlkit checkpoint's (what every check
    before the model load sees): only a later check can refuse it."""
    entry = {"brawlkit": {"action_repeat": 4, "input_layout": 2, "reward": "tiered"}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data", json.dumps({"policy_class": {}, **entry, "pad": "x" * 4000}))
    return path


def _corrupt_zip(path: Path) -> Path:
    """A checkpoint-shaped zip whose compressed ``data`` was damaged (a bad copy)."""
    raw = bytearray(_meta_ok_zip(path).read_bytes())
    for i in range(60, 90):  # inside the deflated entry, past its local header
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))
    return path


def _bpw(path: Path, action_repeat: int = 4) -> Path:
    """A real .bpw blob (an exported actor), the file users confuse with a checkpoint."""
    from brawlkit.export.bpw import ACT_NONE, ACT_TANH, Layer, PolicyMeta, pack_bpw

    rng = np.random.default_rng(0)
    layers = [Layer(rng.standard_normal((8, 79)).astype(np.float32), np.zeros(8, np.float32),
                    ACT_TANH),
              Layer(rng.standard_normal((6, 8)).astype(np.float32), np.zeros(6, np.float32),
                    ACT_NONE)]
    path.write_bytes(pack_bpw(layers, PolicyMeta(action_repeat, 2, "tiered")))
    return path


def _damaged(path: Path) -> Path:
    """``path`` cut short mid-layer: a blob copied half-way."""
    path.write_bytes(path.read_bytes()[:200])
    return path


def _run_dir(tmp: Path) -> Path:
    """``runs/main``: a role's runs, not a league (the mix-up of issue 30)."""
    run = tmp / "runs" / "main" / "20260101-000000-s0"
    run.mkdir(parents=True)
    (run / "gen_0000.json").write_text("{}")
    return tmp / "runs" / "main"


Args = Callable[[Path], list[str]]

#: (name, argv for tmp_path, what the one line must say)
MISTAKES: list[tuple[str, Args, str]] = [
    ("eval a non-zip", lambda t: ["eval", "--checkpoint", _junk(t)],
     "is not a zip, so not an SB3 checkpoint"),
    ("eval a corrupt zip", lambda t: ["eval", "--checkpoint", str(_corrupt_zip(t / "c.zip"))],
     "is not a readable SB3 checkpoint"),
    ("eval a zip that is no checkpoint",
     lambda t: ["eval", "--checkpoint", str(_plain_zip(t))], "is not a readable SB3 checkpoint"),
    ("eval a .bpw", lambda t: ["eval", "--checkpoint", str(_bpw(t / "gen_0003.bpw"))],
     "is a .bpw blob"),
    ("eval a missing file", lambda t: ["eval", "--checkpoint", str(t / "nope.zip")],
     "nope.zip not found"),
    ("eval --vs cpu:9", lambda t: ["eval", "--checkpoint", str(_meta_ok_zip(t / "ok.zip")),
                                   "--vs", "cpu:9"], "'cpu:9' is no permanent member: give baseline or cpu:L with L in 1..8"),
    ("eval --vs a missing .bpw", lambda t: ["eval", "--checkpoint",
                                            str(_meta_ok_zip(t / "ok.zip")), "--vs",
                                            str(t / "gone.bpw")], "gone.bpw not found"),
    ("eval --vs a .bpw at another cadence", lambda t: [
        "eval", "--checkpoint", str(_meta_ok_zip(t / "ok.zip")), "--vs",
        str(_bpw(t / "r2.bpw", action_repeat=2))], "trained at action repeat 2"),
    ("eval --vs a corrupt .bpw", lambda t: [
        "eval", "--checkpoint", str(_meta_ok_zip(t / "ok.zip")), "--vs",
        str(_damaged(_bpw(t / "bad.bpw")))], "bad.bpw"),
    ("eval --episodes 0", lambda t: ["eval", "--checkpoint", str(_meta_ok_zip(t / "ok.zip")),
                                     "--episodes", "0"], "--episodes must be >= 1"),
    ("export a .bpw", lambda t: ["export", str(_bpw(t / "a.bpw")), "-o", str(t / "b.bpw")],
     "is a .bpw blob"),
    ("train --init-from a .bpw", lambda t: ["train", "--init-from", str(_bpw(t / "a.bpw")),
                                            "--run-dir", str(t / "run")], "is a .bpw blob"),
    ("train --kl-coef without --init-from", lambda t: ["train", "--kl-coef", "0.1"],
     "kl_coef > 0 needs init_from"),
    ("elo on a run directory", lambda t: ["elo", "--league-dir", str(_run_dir(t))],
     "is not a league directory"),
    ("elo on a missing directory", lambda t: ["elo", "--league-dir", str(t / "nope")],
     "no league directory at"),
    ("league report on a run directory",
     lambda t: ["league", "report", "--league-dir", str(_run_dir(t))], "is not a league directory"),
    ("league report --vs cpu:9", lambda t: ["league", "report", "--league-dir", str(t / "D"),
                                            "--vs", "cpu:3,cpu:9"], "'cpu:9' is no permanent member"),
    ("botpool on a run directory", lambda t: ["botpool", "--league-dir", str(_run_dir(t))],
     "is not a league directory"),
    ("league run with train's flags before --",
     lambda t: ["league", "run", "--league-dir", str(t / "D"), "--generations", "1"],
     "go after `--`: python -m brawlkit league run --league-dir"),
    ("league run with a mistyped train flag",
     lambda t: ["league", "run", "--league-dir", str(t / "D"), "--", "--generatons", "1"],
     "unrecognized arguments: --generatons 1"),
    ("league run with a bad train value",
     lambda t: ["league", "run", "--league-dir", str(t / "D"), "--", "--generations", "x"],
     "invalid int value: 'x'"),
    ("league run --roles boss", lambda t: ["league", "run", "--league-dir", str(t / "D"),
                                           "--roles", "boss"], "unknown role(s) ['boss']"),
    ("a mistyped command", lambda t: ["polcy"], "did you mean 'policy'?"),
    ("a mistyped benchmark", lambda t: ["bench", "gpu"], "the benchmarks are env|learn"),
    ("a mistyped policy sub-command", lambda t: ["policy", "srve"],
     "the sub-commands are serve|play|train"),
    ("imitate --hidden 0", lambda t: ["imitate", "--hidden", "0"], "hidden"),
]


def _junk(tmp: Path) -> str:
    (tmp / "junk.zip").write_bytes(b"these bytes are not a zip file")
    return str(tmp / "junk.zip")


def _plain_zip(tmp: Path) -> Path:
    with zipfile.ZipFile(tmp / "notes.zip", "w") as zf:
        zf.writestr("notes.txt", "hello")
    return tmp / "notes.zip"


#: imported by every Python process started with the directory on PYTHONPATH: at exit it
#: writes which of the model libraries the process imported
SITECUSTOMIZE = """
import atexit, os, sys

def _record():
    with open(os.environ["BRAWLKIT_TEST_IMPORTS"], "w") as f:
        f.write(" ".join(m for m in ("torch", "stable_baselines3") if m in sys.modules))

atexit.register(_record)
"""


@pytest.mark.parametrize(("argv", "says"), [pytest.param(a, s, id=n) for n, a, s in MISTAKES])
def test_a_mistake_is_one_line_naming_the_fix(argv: Args, says: str, tmp_path: Path) -> None:
    args = argv(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "BRAWLKIT_TEST_IMPORTS": str(tmp_path / "imports"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(hook), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "brawlkit", *args], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    assert says in lines[0], lines[0]
    assert r.stdout == "", r.stdout
    assert (tmp_path / "imports").read_text() == "", f"{args}: a model library was imported"
    assert cpu_s < WITHIN_S, f"{args}: {cpu_s:.1f} s of CPU: a model load or a server start"
    assert not (tmp_path / "D").exists(), "a refused league run made its directory"
    assert not (tmp_path / "run").exists(), "a refused train made its run directory"


# ----------------------------------------------------------------- the help texts
def test_bench_help_exits_0_and_lists_every_benchmark() -> None:
    from brawlkit.cli import BENCHES

    r = brawlkit("bench", "--help")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for name, (_, help_) in BENCHES.items():
        assert re.search(rf"^  {name}\s+{re.escape(help_)}$", r.stdout, re.M), name


def test_help_lists_every_sub_command_from_the_parsers() -> None:
    """The top-level help lists each command's sub-commands as its parser has them
    (``registry`` once listed "serve, add-agent" only), and ``policy --help`` lists
    ``train`` (its usage once said ``{serve|play}``)."""
    from brawlkit.cli import COMMANDS, subcommands

    top = brawlkit("--help").stdout
    with_subs = {c: subcommands(c) for c in [*COMMANDS, "bench"]}
    assert {"registry", "policy", "league", "bench"} <= {c for c, s in with_subs.items() if s}
    assert {"add-player", "push", "pull", "ratings"} <= set(with_subs["registry"])
    assert with_subs["league"] == ["run", "report", "harden"]
    for c, subs in with_subs.items():
        if subs:
            assert f"sub-commands: {', '.join(subs)}" in top, c
    r = brawlkit("policy", "--help")
    assert r.returncode == 0 and "{serve|play|train}" in r.stdout
    for sub in ("serve", "play", "train"):
        assert re.search(rf"^    {sub}\s", r.stdout, re.M), sub


def _help_commands() -> list[str]:
    """Every command ``python -m brawlkit --help`` shows, with each sub-command."""
    out = brawlkit("--help").stdout
    cmds: list[str] = []
    for line in out.split("commands:\n", 1)[1].splitlines():
        m = re.match(r"^  (\w[\w-]*)\s", line)
        if m:
            cmds.append(m.group(1))
        elif line.strip().startswith("sub-commands:"):
            cmds += [f"{cmds[-1].split()[0]} {s}" for s in
                     line.split(":", 1)[1].replace(" ", "").split(",")]
    return cmds


def test_docs_cli_names_every_command_the_help_shows() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    cmds = _help_commands()
    assert "league report" in cmds and "bench learn" in cmds and "registry add-agent" in cmds
    missing = [c for c in cmds if f"python -m brawlkit {c}" not in doc]
    assert not missing, f"docs/cli.md lacks `python -m brawlkit ...` for {missing}"


def test_docs_architecture_names_every_module() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    pkg = ROOT / "brawlkit"
    missing = [str(p.relative_to(pkg)) for p in sorted(pkg.rglob("*.py"))
               if p.name != "__init__.py" and p.name not in doc]
    assert not missing, f"docs/architecture.md names no {missing}"


def test_readme_says_how_commands_are_run() -> None:
    """Its literal ``python -m brawlkit`` and ``papermill`` lines need the virtualenv: the
    README says how to get it before the first code block a reader would copy them from."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.finditer(r"^```\n(.*?)^```", readme, re.M | re.S)
    first = next(m for m in blocks if re.search(r"python -m brawlkit|^papermill", m.group(1), re.M))
    before = readme[:first.end()]
    for how in (". .venv/bin/activate", ".venv/bin/python -m brawlkit", ".venv/bin/papermill"):
        assert how in before, how
