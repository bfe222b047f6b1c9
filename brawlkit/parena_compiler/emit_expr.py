"""One expression printer for both backends: a :class:`Dialect` says how each
backend spells literals, operators and calls; the structure — every expression
fully parenthesised, in the source's order — is written once, which is what
keeps the Python and C results bit-identical."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from brawlkit.parena_compiler.syntax import Binary, BoolLit, Call, Name, Node, Num, Unary


@dataclass(frozen=True)
class Dialect:
    """How one backend spells what the printer emits."""

    nan: str
    inf: str
    true: str
    false: str
    not_op: str
    #: built-in function -> backend name; other calls get ``call_prefix``
    calls: dict[str, str]
    call_prefix: str = ""
    #: binary operator -> backend spelling (others as written)
    ops: dict[str, str] = field(default_factory=dict)
    #: a division whose divisor is not a non-zero literal goes through this
    #: helper (Python raises on / 0; C gives IEEE inf/NaN, which the helper mirrors)
    safe_div: str | None = None

    def num(self, v: float) -> str:
        if math.isnan(v):
            return self.nan
        if math.isinf(v):
            return self.inf if v > 0 else f"(-{self.inf})"
        text = repr(float(v))
        return f"({text})" if text.startswith("-") else text

    def expr(self, n: Node) -> str:
        if isinstance(n, Num):
            return self.num(n.value)
        if isinstance(n, BoolLit):
            return self.true if n.value else self.false
        if isinstance(n, Name):
            return n.id
        if isinstance(n, Unary):
            return f"(-{self.expr(n.operand)})" if n.op == "-" else f"({self.not_op}{self.expr(n.operand)})"
        if isinstance(n, Binary):
            if (self.safe_div and n.op == "/"
                    and not (isinstance(n.right, Num) and n.right.value != 0.0)):
                return f"{self.safe_div}({self.expr(n.left)}, {self.expr(n.right)})"
            return f"({self.expr(n.left)} {self.ops.get(n.op, n.op)} {self.expr(n.right)})"
        if isinstance(n, Call):
            name = self.calls.get(n.func, f"{self.call_prefix}{n.func}")
            return f"{name}({', '.join(self.expr(a) for a in n.args)})"
        raise TypeError(f"cannot emit {n!r}")  # pragma: no cover
