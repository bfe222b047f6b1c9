"""Shared fixtures and the test tiers.

Tiers (markers, registered in pyproject.toml):

* unit (no marker): pure Python and the built C tools run on files — fast;
  ``make test-fast`` runs only these.
* ``servers``: starts ``brawlpit_server`` processes / plays over UDP.
* ``training``: trains PPO (the tiny checkpoint of :func:`trained_checkpoint` too).
* ``notebooks``: executes a notebook with papermill.

The tests never build anything: they use the native build as it is (``make
build`` / ``make test`` builds it first) and fail with that command when a
product is missing.  ``python -m pytest tests/test_export.py::test_name`` runs one test.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import large_weight_checkpoint

from brawlkit.common.paths import NativeBuildMissing, native_cflags, native_path, repo_root

ROOT = repo_root()
NATIVE = ROOT / "native"


# ----------------------------------------------------------------- native products
def native(name: str) -> Path:
    """A built native product, or a test failure that names the build command."""
    try:
        return native_path(name)
    except NativeBuildMissing as e:
        missing = str(e)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def server_bin() -> Path:
    return native("brawlpit_server")


@pytest.fixture(scope="session")
def bot_bin() -> Path:
    return native("brawlpit_bot")


@pytest.fixture(scope="session")
def policy_tools() -> tuple[Path, Path]:
    """(brawlpit_policy, its AddressSanitizer+UBSan build)."""
    return native("brawlpit_policy"), native("asan/brawlpit_policy")


@pytest.fixture(scope="session")
def obs_bin() -> Path:
    return native("brawlpit_obs")


@pytest.fixture(scope="session")
def sim_lib() -> Any:
    """libbrawlpit.so through the one set of ctypes bindings (brawlkit.wire.sim)."""
    native("libbrawlpit.so")
    from brawlkit.wire.sim import lib

    return lib()


@pytest.fixture(scope="session")
def cc() -> list[str]:
    """The C compiler with the build's own flags (native/Makefile's BP_CFLAGS line)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("no C compiler (cc/gcc) on PATH", pytrace=False)
    return [compiler, *native_cflags()]


# ----------------------------------------------------------------- servers
@pytest.fixture
def server_factory() -> Iterator[Callable[..., Any]]:
    """``make(mode=..., cpu_level=..., ...)`` -> a started ServerProcess, closed after the test."""
    from brawlkit.wire.server_process import ServerProcess

    started: list[ServerProcess] = []

    def make(**kwargs: Any) -> ServerProcess:
        srv = ServerProcess(**kwargs).wait_ready()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.close()
        srv.remove_log()


# ----------------------------------------------------------------- checkpoints
@pytest.fixture(scope="session")
def big_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """(zip path, model) of :func:`large_weight_checkpoint`, made once per run."""
    path = tmp_path_factory.mktemp("big_ckpt") / "ppo.zip"
    return path, large_weight_checkpoint(path, seed=1)


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny checkpoint trained for real (UDP server, PPO, the CPU curriculum) at
    action repeat 2, made once per test run; tests that need one are ``training``."""
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import train

    cfg = TrainConfig(generations=1, steps_per_generation=512, n_envs=2, n_steps=128,
                      batch_size=64, n_epochs=1, action_repeat=2, eval_levels=(1,),
                      eval_episodes=1, max_episode_steps=200, seed=5)
    res = train(cfg, run_dir=tmp_path_factory.mktemp("trained") / "run", progress=False)
    assert res.final_checkpoint is not None
    return res.final_checkpoint
