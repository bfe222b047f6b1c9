"""PARENA — a small language for decision functions (grammar: parena/README.md).

Pure standard library (it runs inside the native build, possibly on a bare
python3).  One ``.prn`` source compiles to a Python callable and to a C
``.c``/``.h`` pair that compute the same thing in IEEE double with the same
operation order.

    from brawlkit.parena_compiler import compile_file, load_stdlib_function
    mod = compile_file("parena/stdlib/brawlpit/commander_mod.prn")
    mod.functions["commander_posture"](*inputs)   # -> label index (int)
    mod.label_sets["posture"]                     # ('neutral', ..., 'recover')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from brawlkit.parena_compiler.check import CheckedModule, check
from brawlkit.parena_compiler.emit_c import emit_c
from brawlkit.parena_compiler.emit_py import emit_python
from brawlkit.parena_compiler.errors import ParenaError
from brawlkit.parena_compiler.syntax import parse

__all__ = [
    "CompiledModule", "ParenaError", "compile_source", "compile_file", "load_stdlib_function",
    "stdlib_dir", "emit_c", "emit_python", "check_source", "main",
]


@dataclass(frozen=True)
class CompiledModule:
    name: str
    file: str
    checked: CheckedModule
    python_source: str
    functions: dict[str, Callable[..., Any]]
    label_sets: dict[str, tuple[str, ...]]

    def signature(self, fn: str) -> tuple[list[str], str]:
        """(input names, return type: 'number' or the label-set name)."""
        f = self.checked.functions[fn]
        return list(f.params), f.returns

    def c_sources(self, basename: str | None = None) -> tuple[str, str]:
        return emit_c(self.checked, basename or self.name)


def stdlib_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "parena" / "stdlib"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ParenaError(str(path), 1, 1, f"file is not UTF-8 text ({e.reason})",
                          "a UTF-8 .prn source") from None
    except OSError as e:
        raise ParenaError(str(path), 1, 1, f"cannot read file: {e.strerror or e}",
                          "an existing, readable .prn file") from None


def check_source(src: str, file: str = "<string>", header: Path | None = None) -> CheckedModule:
    return check(parse(src, file), header)


def compile_source(src: str, file: str = "<string>", header: Path | None = None) -> CompiledModule:
    checked = check_source(src, file, header)
    py = emit_python(checked)
    ns: dict[str, Any] = {"__name__": f"parena_{checked.name}"}
    exec(compile(py, f"<parena {file}>", "exec"), ns)
    funcs = {name: ns[name] for name in checked.functions}
    return CompiledModule(checked.name, file, checked, py, funcs, dict(checked.label_sets))


def compile_file(path: str | Path, header: Path | None = None) -> CompiledModule:
    path = Path(path)
    return compile_source(_read(path), str(path), header)


@cache
def load_stdlib_module(relpath: str) -> CompiledModule:
    """Compile ``parena/stdlib/<relpath>`` once per process."""
    return compile_file(stdlib_dir() / relpath)


def load_stdlib_function(relpath: str, name: str) -> Callable[..., Any]:
    return load_stdlib_module(relpath).functions[name]


def main(argv: list[str] | None = None) -> int:
    from brawlkit.parena_compiler.cli import main as _main

    return _main(argv)
