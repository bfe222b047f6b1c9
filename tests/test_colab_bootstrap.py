"""colab_bootstrap.py end to end, as a user runs it: ``python colab_bootstrap.py``
clones a local copy of this repository, installs and builds it, trains the three
roles for a tiny budget against a real ``registry serve``; a second run — the
notebook ``notebooks/colab_league.ipynb`` under papermill, on a "fresh runtime"
whose runs are gone — updates the clone and continues every role from the
registry's checkpoints instead of generation zero.

The install is real (a new .venv, ``pip install`` of every requirement, the native
build) but reads the packages from the wheelhouse ``make test`` prepares, since
tests talk only to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, RegistryServer, add_agent

pytestmark = [pytest.mark.training, pytest.mark.servers]

WHEELHOUSE_ENV = "BRAWLKIT_TEST_WHEELHOUSE"
TINY = ("--steps-per-generation 2048 --n-envs 2 --n-steps 256 --batch-size 128 --n-epochs 1 "
        "--action-repeat 8 --eval-levels 1 --eval-episodes 1")
ROLES = ("main", "main_exploiter", "league_exploiter")


def _git(cwd: Path, *args: str) -> str:
    r = subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args],
                       cwd=cwd, capture_output=True, text=True, check=True)
    return r.stdout


def _origin(dest: Path) -> Path:
    """A git repository holding this working tree's files (tracked and new, not ignored):
    what the bootstrap clones, standing for the project's remote."""
    files = _git(ROOT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "origin")
    return dest


def _bootstrap(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, str(ROOT / "colab_bootstrap.py")], env=env,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


def _members(srv: RegistryServer, env: dict[str, str]) -> list[dict[str, object]]:
    r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "list", "--url", srv.url,
                        "--json"], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    out: list[dict[str, object]] = json.loads(r.stdout.splitlines()[-1])
    return out


def test_bootstrap_joins_the_league_and_a_fresh_runtime_continues_it(tmp_path: Path) -> None:
    wheelhouse = os.environ.get(WHEELHOUSE_ENV)
    if not wheelhouse or not Path(wheelhouse, ".complete").is_file():
        pytest.skip(f"{WHEELHOUSE_ENV} names no complete wheelhouse (`make wheelhouse` makes "
                    "one; `make test` sets it)")
    origin = _origin(tmp_path / "origin")
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    srv = RegistryServer(db, tmp_path / "registry-data")
    try:
        work = tmp_path / "colab" / "brawlkit"
        env = {k: v for k, v in os.environ.items()
               if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIRTUAL_ENV")}
        env.update({
            "BRAWLKIT_AGENT_ID": "colab", "BRAWLKIT_AGENT_SECRET": add_agent(db, "colab", "write"),
            "BRAWLKIT_REPO_URL": str(origin), "BRAWLKIT_BRANCH": "main",
            "BRAWLKIT_REGISTRY_URL": srv.url, "BRAWLKIT_WORKDIR": str(work),
            "BRAWLKIT_TIME_BUDGET_MIN": "0.05", "BRAWLKIT_TRAIN_ARGS": TINY,
            "BRAWLKIT_LOCATION": "colab-1", "BRAWLKIT_REGISTRY_CACHE": str(tmp_path / "cache"),
            "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheelhouse,
        })
        first = _bootstrap(env)
        assert (work / ".venv" / "bin" / "python").is_file()
        assert (work / "native" / "build" / "brawlpit_server").is_file()
        after_first = _members(srv, env)
        runs: dict[str, str] = {}
        last: dict[str, int] = {}
        for role in ROLES:  # the budget ends each role after a generation or a few
            mine = sorted((m for m in after_first if m["role"] == role),
                          key=lambda m: int(m["generation"]))  # type: ignore[call-overload]
            gens = [int(m["generation"]) for m in mine]  # type: ignore[call-overload]
            assert gens and gens == list(range(len(gens))), (role, first.stderr[-3000:])
            assert {m["location"] for m in mine} == {"colab-1"}
            runs[role] = str(mine[0]["id"])[len(role) + 1:-len("-g0000")]
            last[role] = gens[-1]

        # a fresh runtime: its runs are gone (the clone is updated, the venv kept for speed)
        shutil.rmtree(work / "runs")
        (origin / "NEWS").write_text("a commit after the first run\n")
        _git(origin, "add", "NEWS")
        _git(origin, "commit", "-q", "-m", "news")
        env["BRAWLKIT_LOCATION"] = "colab-2"
        # this time as the notebook people open from the repository (the same cell)
        r = subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar",
                            str(ROOT / "notebooks" / "colab_league.ipynb"),
                            str(tmp_path / "colab_league.out.ipynb")],
                           env=env, capture_output=True, text=True, timeout=1500, cwd=tmp_path)
        assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
        assert "done (exit 0)" in (tmp_path / "colab_league.out.ipynb").read_text()
        assert (work / "NEWS").is_file(), "the clone was not updated"
        after_second = {str(m["id"]): m for m in _members(srv, env)}
        for role in ROLES:
            nxt = after_second.get(f"{role}-{runs[role]}-g{last[role] + 1:04d}")
            assert nxt is not None, f"{role} did not continue from the registry: {sorted(after_second)}"
            assert nxt["location"] == "colab-2"
            assert not [m for m in after_second.values()
                        if m["role"] == role and m["generation"] == 0 and m["location"] == "colab-2"]
        # the resumed Main's next generation descends from the first run's
        g = last["main"]
        assert (after_second[f"main-{runs['main']}-g{g + 1:04d}"]["parent"]
                == f"main-{runs['main']}-g{g:04d}")
    finally:
        srv.stop()


def test_the_colab_notebook_is_the_bootstrap_file() -> None:
    from brawlkit.tools.colab_notebook import NOTEBOOK, render

    assert (ROOT / NOTEBOOK).read_text() == render(), (
        f"{NOTEBOOK} is out of date with colab_bootstrap.py: run "
        "`python -m brawlkit.tools.colab_notebook`")
