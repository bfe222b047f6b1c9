"""The notebooks opened the ways a person opens them: under papermill from the repository
root (tiny parameters), and in a kernel JupyterLab starts for ``make lab`` (working
directory notebooks/, a live front end: the interactive panels, each control changed and
the redrawn figure checked). "As in Colab" — a fresh environment, the notebook file
alone — is tests/test_colab_bootstrap.py, which shares one fresh install."""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path

import nbformat
import pytest
from helpers import NOTEBOOK_SIZES, ROOT

pytestmark = pytest.mark.notebooks


def _execute(name: str, out, parameters: dict, cwd) -> nbformat.NotebookNode:
    import papermill

    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out),
                               parameters=parameters, kernel_name="python3", cwd=str(cwd),
                               progress_bar=False)
    return nbformat.read(str(out), as_version=4)


def _images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


#: a tiny generation of full matches (action repeat 8 halves their steps): the league
#: logs only finished training matches, and the notebook's league plot needs some; the
#: clone it starts from, built by the notebook (its default clone_dir), tiny too
TINY_CLONE = "--opponents 1 --matches 2 --epochs 2 --dagger-rounds 0"
TINY_TRAIN = {"generations": 1, "steps_per_generation": 2048, "n_envs": 2, "eval_levels": [1],
              "eval_episodes": 1, "progress": False, "seed": 1, "clone_args": TINY_CLONE,
              "config": {"action_repeat": 8, "learning_rate": 1e-4, "n_steps": 256,
                         "batch_size": 128, "n_epochs": 1}}


def _outputs_text(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def main_league(tmp_path_factory) -> dict:
    """``papermill notebooks/train_role.ipynb -p role main -p generations 1`` twice, from
    the repository root, with the notebook's default league and runs (relative paths
    under the data root: ``BRAWLKIT_DATA_DIR`` points it at a temporary directory so the
    test leaves the checkout's runs/ alone).  The second run gives no ``config``: the
    resume keeps the first run's (its action repeat, learning rate, ...)."""
    data = tmp_path_factory.mktemp("data")
    mp = pytest.MonkeyPatch()
    mp.setenv("BRAWLKIT_DATA_DIR", str(data))
    try:
        runs = [_execute("train_role", data / f"train_role.{i}.ipynb",
                         {"role": "main", **TINY_TRAIN, **({"config": {}} if i else {})}, ROOT)
                for i in range(2)]
    finally:
        mp.undo()
    return {"data": data, "league": data / "runs" / "league", "notebooks": runs}


@pytest.mark.training
@pytest.mark.timeout(1200)
def test_train_role_main_registers_in_the_default_league_and_continues(main_league):
    from brawlkit.league.directory import LeagueDir

    league = main_league["league"]
    mains = sorted((m for m in LeagueDir(league, create=False).members() if m.role == "main"),
                   key=lambda m: m.generation)
    assert [m.generation for m in mains] == [0, 1], [m.id for m in mains]
    assert mains[1].parent == mains[0].id
    run_dirs = list((main_league["data"] / "runs" / "main").iterdir())
    assert len(run_dirs) == 1, run_dirs  # the second run continued the first one's directory
    meta = json.loads((run_dirs[0] / "gen_0001.json").read_text())
    assert meta["role"] == "main" and "cpu_1" in meta["eval"]
    # it started from the clone it built where make train keeps it (the second run reused
    # it), with the quick start's KL term toward it
    clone = main_league["data"] / "runs" / "imitate" / "gen_0000.zip"
    first = json.loads((run_dirs[0] / "gen_0000.json").read_text())
    assert first["config"]["init_from"] == str(clone) and first["config"]["kl_coef"] == 0.02
    assert json.loads(clone.with_suffix(".json").read_text())["imitation"]["settings"][
        "matches"] == 2
    texts = [_outputs_text(nb) for nb in main_league["notebooks"]]
    assert all(f"starting from the clone {clone}" in t for t in texts)
    # the second run resumed with the first one's settings, none given again
    assert meta["config"]["action_repeat"] == 8 and meta["config"]["learning_rate"] == 1e-4
    assert meta["config"]["n_steps"] == 256 and meta["config"]["batch_size"] == 128
    assert "the run's settings, none changed" in _outputs_text(main_league["notebooks"][1])
    for nb in main_league["notebooks"]:
        # four run plots (reward tiers are one figure) and the league's (draws, ratings)
        assert _images(nb) >= 5, "expected the four training plots and the league's"
        assert str(league) in _outputs_text(nb)
    # the league side was drawn: the opponents main drew exist in the match log
    assert any(r.source == "train:main" for r in LeagueDir(league, create=False).matches())


def test_export_weights_notebook(tmp_path):
    out = tmp_path / "policy.bpw"
    nb = _execute("export_weights", tmp_path / "export_weights.out.ipynb",
                  {"checkpoint": "", "out": str(out), "n_obs": 500, "learn_steps": 64}, tmp_path)
    assert out.read_bytes()[:4] == b"BPW1"
    assert _images(nb) >= 1  # the C-vs-torch plot is shown, not only saved
    assert out.with_suffix(".parity.png").stat().st_size > 1000


def test_obs_parity_notebook(tmp_path):
    nb = _execute("obs_parity", tmp_path / "obs_parity.out.ipynb", {"states": 600, "seed": 2},
                  tmp_path)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert "PARITY OK" in text and _images(nb) >= 2


def test_jupyterlab_serves_the_notebooks():
    """What `make lab` runs: JupyterLab rooted at notebooks/ (here headless, on a free port)."""
    import json as _json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={ROOT / 'notebooks'}",
         "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--IdentityProvider.token=t",
         "--ServerApp.port_retries=0", *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=t",
                                            timeout=2) as r:
                    listing = _json.load(r)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
                time.sleep(0.5)
        names = {item["name"] for item in listing["content"]}
        assert {"train_role.ipynb", "obs_parity.ipynb", "export_weights.ipynb"} <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=t", timeout=5) as r:
            assert r.status == 200 and b"JupyterLab" in r.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_every_notebook_is_documented_pictured_and_run_by_a_test():
    """The README lists each notebook with its parameters and a picture of its main plot
    (from the notebook itself: python -m brawlkit.tools.notebook_figure), and some test
    executes it under papermill."""
    import re

    readme = (ROOT / "README.md").read_text()
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `notebooks/{nb.name}`")),
                   None)
        assert row is not None, f"README's notebook table lacks {nb.name}"
        pics = re.findall(r'<img src="([^"]+)"', row)
        assert all((ROOT / p).is_file() for p in pics), pics
        assert pics or "no plot" in row, f"{nb.name}: no picture of its main plot in the README"
        from brawlkit.tools.colab_notebook import colab_url

        assert colab_url(f"notebooks/{nb.name}") in row, f"{nb.name}: no Open-in-Colab link"
        assert nb.name in tests or f'"{nb.stem}"' in tests, f"no test runs {nb.name}"
        cells = nbformat.read(str(nb), as_version=4).cells
        assert all(c.get("id") for c in cells), f"{nb.name}: a cell without an id"


# --------------------------------------------- a JupyterLab kernel, as `make lab` starts it
class LabKernels:
    """JupyterLab on notebooks/ (what `make lab` runs), headless on a free port; each
    :meth:`open` starts a kernel the way the Lab UI does (a session for the notebook:
    working directory notebooks/, ``JPY_SESSION_NAME`` set) and connects a client to it."""

    def __init__(self, tmp: Path, env: dict[str, str]):
        import socket
        import subprocess
        import sys

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.runtime = tmp / "runtime"
        self.env = {**env, "JUPYTER_RUNTIME_DIR": str(self.runtime)}
        self.log = open(tmp / "lab.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={ROOT / 'notebooks'}",
             "--no-browser", "--ip=127.0.0.1", f"--port={self.port}", "--IdentityProvider.token=t",
             "--ServerApp.port_retries=0", *(["--allow-root"] if os.geteuid() == 0 else [])],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        self.clients: list = []
        deadline = time.monotonic() + 60
        while True:
            try:
                self._api("GET", "/api/status")
                break
            except OSError:
                assert self.proc.poll() is None, (tmp / "lab.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
                time.sleep(0.5)

    def _api(self, method: str, path: str, body: dict | None = None) -> dict:
        import urllib.request

        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "token t",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")

    def open(self, notebook: str):
        from jupyter_client import BlockingKernelClient

        for old in self._api("GET", "/api/sessions"):  # a fresh kernel, as "Restart Kernel"
            if old["path"] == notebook:
                self._api("DELETE", f"/api/sessions/{old['id']}")
        sess = self._api("POST", "/api/sessions", {"path": notebook, "name": notebook,
                                                   "type": "notebook",
                                                   "kernel": {"name": "python3"}})
        kc = BlockingKernelClient(connection_file=str(self.runtime / f"kernel-{sess['kernel']['id']}.json"))
        kc.load_connection_file()
        # no heartbeat channel: on a loaded machine a late beat reads as a dead kernel
        # (jupyter_client's wait_for_ready). Up means both: a kernel_info reply on shell
        # AND that request's status on iopub. iopub is a SUB socket, which drops what
        # is published before its subscription has reached the kernel; a client that
        # executes then waits forever for an "idle" it never receives (this hung once).
        kc.start_channels(hb=False)
        deadline = time.monotonic() + 180
        while not self._ready(kc):
            assert time.monotonic() < deadline, f"{notebook}: the kernel did not answer"
        self.clients.append(kc)
        return kc

    @staticmethod
    def _ready(kc) -> bool:
        """One kernel_info round trip seen on both shell and iopub."""
        msg_id = kc.kernel_info()
        try:
            while kc.get_shell_msg(timeout=10)["parent_header"].get("msg_id") != msg_id:
                pass
        except queue.Empty:
            return False
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                msg = kc.get_iopub_msg(timeout=max(0.05, end - time.monotonic()))
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id:
                return True
        return False  # iopub not subscribed yet: ask again

    def stop(self) -> None:
        for kc in self.clients:
            kc.stop_channels()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def run_code(kc, code: str, timeout: float = 600) -> list[dict]:
    """Execute ``code`` in the kernel; its output messages (raises on an error)."""
    outs: list[dict] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] in ("stream", "display_data", "execute_result", "error"):
            outs.append({"type": msg["msg_type"], **msg["content"]})

    reply = kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    errors = [o for o in outs if o["type"] == "error"]
    assert reply["content"]["status"] == "ok", (errors or reply["content"]).__repr__()[-3000:]
    return outs


def run_notebook(kc, name: str, overrides: str = "") -> list[dict]:
    """Every code cell of a notebook in order, as Lab's "Run all" does; ``overrides``
    runs after the parameters cell (as papermill's injected cell would)."""
    outs: list[dict] = []
    for cell in nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), as_version=4).cells:
        if cell.cell_type != "code":
            continue
        outs += run_code(kc, cell.source)
        if "parameters" in cell.metadata.get("tags", []) and overrides:
            outs += run_code(kc, overrides)
    return outs


def _text(outs: list[dict]) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outs)


@pytest.fixture(scope="module")
def lab(main_league, tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if k != "BRAWLKIT_INTERACTIVE"}
    env["BRAWLKIT_DATA_DIR"] = str(main_league["data"])
    labk = LabKernels(tmp_path_factory.mktemp("lab"), env)
    yield labk
    labk.stop()


@pytest.mark.training
@pytest.mark.timeout(1200)  # the Main league fixture trains twice first (~1 min on idle cores)
def test_notebooks_run_with_their_defaults_in_a_make_lab_kernel(lab, main_league):
    """Opened from JupyterLab (kernel in notebooks/), each notebook's default paths are the
    repository's (here its data root): no runs/ appears under notebooks/, train_role
    continues the league's Main, the league notebooks read that league and detect a live
    kernel (widgets, not PNGs)."""
    from brawlkit.league.directory import LeagueDir

    league = main_league["league"]
    before = {m.id for m in LeagueDir(league, create=False).members() if m.role == "main"}
    kc = lab.open("train_role.ipynb")
    where = _text(run_code(kc, "import os; print(os.getcwd())"))
    assert where.strip() == str(ROOT / "notebooks")
    run_notebook(kc, "train_role", "\n".join(f"{k} = {v!r}" for k, v in TINY_TRAIN.items()))
    after = {m.id: m for m in LeagueDir(league, create=False).members() if m.role == "main"}
    new = set(after) - before
    assert len(new) == 1 and after[new.pop()].generation == max(m.generation for m in after.values())
    assert max(m.generation for m in after.values()) == len(before), "did not continue Main"

    for name, sizes in NOTEBOOK_SIZES.items():
        overrides = "\n".join(f"{k} = {v!r}" for k, v in sizes.items())
        outs = run_notebook(lab.open(f"{name}.ipynb"), name, overrides)
        text = _text(outs)
        if name == "elo_drift":
            assert f"{league}: " in text and "interactive plots" in text, text[:2000]
            widgets = [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
            assert len(widgets) == 5, "one widget panel per league plot"
        if name == "league_overview":
            assert "no kept replays in " + str(main_league["data"] / "runs" / "replays") in text
        if name == "obs_parity":
            assert "PARITY OK" in text
        if name == "move_training":  # no run yet under the data root: one short batch first
            assert f"no run in {main_league['data'] / 'runs' / 'move'} yet" in text, text[:2000]
            assert "1 batches, 2 fights" in text
    assert not (ROOT / "notebooks" / "runs").exists()


@pytest.mark.training
def test_interactive_controls_redraw_each_plot(lab, main_league):
    """In a live kernel every control redraws its figure, and title and legend follow."""
    from brawlkit.report.league_plots import LeagueView

    view = LeagueView.load(main_league["league"], bootstrap=0)
    mains = [m.id for m in view.members if m.role == "main" and view.elo.games.get(m.id)]
    cpus = [m.id for m in view.members if m.role == "cpu" and view.elo.games.get(m.id)]
    assert mains and cpus
    kc = lab.open("elo_drift.ipynb")
    run_notebook(kc, "elo_drift", "bootstrap = 10")

    def change(panel: str, control: str, value) -> dict:
        out = _text(run_code(kc, f"""
import json
n = {panel}.redraws
{panel}.controls[{control!r}].value = {value!r}
assert {panel}.redraws == n + 1, ({panel}.redraws, n)
print(json.dumps(ui.figure_summary({panel}.fig)))
"""))
        # the redraw's own display messages (routed into the Output widget by a front
        # end) come first; the summary is the printed line
        return json.loads(out[out.rindex('{"axes"'):].splitlines()[0])["axes"]

    ax = change("drift", "roles", ("cpu",))[0]
    # each CPU level is drawn (and listed) under its own name and colour
    assert ax["legend"] and all(e.startswith("cpu") for e in ax["legend"])
    assert "cpu" in ax["title"] and "main" not in ax["title"]
    assert ax["lines"] == 2 * len(cpus) + 2  # a step and an end marker each, the proxy, 1200
    ax = change("drift", "members", (mains[0],))[0]
    assert ax["legend"] == [mains[0]] and mains[0] in ax["title"]
    ax = change("drift", "window", (0, 3))[0]
    assert "matches 0–3 of" in ax["title"]
    run_code(kc, "drift.controls['members'].value = ()\ndrift.controls['roles'].value = ('main',)\n"
                 "drift.controls['window'].value = (0, len(view.matches))")
    ax = change("drift", "generations", (1, 1))[0]
    assert ax["legend"] == ["main"] and "generations 1–1" in ax["title"]

    ax = change("strength", "roles", ("main",))[0]
    assert "main (BT)" in ax["legend"] and "main_exploiter (BT)" not in ax["legend"]
    ax = change("strength", "generations", (0, 0))[0]
    assert "generations 0–0" in ax["title"]

    ax = change("bt", "members", (mains[0], cpus[0]))[0]
    # a member with few rated games says so beside its name (docs/ratings.md)
    assert sorted(t.removesuffix(" (few games)") for t in ax["yticks"]) == sorted([mains[0], cpus[0]])
    assert sorted(ax["legend"]) == sorted(["main: BT (95 % interval)", "cpu: BT (95 % interval)",
                                           "Elo (live)"])
    ax = change("payoff", "members", (mains[0], cpus[0]))[0]
    assert sorted(ax["xticks"]) == sorted([mains[0], cpus[0]]) and ax["legend"] == ["never met"]
    axes = change("spread", "roles", ("main",))
    assert all(a["legend"] == ["main"] for a in axes[:2])
    axes = change("spread", "roles", ("cpu",))
    assert all("no recorded policy statistics" in " ".join(a["texts"]) for a in axes[:2])


# ------------------------------------------------------------------ set-up, paths, packaging
def test_default_paths_resolve_from_the_repository_root(tmp_path, monkeypatch):
    """The same ``runs/league`` from the repository root, notebooks/ (make lab) or anywhere."""
    from brawlkit.common.paths import data_root, repo_root, resolve

    monkeypatch.delenv("BRAWLKIT_DATA_DIR", raising=False)
    for cwd in (ROOT, ROOT / "notebooks", tmp_path):
        monkeypatch.chdir(cwd)
        assert resolve("runs/league") == repo_root() / "runs" / "league" == ROOT / "runs" / "league"
    assert resolve(str(tmp_path)) == tmp_path and resolve(None) is None and resolve("") is None
    monkeypatch.setenv("BRAWLKIT_DATA_DIR", str(tmp_path))
    assert data_root() == tmp_path and resolve("runs") == tmp_path / "runs"


def test_pyproject_declares_what_requirements_pin():
    """``pip install .`` gets the same pins as ``make build``: every requirement is a core
    dependency or in an extra of pyproject.toml, at the same version, torch included; the
    ``llm`` extra is exactly requirements-llm.txt (what ``make test`` adds)."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra
    def read(name: str) -> list[str]:
        return [p for p in (ln.split("#")[0].strip() for ln in (ROOT / name).read_text().splitlines()) if p]

    pins = read("requirements.txt") + read("requirements-llm.txt")
    assert sorted(project["optional-dependencies"]["llm"]) == sorted(read("requirements-llm.txt"))
    norm = lambda s: re.sub(r"\[.*?\]", "", s).lower().replace("_", "-")  # noqa: E731
    assert sorted(set(map(norm, declared))) == sorted(map(norm, pins))  # extras may share pins
    assert "torch==2.13.0" in project["dependencies"]
    assert not any(d.startswith(("fastapi", "pygame", "ray")) for d in project["dependencies"])


def test_every_notebook_opens_with_the_setup_cell():
    """The first code cell of each notebook is the one set-up cell (so a notebook opened
    alone in Colab sets itself up), before any import of brawlkit."""
    from brawlkit.tools.colab_notebook import NOTEBOOK, SETUP_CELL, other_notebooks, with_setup_cell

    assert len(other_notebooks()) == len(list((ROOT / "notebooks").glob("*.ipynb"))) - 1
    for name in other_notebooks():
        text = (ROOT / name).read_text()
        assert with_setup_cell(text) == text, (
            f"{name}: its set-up cell is out of date: run `python -m brawlkit.tools.colab_notebook`")
        code = [c for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "code"]
        assert code[0].source == SETUP_CELL
        assert not any("from brawlkit" in c.source or "import brawlkit" in c.source
                       for c in code[:2]), f"{name}: brawlkit imported before the set-up cell"
    assert "def ensure(" in (ROOT / NOTEBOOK).read_text()  # the Colab notebook is the file


def test_interactive_is_detected_not_flipped(monkeypatch):
    """Outside a kernel (and so under papermill, whose kernels carry no front end's mark)
    the plots are static; BRAWLKIT_INTERACTIVE and the parameter force either."""
    from brawlkit.report import interactive as ui

    monkeypatch.delenv("BRAWLKIT_INTERACTIVE", raising=False)
    assert ui.live_kernel() is False and ui.want_interactive(None) is False
    assert ui.want_interactive(True) is True
    monkeypatch.setenv("BRAWLKIT_INTERACTIVE", "1")
    assert ui.want_interactive(None) is True and ui.want_interactive(False) is False
