"""Opening brawlkit "as in Colab", end to end, in ONE fresh environment: a new
virtualenv with only Jupyter's kernel and papermill (what a Colab runtime or a bare
Jupyter has), no brawlkit.

1. a notebook file alone (``train_role.ipynb``, then ``elo_drift.ipynb``, copied to an
   empty directory) runs as it opens: its first cell clones a local copy of this
   repository, pip-installs it with its dependencies and builds the native code, and
   the notebook continues with its defaults (the league under the clone);
2. ``python colab_bootstrap.py`` in the local-only mode (no registry) continues that
   league's Main;
3. the shared mode: the bootstrap trains the three roles for a tiny budget against a
   real ``registry serve``; a second run — the notebook ``notebooks/colab_league.ipynb``
   under papermill, on a "fresh runtime" whose runs are gone — updates the clone and
   continues every role from the registry's checkpoints instead of generation zero.

The installs are real (``pip install`` of every requirement, the native build) but read
the packages from the wheelhouse ``make test`` prepares, since tests talk only to
127.0.0.1. The environment is shared so the suite pays for one install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import NOTEBOOK_SIZES, ROOT, RegistryServer, add_agent

#: pip installs and native builds: minutes on idle cores, many more on a loaded machine
pytestmark = [pytest.mark.training, pytest.mark.servers, pytest.mark.timeout(1800)]

WHEELHOUSE_ENV = "BRAWLKIT_TEST_WHEELHOUSE"
TINY = ("--steps-per-generation 2048 --n-envs 2 --n-steps 256 --batch-size 128 --n-epochs 1 "
        "--action-repeat 8 --eval-levels 1 --eval-episodes 1")
#: the clone every role starts from, tiny, of the same action repeat (the notebook and the
#: bootstrap build and reuse it in the clone's runs/imitate)
TINY_CLONE = "--opponents 1 --matches 2 --epochs 2 --dagger-rounds 0"
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


def _bootstrap(env: dict[str, str], python: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([python, str(ROOT / "colab_bootstrap.py")], env=env,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


def _members(srv: RegistryServer, env: dict[str, str]) -> list[dict[str, object]]:
    r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "list", "--url", srv.url,
                        "--json"], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    out: list[dict[str, object]] = json.loads(r.stdout.splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict[str, Any]:
    """The one fresh environment: a venv with papermill and ipykernel only, the origin
    repository, the clone's place (``BRAWLKIT_WORKDIR``) and the offline pip settings."""
    wheelhouse = os.environ.get(WHEELHOUSE_ENV)
    if not wheelhouse or not Path(wheelhouse, ".complete").is_file():
        pytest.skip(f"{WHEELHOUSE_ENV} names no complete wheelhouse (`make wheelhouse` makes "
                    "one; `make test` sets it)")
    tmp = tmp_path_factory.mktemp("colab")
    origin = _origin(tmp / "origin")
    fresh = tmp / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(fresh)], check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIRTUAL_ENV", "PYTHONPATH",
                        "BRAWLKIT_DATA_DIR", "BRAWLKIT_INTERACTIVE", "JPY_SESSION_NAME")}
    env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheelhouse,
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COMPILE": "1",
                "JUPYTER_DATA_DIR": str(tmp / "jupyter"), "JUPYTER_PATH": "",
                "BRAWLKIT_REPO_URL": str(origin), "BRAWLKIT_BRANCH": "main",
                "BRAWLKIT_WORKDIR": str(tmp / "content" / "brawlkit")})
    python = str(fresh / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "papermill==2.7.0", "ipykernel==7.4.0"],
                   env=env, check=True, timeout=600)
    r = subprocess.run([python, "-c", "import brawlkit"], env=env, capture_output=True, cwd=tmp)
    assert r.returncode != 0, "the fresh environment already has brawlkit"
    return {"tmp": tmp, "origin": origin, "python": python, "env": env,
            "work": tmp / "content" / "brawlkit"}


def _papermill(colab: dict[str, Any], notebook: Path, out: Path, *params: str,
               env: dict[str, str] | None = None) -> str:
    """papermill with the fresh environment's Python (its kernel is that Python)."""
    r = subprocess.run([colab["python"], "-m", "papermill", "--no-progress-bar", str(notebook),
                        str(out), *params], env=env or colab["env"], capture_output=True,
                       text=True, timeout=1500, cwd=notebook.parent)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return out.read_text()


def _main_generations(league: Path) -> list[int]:
    from brawlkit.league.directory import LeagueDir

    return sorted(m.generation for m in LeagueDir(league, create=False).members()
                  if m.role == "main")


def test_a_notebook_alone_sets_itself_up_as_in_colab(colab: dict[str, Any]) -> None:
    alone = colab["tmp"] / "notebook-alone"
    alone.mkdir()
    for name in ("train_role.ipynb", "elo_drift.ipynb", *REST):
        shutil.copy2(ROOT / "notebooks" / name, alone / name)
    tiny = ["-p", "role", "main", "-p", "generations", "1", "-p", "steps_per_generation", "2048",
            "-p", "n_envs", "2", "-y", "eval_levels: [1]", "-p", "eval_episodes", "1",
            "-p", "progress", "False", "-p", "clone_args", TINY_CLONE,
            "-y", "config: {action_repeat: 8, n_steps: 256, batch_size: 128, n_epochs: 1}"]
    out = _papermill(colab, alone / "train_role.ipynb", alone / "train_role.out.ipynb", *tiny)
    work = colab["work"]
    assert f"brawlkit installed from {work}" in out
    r = subprocess.run([colab["python"], "-c", "import brawlkit; print(brawlkit.__file__)"],
                       env=colab["env"], capture_output=True, text=True, check=True, cwd=alone)
    assert r.stdout.strip() == str(work / "brawlkit" / "__init__.py")  # editable, the clone
    assert (work / "native" / "build" / "brawlpit_server").is_file()
    league = work / "runs" / "league"  # the default league_dir, resolved under the clone
    assert _main_generations(league) == [0]
    assert (work / "runs" / "imitate" / "gen_0000.zip").is_file()  # it started from the clone
    assert not (alone / "runs").exists()
    # a second notebook in the same runtime: the set-up cell does nothing now
    out = _papermill(colab, alone / "elo_drift.ipynb", alone / "elo_drift.out.ipynb")
    assert "brawlkit installed" not in out and f"{league}: " in out and "static plots" in out
    nb = json.loads(out)
    images = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    assert images >= 5
    # the others, each opened alone in that runtime, with their defaults (sizes trimmed)
    for name, params in REST.items():
        out = _papermill(colab, alone / name, alone / name.replace(".ipynb", ".out.ipynb"),
                         *params)
        assert "brawlkit installed" not in out and "Traceback" not in out, name
        if name == "obs_parity.ipynb":
            assert "PARITY OK" in out
        if name == "move_training.ipynb":
            assert f"no run in {work / 'runs' / 'move'} yet" in out
    assert not (alone / "runs").exists()


#: the rest of the notebooks, papermill's -p for their trimmed sizes (colab_league is the
#: bootstrap's own, tested below)
REST = {f"{name}.ipynb": [a for k, v in sizes.items() for a in ("-p", k, str(v))]
        for name, sizes in NOTEBOOK_SIZES.items() if name != "elo_drift"}


def test_the_local_only_mode_needs_no_registry(colab: dict[str, Any]) -> None:
    """``python colab_bootstrap.py`` without a registry: the league in the runtime's own
    directory, its Main continued (generation 1 after the notebook's 0)."""
    env = {**colab["env"], "BRAWLKIT_REGISTRY_URL": "", "BRAWLKIT_ROLES": "main",
           "BRAWLKIT_TIME_BUDGET_MIN": "0.05", "BRAWLKIT_TRAIN_ARGS": TINY,
           "BRAWLKIT_CLONE_ARGS": f"--action-repeat 8 {TINY_CLONE}"}
    for k in ("BRAWLKIT_AGENT_ID", "BRAWLKIT_AGENT_SECRET"):
        env.pop(k, None)
    r = _bootstrap(env, colab["python"])
    assert "local-only mode" in r.stdout and "BRAWLKIT_AGENT_SECRET" in r.stdout
    gens = _main_generations(colab["work"] / "runs" / "league")
    assert gens[:2] == [0, 1] and gens == list(range(len(gens))), gens


def test_bootstrap_joins_the_league_and_a_fresh_runtime_continues_it(colab: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    origin, work = colab["origin"], colab["work"]
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    srv = RegistryServer(db, tmp_path / "registry-data")
    try:
        shutil.rmtree(work / "runs", ignore_errors=True)  # a runtime that trained nothing yet
        env = dict(colab["env"])
        env.update({
            "BRAWLKIT_AGENT_ID": "colab", "BRAWLKIT_AGENT_SECRET": add_agent(db, "colab", "write"),
            "BRAWLKIT_REGISTRY_URL": srv.url,
            "BRAWLKIT_TIME_BUDGET_MIN": "0.05", "BRAWLKIT_TRAIN_ARGS": TINY,
            "BRAWLKIT_CLONE_ARGS": f"--action-repeat 8 {TINY_CLONE}",
            "BRAWLKIT_LOCATION": "colab-1", "BRAWLKIT_REGISTRY_CACHE": str(tmp_path / "cache"),
        })
        first = _bootstrap(env, colab["python"])
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

        # a fresh runtime: its runs are gone (the clone is updated, the install kept for speed)
        shutil.rmtree(work / "runs")
        (origin / "NEWS").write_text("a commit after the first run\n")
        _git(origin, "add", "NEWS")
        _git(origin, "commit", "-q", "-m", "news")
        env["BRAWLKIT_LOCATION"] = "colab-2"
        # this time as the notebook people open from the repository (the same cell)
        shutil.copy2(ROOT / "notebooks" / "colab_league.ipynb", tmp_path / "colab_league.ipynb")
        out = _papermill(colab, tmp_path / "colab_league.ipynb", tmp_path / "colab_league.out.ipynb",
                         env=env)
        assert "done (exit 0)" in out
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
