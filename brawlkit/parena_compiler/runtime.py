"""PARENA evaluation semantics shared by constant folding and the Python backend.

The same text (``PY_RUNTIME``) is pasted into every generated Python module, and
``HELPERS`` is a namespace built from it, so folding, the in-process callable
and ``--emit py`` can never disagree.  The C backend mirrors each helper with
the same comparisons (``C_RUNTIME``).

* ``a / b`` is IEEE-754 division in both languages: x/0 = +-inf, 0/0 = NaN
  (Python raises on /0, hence ``_div``; a divisor that is a non-zero literal
  after folding compiles to a plain ``/``).
* ``min(a, b) = a if a < b else b``, ``max(a, b) = a if a > b else b``,
  ``clip(x, lo, hi) = lo if x < lo else (hi if x > hi else x)`` — explicit
  comparisons, not Python's builtins or C's fmin/fmax (NaN rules differ).
* ``sign(x) = -1 if x < 0 else (1 if x > 0 else 0)`` (0 for 0, -0 and NaN).
* ``abs`` is Python ``abs`` / C ``fabs`` (both clear the sign bit).
"""

from __future__ import annotations

from typing import Any

PY_RUNTIME = '''\
import math as _math

_inf = _math.inf
_nan = _math.nan
_abs = abs


def _div(a, b):
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return _math.nan
    return _math.copysign(_math.inf, a) * _math.copysign(1.0, b)


def _min(a, b):
    return a if a < b else b


def _max(a, b):
    return a if a > b else b


def _clip(x, lo, hi):
    return lo if x < lo else (hi if x > hi else x)


def _sign(x):
    return -1.0 if x < 0.0 else (1.0 if x > 0.0 else 0.0)
'''

C_RUNTIME = """\
static inline double prn_min(double a, double b) { return a < b ? a : b; }
static inline double prn_max(double a, double b) { return a > b ? a : b; }
static inline double prn_clip(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}
static inline double prn_sign(double x) { return x < 0.0 ? -1.0 : (x > 0.0 ? 1.0 : 0.0); }
"""

HELPERS: dict[str, Any] = {}
exec(compile(PY_RUNTIME, "<parena runtime>", "exec"), HELPERS)
