"""brawlkit on a Colab runtime (or any Linux box): paste this whole file into ONE
Colab cell and run it, or run ``python colab_bootstrap.py``.

Two modes, chosen by ``REGISTRY_URL``:

* **local only** (``REGISTRY_URL`` empty, the default): no registry, no secrets — a
  league in this runtime's own directory (``WORKDIR/runs/league``), what a person who
  just wants to try brawlkit runs;
* **shared** (``REGISTRY_URL`` set): joins the league every location shares in the
  checkpoint registry (docs/registry.md). It needs the registry's URL and an agent's
  ``BRAWLKIT_AGENT_ID`` / ``BRAWLKIT_AGENT_SECRET`` with write scope — from the
  environment or from Colab's secrets (the key icon on the left; grant this notebook
  access), never from this file.

Either way it:

1. clones the repository (or updates the clone from an earlier run);
2. installs it into this Python (``pip install -e WORKDIR[move,EXTRAS]``: the dependencies
   ``pyproject.toml`` declares) and builds the native code (``make -C native``; as root
   the Debian packages it needs are installed first);
3. builds the clone of CPU 8 every role starts from when it is absent (``imitate
   --ensure``, as ``make train`` does; 1.5–3 minutes on 2 cores), then
   trains the roles concurrently for the time budget, each continuing its newest
   checkpoint — this runtime's own or, in shared mode on a fresh runtime, the
   registry's — instead of starting again from generation zero (shared mode pushes
   every generation and its matches back);
4. stops cleanly on the budget or on Colab's stop button (Ctrl-C here): the roles
   finish (and, shared, whatever the registry has not received yet is pushed).

The notebooks' first cell calls :func:`ensure` from this file: steps 1–2 only, and
nothing at all where brawlkit is already importable.

Settings are the constants just below; each can also be set by the environment
variable named beside it (that is how the tests run this file).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

# ------------------------------------------------------------------ settings
#: the git URL of the brawlkit repository to train from (your fork or your team's)
REPO_URL = os.environ.get("BRAWLKIT_REPO_URL", "https://github.com/brawlkit/brawlkit.git")
BRANCH = os.environ.get("BRAWLKIT_BRANCH", "main")
#: the registry every location shares, e.g. "https://registry.example.org"; empty: the
#: local-only mode (a league in WORKDIR/runs/league, no registry, no secrets)
REGISTRY_URL = os.environ.get("BRAWLKIT_REGISTRY_URL", "")
#: the roles this runtime trains, concurrently
ROLES = os.environ.get("BRAWLKIT_ROLES", "main,main_exploiter,league_exploiter").split(",")
#: wall-clock minutes of training (a free Colab runtime lives for a few hours)
TIME_BUDGET_MIN = float(os.environ.get("BRAWLKIT_TIME_BUDGET_MIN", "60"))
#: where the clone lives (its runs/ holds this runtime's runs and league directory)
WORKDIR = os.environ.get("BRAWLKIT_WORKDIR", "/content/brawlkit" if Path("/content").is_dir()
                         else str(Path.home() / "brawlkit"))
#: training settings passed to every role (python -m brawlkit train --help); empty: the
#: quick-start sizes (brawlkit.training.config.QUICK_START: the fast trainer's 64 arenas,
#: generations of 1,000,000 env steps, about a minute each on 2 cores, a KL term toward
#: the clone)
TRAIN_ARGS = os.environ.get("BRAWLKIT_TRAIN_ARGS", "")
#: every role's new lineage starts from the clone of CPU 8 in WORKDIR/runs/imitate (built
#: there when absent, as `make train` does: `python -m brawlkit imitate --ensure`); these
#: are imitate flags over the shipped clone's settings (its network must match TRAIN_ARGS':
#: e.g. "--action-repeat 8" beside a TRAIN_ARGS with --action-repeat 8)
CLONE_ARGS = os.environ.get("BRAWLKIT_CLONE_ARGS", "")
#: this runtime's name in the registry (default: the host name)
LOCATION = os.environ.get("BRAWLKIT_LOCATION", "")
#: more optional parts pip installs beside the core (pyproject.toml's extras:
#: registry, client, ray, lab, dev); ``move`` is always installed (the /move notebook
#: trains through a served endpoint)
EXTRAS = os.environ.get("BRAWLKIT_EXTRAS", "")
ALWAYS_EXTRAS = "move"


# ------------------------------------------------------------------ the steps
def say(msg: str) -> None:
    print(f"[brawlkit {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], cwd: str | None = None) -> None:
    """Run a command, its output shown as it comes; stop with its exit code on failure."""
    say("$ " + " ".join(shlex.quote(c) for c in cmd))
    r = subprocess.run(cmd, cwd=cwd)
    if r.returncode != 0:
        raise SystemExit(f"colab_bootstrap: `{' '.join(cmd[:3])} ...` failed (exit "
                         f"{r.returncode}); see its output above")


def credentials() -> None:
    """Put the agent's id and secret into this process's environment (the trainers
    inherit it) from the environment or Colab's secrets; fail naming what is missing."""
    for name in ("BRAWLKIT_AGENT_ID", "BRAWLKIT_AGENT_SECRET"):
        if os.environ.get(name):
            continue
        try:
            from google.colab import userdata  # type: ignore[import-not-found]

            os.environ[name] = userdata.get(name)
        except Exception:  # noqa: BLE001 - not on Colab, or the secret is not granted
            pass
        if not os.environ.get(name):
            raise SystemExit(f"colab_bootstrap: {name} is not set: add it to Colab's secrets "
                             "(key icon) or the environment; `python -m brawlkit registry "
                             "add-agent NAME --scope write` on the registry's host prints one")


def checkout(workdir: str | None = None) -> Path:
    """Clone the repository, or bring an earlier clone up to date (fast-forward only:
    local changes are never thrown away)."""
    work = Path(workdir or WORKDIR)
    if (work / ".git").is_dir():
        sh(["git", "-C", str(work), "fetch", "--quiet", "origin", BRANCH])
        sh(["git", "-C", str(work), "checkout", "--quiet", BRANCH])
        sh(["git", "-C", str(work), "merge", "--ff-only", "--quiet", f"origin/{BRANCH}"])
    else:
        work.parent.mkdir(parents=True, exist_ok=True)
        sh(["git", "clone", "--quiet", "--branch", BRANCH, REPO_URL, str(work)])
    return work


def install(work: Path) -> None:
    """Install the clone into this Python and build its native code.

    Editable (``-e``): the package then finds its checkout (``repo_root()``: the
    native build, ``runs/``) from wherever a notebook's kernel was started. Into
    ``sys.executable``, not a venv: on Colab the kernel's Python is the one a notebook
    imports from. ``PIP_*`` variables (an index, ``PIP_FIND_LINKS``) pass through."""
    if os.geteuid() == 0:  # Colab runs as root: Debian's liblz4-dev for the native build
        sh(["make", "-s", "sysdeps"], cwd=str(work))
    if EXTRAS or not _installed_from(work):  # a rerun in the same runtime skips pip
        spec = f"{work}[{','.join(x for x in (ALWAYS_EXTRAS, EXTRAS) if x)}]"
        sh([sys.executable, "-m", "pip", "install", "-q", "-e", spec])
    sh(["make", "-C", "native", f"PYTHON={sys.executable}"], cwd=str(work))
    if str(work) not in sys.path:  # a running kernel does not reread site-packages' .pth
        sys.path.insert(0, str(work))
    import importlib

    importlib.invalidate_caches()


def _installed_from(work: Path) -> bool:
    """Whether this Python has brawlkit installed (pip's record, not a path that happens
    to hold it) as an editable install of ``work``. A changed pyproject.toml between
    runs is not noticed: set EXTRAS (or pip install -e again) after such an update."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("brawlkit")
    except (ImportError, PackageNotFoundError):
        return False
    import json

    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    except ValueError:
        return False
    return bool(url) and url == Path(work).resolve().as_uri()


def ensure(workdir: str | None = None) -> Path | None:
    """What a notebook's first cell runs: where brawlkit is not importable, clone (or
    update) the repository, install it and build it, so the next cell's imports work;
    where it is importable (``make lab``, a checkout's .venv), nothing. Returns the
    clone, or None when nothing was done."""
    import importlib.util

    if importlib.util.find_spec("brawlkit") is not None:
        return None
    work = checkout(workdir)
    install(work)
    say(f"brawlkit installed from {work}; continuing")
    return work


def train(work: Path) -> int:
    """The roles for the budget — against the registry in shared mode, in the runtime's
    own league directory in local-only mode; Ctrl-C stops them cleanly."""
    py = sys.executable
    league, runs = str(work / "runs" / "league"), str(work / "runs")
    shared = bool(REGISTRY_URL)
    location = ["--location", LOCATION] if LOCATION else []
    registry = ["--registry", REGISTRY_URL, *location] if shared else []
    if shared:
        sh([py, "-m", "brawlkit", "registry", "list", "--url", REGISTRY_URL])  # token works
    clone = work / "runs" / "imitate"
    sh([py, "-m", "brawlkit", "imitate", "--ensure", "--run-dir", str(clone), "--no-progress",
        *shlex.split(CLONE_ARGS)], cwd=str(work))
    if TRAIN_ARGS:
        train_args = shlex.split(TRAIN_ARGS)
    else:
        from brawlkit.training.config import quick_start_flags

        train_args = quick_start_flags()
    cmd = [py, "-m", "brawlkit", "league", "run", "--league-dir", league, "--runs-root", runs,
           "--roles", ",".join(ROLES), "--", *registry, "--resume-or-new",
           "--init-from", str(clone / "gen_0000.zip"), *train_args,
           "--time-budget", str(TIME_BUDGET_MIN), "--generations", "100000"]
    say(f"training {', '.join(ROLES)} for {TIME_BUDGET_MIN:g} min "
        + (f"in the shared league at {REGISTRY_URL}" if shared else
           f"in a local league ({league}; no registry)")
        + "; stop with Colab's stop button (Ctrl-C)")
    say("$ " + " ".join(shlex.quote(c) for c in cmd))
    proc = subprocess.Popen(cmd, cwd=str(work))
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # Colab's stop button interrupts this process only
        say("stopping the roles ...")
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
    if shared:
        say("pushing anything the registry has not received yet")
        sh([py, "-m", "brawlkit", "registry", "push", "--url", REGISTRY_URL, "--league-dir",
            league, *location])
        sh([py, "-m", "brawlkit", "registry", "ratings", "--url", REGISTRY_URL])
    else:
        sh([py, "-m", "brawlkit", "elo", "--league-dir", league])
    return code


def main() -> int:
    if REGISTRY_URL:
        credentials()
    else:
        say("local-only mode: a league in this runtime's directory, no registry. For the "
            "shared league set REGISTRY_URL (BRAWLKIT_REGISTRY_URL) and add "
            "BRAWLKIT_AGENT_ID / BRAWLKIT_AGENT_SECRET (write scope) to Colab's secrets")
    work = checkout()
    install(work)
    return train(work)


if __name__ == "__main__":
    code = main()
    if "ipykernel" not in sys.modules:  # a Colab cell must not exit its kernel
        sys.exit(code)
    say(f"done (exit {code})")
