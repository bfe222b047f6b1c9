"""PARENA: parser/checker diagnostics, Python and C backends agree (property test)."""

from __future__ import annotations

import ctypes
import math
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from brawlkit.common.paths import repo_root
from brawlkit.parena_compiler import compile_file, compile_source, stdlib_dir
from brawlkit.parena_compiler.check import LabelRef
from brawlkit.parena_compiler.syntax import Node, Num, walk

ROOT = repo_root()
STDLIB = sorted(stdlib_dir().rglob("*.prn"))


def _cli(args: list[str], python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "brawlkit.parena_compiler", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ the stdlib compiles
def test_stdlib_present() -> None:
    names = {p.name for p in STDLIB}
    assert "commander_mod.prn" in names


def test_commander_posture_rules() -> None:
    mod = compile_file(stdlib_dir() / "brawlpit" / "commander_mod.prn")
    labels = mod.label_sets["posture"]
    assert labels == ("neutral", "aggressive", "patient", "edgeguard", "recover")
    f = mod.functions["commander_posture"]
    k = mod.checked.consts

    def post(sx=0.0, sy=0.0, sd=0.0, ss=3.0, ox=30.0, oy=0.0, od=0.0, os_=3.0, t=9000.0):
        return labels[f(sx, sy, 0.0, 0.0, sd, ss, ox, oy, 0.0, 0.0, od, os_, t)]

    edge = k["EDGE"]
    assert post() == "neutral"
    assert post(sx=edge + 1) == "recover"
    assert post(sx=-edge - 1) == "recover"
    assert post(sy=-1.0) == "recover"
    assert post(sx=edge) == "neutral"  # exactly on the ledge is on stage
    assert post(ox=edge + 5) == "edgeguard"
    assert post(sx=edge + 1, ox=edge + 5) == "recover"  # own recovery first
    late = k["LATE_TICKS"] - 1
    assert post(ss=3, os_=2, t=late) == "patient"
    assert post(ss=3, os_=2, t=late + 1) == "neutral"
    assert post(sd=0, od=k["DAMAGE_LEAD"] + 1, t=late) == "patient"
    assert post(od=k["KILL_PERCENT"]) == "aggressive"
    assert post(ss=2, os_=3, t=late) == "aggressive"
    assert post(sd=50, od=40, t=late) == "aggressive"


def test_cli_emits_both_backends(tmp_path: Path) -> None:
    src = stdlib_dir() / "brawlpit" / "commander_mod.prn"
    r = _cli(["compile", str(src), "--emit", "c", "-o", str(tmp_path / "cm")])
    assert r.returncode == 0, r.stderr
    h = (tmp_path / "cm.h").read_text()
    assert "PRN_POSTURE_RECOVER = 4" in h and "int prn_commander_posture(" in h
    assert '#include "cm.h"' in (tmp_path / "cm.c").read_text()
    r = _cli(["compile", str(src), "--emit", "py", "-o", str(tmp_path / "cm")])
    assert r.returncode == 0, r.stderr
    ns: dict = {}
    exec((tmp_path / "cm.py").read_text(), ns)
    mod = compile_file(src)
    args = (90.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 100.0)
    assert ns["commander_posture"](*args) == mod.functions["commander_posture"](*args) == 4
    r = _cli(["compile", str(src), "--emit", "py"])
    assert r.returncode == 0 and "def commander_posture(" in r.stdout


def test_cli_runs_on_bare_system_python(tmp_path: Path) -> None:
    """The native build may call the compiler with a python3 that has no numpy."""
    py = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if py is None:
        pytest.skip("no system python3")
    src = stdlib_dir() / "brawlpit" / "commander_mod.prn"
    r = _cli(["compile", str(src), "--emit", "c", "-o", str(tmp_path / "cm")], python=py)
    if "requires" in r.stderr and "3.11" in r.stderr:
        pytest.skip("system python3 too old")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ diagnostics
OK_HEAD = "labels p = a | b\n"
MALFORMED: list[tuple[str, str, int, int, str]] = [
    # (name, source, line, col, message fragment)
    ("bad_char", "const A = 1 $ 2\n", 1, 13, "unexpected character '$'"),
    ("bad_number", "const A = 1.2.3\n", 1, 11, "malformed number"),
    ("missing_fallback", OK_HEAD + "fn f(x) -> p {\n  when x > 0 => a\n}\n", 4, 1,
     "no fallback"),
    ("rule_after_otherwise", OK_HEAD + "fn f(x) -> p {\n  otherwise => a\n  when x > 0 => b\n}\n",
     4, 3, "unreachable rule after 'otherwise'"),
    ("unknown_name", OK_HEAD + "fn f(x) -> p {\n  when y > 0 => a\n  otherwise => b\n}\n", 3, 8,
     "unknown name 'y'"),
    ("undeclared_label", OK_HEAD + "fn f(x) -> p {\n  when x > 0 => c\n  otherwise => b\n}\n",
     3, 17, "'c' is not a label of 'p'"),
    ("duplicate_label", "labels p = a | b | a\n", 1, 20, "duplicate label 'a'"),
    ("duplicate_input", OK_HEAD + "fn f(x, y, x) -> p {\n  otherwise => a\n}\n", 2, 12,
     "duplicate input 'x'"),
    ("duplicate_function", OK_HEAD + "fn f(x) -> p { otherwise => a }\n"
     "fn f(x) -> p { otherwise => b }\n", 3, 4, "duplicate function 'f'"),
    ("cond_not_bool", OK_HEAD + "fn f(x) -> p {\n  when x + 1 => a\n  otherwise => b\n}\n", 3, 8,
     "condition must be a bool"),
    ("bool_arith", OK_HEAD + "fn f(x) -> p {\n  when (x > 1) + 2 > 0 => a\n  otherwise => b\n}\n",
     3, 8, "'+' needs number operands, got a bool"),
    ("wrong_arity", OK_HEAD + "fn f(x) -> p {\n  when clip(x, 1) > 0 => a\n  otherwise => b\n}\n",
     3, 8, "wrong number of arguments to 'clip'"),
    ("unknown_function", OK_HEAD + "fn f(x) -> p {\n  when sqrt(x) > 0 => a\n  otherwise => b\n}\n",
     3, 8, "unknown function 'sqrt'"),
    ("chained_comparison", OK_HEAD + "fn f(x) -> p {\n  when 0 < x < 1 => a\n  otherwise => b\n}\n",
     3, 14, "chained comparison"),
    ("unterminated_body", OK_HEAD + "fn f(x) -> p {\n  when x > 0 => a\n", 4, 1,
     "unexpected end of file"),
    ("unknown_label_set", "fn f(x) -> q {\n  otherwise => a\n}\n", 1, 12, "unknown label set 'q'"),
    ("unknown_header_const", "const A = header(BP_NO_SUCH_THING)\n", 1, 18,
     "'BP_NO_SUCH_THING' is not a numeric #define"),
    ("nonfinite_const", "const A = 1 / 0\n", 1, 11, "evaluates to inf"),
    ("keyword_as_name", OK_HEAD + "fn let(x) -> p { otherwise => a }\n", 2, 4,
     "'let' is a keyword"),
    ("label_in_number_fn", OK_HEAD + "fn f(x) -> number {\n  otherwise => a\n}\n", 3, 16,
     "returns a number, but 'a' is a label"),
    ("missing_arrow", OK_HEAD + "fn f(x) -> p {\n  when x > 0 a\n  otherwise => b\n}\n", 3, 14,
     "expected '=>'"),
    ("reserved_c_name", OK_HEAD + "fn f(int) -> p { otherwise => a }\n", 2, 6,
     "reserved in C"),
    ("always_false", OK_HEAD + "fn f(x) -> p {\n  when 1 > 2 => a\n  otherwise => b\n}\n", 3, 8,
     "can never fire"),
    ("label_fn_in_expr", OK_HEAD + "fn g(x) -> p { otherwise => a }\n"
     "fn f(x) -> p {\n  when g(x) > 0 => a\n  otherwise => b\n}\n", 4, 8,
     "cannot be used in an expression"),
    ("empty_file", "# nothing here\n", 1, 1, "no functions"),
    ("top_level_junk", "when x > 0 => a\n", 1, 1, "at top level"),
]


@pytest.mark.parametrize("name,src,line,col,fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_source_gives_one_line_error(tmp_path: Path, name: str, src: str, line: int,
                                               col: int, fragment: str) -> None:
    path = tmp_path / f"{name}.prn"
    path.write_text(src)
    r = _cli(["compile", str(path), "--emit", "c", "-o", str(tmp_path / "out")])
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    m = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): error: (.+)$", lines[0])
    assert m, lines[0]
    assert (int(m.group(1)), int(m.group(2))) == (line, col), lines[0]
    assert fragment in lines[0]
    assert "(expected " in lines[0]
    assert not (tmp_path / "out.c").exists()


@pytest.mark.parametrize("kind", ["missing", "binary", "deep"])
def test_unreadable_or_pathological_input(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.prn"
    if kind == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "deep":
        path.write_text("const A = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    r = _cli(["check", str(path)])
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    # the deep one is reported where the nesting passes the limit: the 65th '('
    where = "1:75" if kind == "deep" else "1:1"
    assert len(lines) == 1 and lines[0].startswith(f"{path}:{where}: error: "), r.stderr


# ------------------------------------------------------------------ backends agree
def _f32_neighbours(v: float) -> list[float]:
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    out = []
    for b in (bits - 1, bits + 1):
        if 0 <= b < 2**32:
            f = struct.unpack("<f", struct.pack("<I", b))[0]
            if math.isfinite(f):
                out.append(f)
    return out


def _boundary_pool(fn_body: list[tuple]) -> list[float]:
    lits: set[float] = {0.0, 1.0}
    for item in fn_body:
        for part in item[1:3]:
            if isinstance(part, Node) and not isinstance(part, LabelRef):
                lits.update(x.value for x in walk(part) if isinstance(x, Num))
    pool: set[float] = set()
    for v in lits:
        for s in (v, -v):
            pool.add(s)
            pool.update((math.nextafter(s, math.inf), math.nextafter(s, -math.inf)))
            pool.update(_f32_neighbours(s))
    pool.add(-0.0)
    return sorted(pool)


def _build_lib(cc: list[str], mod, tmp_path: Path) -> ctypes.CDLL:
    h, c = mod.c_sources(mod.name)
    (tmp_path / f"{mod.name}.h").write_text(h)
    (tmp_path / f"{mod.name}.c").write_text(c)
    so = tmp_path / f"lib{mod.name}.so"
    subprocess.run([*cc, "-shared", "-fPIC", str(tmp_path / f"{mod.name}.c"), "-o", str(so),
                    "-lm"], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(so))


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _agree(cc: list[str], mod, tmp_path: Path, n: int, seed: int,
           specials: tuple[float, ...] = ()) -> tuple[int, dict[str, set[int]]]:
    lib = _build_lib(cc, mod, tmp_path)
    rng = random.Random(seed)
    checked = 0
    seen: dict[str, set[int]] = {}
    for name, fn in mod.checked.functions.items():
        cfn = getattr(lib, f"prn_{name}")
        cfn.argtypes = [ctypes.c_double] * len(fn.params)
        cfn.restype = ctypes.c_int if fn.labels is not None else ctypes.c_double
        pyfn = mod.functions[name]
        pool = _boundary_pool(fn.body)
        span = max(abs(v) for v in pool) * 2.0 + 1.0
        for _ in range(n):
            args = []
            zero_bias = rng.choice((0.0, 0.5, 0.8))  # flag-like inputs reach the deep rules
            for _p in fn.params:
                q = rng.random()
                if rng.random() < zero_bias:
                    args.append(rng.choice((0.0, 0.0, 1.0, 0.25)))
                elif q < 0.35:
                    args.append(rng.choice(pool))
                elif q < 0.45 and specials:
                    args.append(rng.choice(specials))
                elif q < 0.55:
                    args.append(float(rng.randrange(-5, 6)))
                else:
                    args.append(rng.uniform(-span, span))
            want, got = pyfn(*args), cfn(*args)
            if fn.labels is not None:
                assert want == got, (name, args, want, got)
                seen.setdefault(name, set()).add(got)
            else:
                assert _same(float(want), got), (name, args, want, got)
            checked += 1
    return checked, seen


@pytest.mark.parametrize("path", STDLIB, ids=[p.name for p in STDLIB])
def test_stdlib_python_and_c_agree(cc, tmp_path: Path, path: Path) -> None:
    """Property: every stdlib function, 10,000 random + boundary inputs, identical results."""
    mod = compile_file(path)
    checked, seen = _agree(cc, mod, tmp_path, 10_000, seed=1234)
    assert checked >= 10_000
    for name, labels in seen.items():  # the inputs reach most rules, not just the first
        assert len(labels) >= 0.75 * len(mod.checked.functions[name].labels or ()), (name, labels)


FEATURES = """
labels verdict = negative | zero | positive | weird
const K = 3 * 0.1            # folded: 0.30000000000000004 in both
const TPS = header(BP_TICK_HZ)

fn ratio(a, b) -> number {
    otherwise => a / b        # IEEE: x/0 = +-inf, 0/0 = NaN
}
fn shaped(a, b, c) -> number {
    let m = min(a, b) - max(b, c) * K
    let ok = not (a == b) and (c != 0 or a >= b)
    when ok and m <= 0 => clip(ratio(m, c), -1, 1) + abs(-c) / TPS * sign(b - a)
    when m > 1e3       => -m / (b - c)
    otherwise          => (a + b) * (c - a) / 7
}
fn classify(a, b) -> verdict {
    let v = shaped(a, b, a - b)
    when v != v   => weird
    when v < 0    => negative
    when v == 0   => zero
    when v > 0    => positive
    otherwise     => weird
}
"""


def test_language_features_agree_including_nan_inf(cc, tmp_path: Path) -> None:
    mod = compile_source(FEATURES, "features.prn")
    assert mod.checked.consts["K"] == 3 * 0.1
    specials = (math.inf, -math.inf, math.nan, 0.0, -0.0, 5e-324, 1.7976931348623157e308)
    checked, seen = _agree(cc, mod, tmp_path, 5_000, seed=99, specials=specials)
    assert checked >= 15_000 and seen["classify"] == {0, 1, 2, 3}
    assert math.isinf(mod.functions["ratio"](1.0, -0.0)) and mod.functions["ratio"](1.0, -0.0) < 0
    assert math.isnan(mod.functions["ratio"](0.0, 0.0))


def test_header_float_suffix_is_float32(tmp_path: Path) -> None:
    hdr = tmp_path / "h.h"
    hdr.write_text("#define BP_TENTH 0.1f\n#define BP_TENTH_D 0.1\n#define BP_N 0x10\n")
    mod = compile_source("const A = header(BP_TENTH)\nconst B = header(BP_TENTH_D)\n"
                         "const N = header(BP_N)\nfn f(x) -> number { otherwise => x * A }\n",
                         "h.prn", header=hdr)
    assert mod.checked.consts["A"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert mod.checked.consts["B"] == 0.1 and mod.checked.consts["N"] == 16.0
