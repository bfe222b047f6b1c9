"""The package's floors hold: no module imports from a package on a higher floor.

docs/architecture.md ("The Python package") draws the floors; :data:`FLOORS` is the same
list, lowest first.  Every import counts — at module level, inside a function, under
``TYPE_CHECKING`` — because an import hidden in a function is still a dependency: it
only fails later.  Packages on one floor do not import each other either, so the
package graph has no cycle, and module-level imports have none inside a package.

Run alone: ``python -m pytest -q tests/test_layers.py`` (pure ``ast``, no imports).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "brawlkit"

#: lowest floor first; a package may import from its own floor's package and lower floors
FLOORS: list[tuple[str, ...]] = [
    ("common",),
    ("wire",),
    ("parena_compiler", "export", "replay"),
    ("env",),
    ("league",),
    ("registry",),
    ("distributed",),
    ("training",),
    ("botpool", "play", "policy_server"),
    ("report", "bench", "tools"),
    ("<root>",),  # brawlkit/__init__.py, __main__.py, cli.py: the edge
]
FLOOR = {pkg: i for i, pkgs in enumerate(FLOORS) for pkg in pkgs}


def _package(module: str) -> str:
    """``brawlkit.env.brawlpit`` -> ``env``; a top-level module -> ``<root>``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "<root>"
    return parts[1] if (PKG / parts[1]).is_dir() else "<root>"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported brawlkit module, line, at module level) of every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "brawlkit":
                names = [f"brawlkit.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "brawlkit" or name.startswith("brawlkit."):
                out.append((name, node.lineno, id(node) in top))
    return out


def _all_imports() -> dict[str, list[tuple[str, int, bool]]]:
    return {_module_name(p): _imports(p) for p in sorted(PKG.rglob("*.py"))}


def test_every_package_has_a_floor() -> None:
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= set(FLOOR), f"packages without a floor in FLOORS: {packages - set(FLOOR)}"


def test_no_import_runs_up_or_sideways() -> None:
    bad = []
    for module, imports in _all_imports().items():
        src = _package(module)
        for target, line, _top in imports:
            dst = _package(target)
            if dst == src:
                continue
            if FLOOR[dst] >= FLOOR[src]:
                bad.append(f"{module}:{line} imports {target} ({src}, floor {FLOOR[src]} -> "
                           f"{dst}, floor {FLOOR[dst]})")
    assert not bad, "imports that run up (or sideways) the floors of docs/architecture.md:\n" \
        + "\n".join(bad)


def test_no_module_level_cycle_inside_a_package() -> None:
    modules = _all_imports()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imports in modules.items():
        for target, _line, top in imports:
            if top and target in modules and target != module:
                graph[module].add(target)
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        seen[m] = 1
        for n in sorted(graph[m]):
            if seen.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n] if n in stack else [m, n])
            elif n not in seen:
                visit(n, stack + [n])
        seen[m] = 2

    for m in sorted(modules):
        if m not in seen:
            visit(m, [m])
    # a package's __init__ importing its own modules is how a package exposes them
    cycles = [c for c in cycles if not any(x == _package_init(c) for x in c)]
    assert not cycles, "module-level import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _package_init(cycle: list[str]) -> str:
    return ".".join(cycle[0].split(".")[:2])


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The walk is not blind: an env module importing the training package is refused."""
    f = tmp_path / "probe.py"
    f.write_text("def f():\n    from brawlkit.training.ppo import train\n    return train\n")
    (target, line, top), = _imports(f)
    assert (target, line, top) == ("brawlkit.training.ppo", 2, False)
    assert FLOOR[_package(target)] > FLOOR["env"]
