"""brawlkit on a Colab runtime (or any Linux box): paste this whole file into ONE
Colab cell and run it, or run ``python colab_bootstrap.py``.

It joins the shared league in the checkpoint registry (docs/registry.md):

1. clones the repository (or updates the clone from an earlier run);
2. installs and builds it (``make build``: Debian packages, the .venv, the native
   binaries);
3. authenticates against the registry with BRAWLKIT_AGENT_ID / BRAWLKIT_AGENT_SECRET
   — from the environment or from Colab's secrets (the key icon on the left; grant
   this notebook access), never from this file;
4. trains the three roles concurrently for the time budget, each continuing its
   newest checkpoint — this runtime's own or, on a fresh runtime, the registry's —
   instead of starting again from generation zero, and pushing every generation and
   its matches back;
5. stops cleanly on the budget or on Colab's stop button (Ctrl-C here): the roles
   finish, and whatever the registry has not received yet is pushed.

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
REPO_URL = os.environ.get("BRAWLKIT_REPO_URL", "")
BRANCH = os.environ.get("BRAWLKIT_BRANCH", "main")
#: the registry every location shares, e.g. "https://registry.example.org"
REGISTRY_URL = os.environ.get("BRAWLKIT_REGISTRY_URL", "")
#: the roles this runtime trains, concurrently
ROLES = os.environ.get("BRAWLKIT_ROLES", "main,main_exploiter,league_exploiter").split(",")
#: wall-clock minutes of training (a free Colab runtime lives for a few hours)
TIME_BUDGET_MIN = float(os.environ.get("BRAWLKIT_TIME_BUDGET_MIN", "60"))
#: where the clone lives (its runs/ holds this runtime's runs and league directory)
WORKDIR = os.environ.get("BRAWLKIT_WORKDIR", "/content/brawlkit" if Path("/content").is_dir()
                         else str(Path.home() / "brawlkit"))
#: training settings passed to every role (python -m brawlkit train --help)
TRAIN_ARGS = os.environ.get("BRAWLKIT_TRAIN_ARGS", "--steps-per-generation 100000")
#: this runtime's name in the registry (default: the host name)
LOCATION = os.environ.get("BRAWLKIT_LOCATION", "")


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


def checkout() -> Path:
    """Clone the repository, or bring an earlier clone up to date (fast-forward only:
    local changes are never thrown away)."""
    work = Path(WORKDIR)
    if (work / ".git").is_dir():
        sh(["git", "-C", str(work), "fetch", "--quiet", "origin", BRANCH])
        sh(["git", "-C", str(work), "checkout", "--quiet", BRANCH])
        sh(["git", "-C", str(work), "merge", "--ff-only", "--quiet", f"origin/{BRANCH}"])
    else:
        if not REPO_URL:
            raise SystemExit("colab_bootstrap: set REPO_URL at the top of this file (or "
                             "BRAWLKIT_REPO_URL): the git URL of the brawlkit repository")
        work.parent.mkdir(parents=True, exist_ok=True)
        sh(["git", "clone", "--quiet", "--branch", BRANCH, REPO_URL, str(work)])
    return work


def train(work: Path) -> int:
    """The three roles for the budget against the registry; Ctrl-C stops them cleanly."""
    py = str(work / ".venv" / "bin" / "python")
    league, runs = str(work / "runs" / "league"), str(work / "runs")
    sh([py, "-m", "brawlkit", "registry", "list", "--url", REGISTRY_URL])  # token works
    location = ["--location", LOCATION] if LOCATION else []
    cmd = [py, "-m", "brawlkit", "league", "run", "--league-dir", league, "--runs-root", runs,
           "--roles", ",".join(ROLES), "--",
           "--registry", REGISTRY_URL, *location, "--resume-or-new",
           "--time-budget", str(TIME_BUDGET_MIN), "--generations", "100000",
           *shlex.split(TRAIN_ARGS)]
    say(f"training {', '.join(ROLES)} for {TIME_BUDGET_MIN:g} min; stop with Colab's stop "
        "button (Ctrl-C)")
    say("$ " + " ".join(shlex.quote(c) for c in cmd))
    proc = subprocess.Popen(cmd, cwd=str(work))
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # Colab's stop button interrupts this process only
        say("stopping the roles ...")
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
    say("pushing anything the registry has not received yet")
    sh([py, "-m", "brawlkit", "registry", "push", "--url", REGISTRY_URL, "--league-dir", league,
        *location])
    sh([py, "-m", "brawlkit", "registry", "ratings", "--url", REGISTRY_URL])
    return code


def main() -> int:
    if not REGISTRY_URL:
        raise SystemExit("colab_bootstrap: set REGISTRY_URL at the top of this file (or "
                         "BRAWLKIT_REGISTRY_URL): the league's checkpoint registry")
    credentials()
    work = checkout()
    sh(["make", "build"], cwd=str(work))
    return train(work)


if __name__ == "__main__":
    code = main()
    if "ipykernel" not in sys.modules:  # a Colab cell must not exit its kernel
        sys.exit(code)
    say(f"done (exit {code})")
