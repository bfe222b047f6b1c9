"""PARENA checker: names, types, arity, labels, fallbacks; folds constants.

Produces a :class:`CheckedModule` whose expressions are the AST nodes with every
constant (``const`` names, ``header(...)``, constant sub-expressions) folded to
a literal, so both emitters print the very same double for each of them.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass, field
from pathlib import Path

from brawlkit.parena_compiler.errors import ParenaError
from brawlkit.parena_compiler.header import default_header, read_header
from brawlkit.parena_compiler.runtime import HELPERS
from brawlkit.parena_compiler.syntax import (
    Binary,
    BoolLit,
    Call,
    ConstDecl,
    FnDecl,
    LabelsDecl,
    Let,
    ModuleAst,
    Name,
    Node,
    Num,
    Rule,
    Token,
    Unary,
)

NUM, BOOL = "number", "bool"
BUILTIN_ARITY = {"abs": 1, "sign": 1, "min": 2, "max": 2, "clip": 3, "header": 1}
ARITH = frozenset({"+", "-", "*", "/"})
ORDER = frozenset({"<", "<=", ">", ">="})
EQUALITY = frozenset({"==", "!="})

C_RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Bool _Complex _Imaginary bool true false
    NAN INFINITY HUGE_VAL NULL main errno""".split()
)


@dataclass(slots=True)
class LabelRef(Node):
    index: int
    label: str


@dataclass(slots=True)
class CheckedFn:
    name: str
    params: list[str]
    returns: str  # "number" or a label-set name
    labels: tuple[str, ...] | None
    # ("let", name, expr, type) or ("rule", cond | None, result)
    body: list[tuple] = field(default_factory=list)


@dataclass(slots=True)
class CheckedModule:
    name: str
    file: str
    label_sets: dict[str, tuple[str, ...]]
    consts: dict[str, float | bool]
    functions: dict[str, CheckedFn]


def _reserved_reason(name: str) -> str | None:
    if name.startswith("_") or name.lower().startswith("prn_"):
        return "names starting with '_' or 'prn_' are reserved for generated code"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"'{name}' is a Python keyword"
    if name in C_RESERVED:
        return f"'{name}' is reserved in C"
    if name in BUILTIN_ARITY:
        return f"'{name}' is a builtin function"
    return None


class Checker:
    def __init__(self, ast: ModuleAst, header: Path | None):
        self.ast = ast
        self.file = ast.file
        self.header = header
        self.label_sets: dict[str, tuple[str, ...]] = {}
        self.consts: dict[str, float | bool] = {}
        self.functions: dict[str, CheckedFn] = {}
        self.defined: dict[str, tuple[int, int, str]] = {}  # global name -> (line, col, kind)

    def err(self, node: Node | Token, message: str, expected: str | None = None) -> ParenaError:
        return ParenaError(self.file, node.line, node.col, message, expected)

    def declare(self, scope: dict[str, tuple[int, int, str]], name: str, at: Node | Token,
                kind: str) -> None:
        reason = _reserved_reason(name)
        if reason:
            raise self.err(at, f"cannot use '{name}' as a {kind} name: {reason}",
                           "another name")
        for sc in (self.defined, scope):
            prev = sc.get(name)
            if prev is None:
                continue
            raise self.err(at, f"duplicate {kind} '{name}' (first defined as a {prev[2]} at "
                           f"{prev[0]}:{prev[1]})", "a new, unique name")
        scope[name] = (at.line, at.col, kind)

    # ---------------------------------------------------------------- module
    def run(self) -> CheckedModule:
        for item in self.ast.items:
            if isinstance(item, LabelsDecl):
                self.check_labels(item)
            elif isinstance(item, ConstDecl):
                self.check_const(item)
            else:
                self.check_fn(item)
        if not self.functions:
            raise ParenaError(self.file, 1, 1, "no functions in this file",
                              "at least one 'fn NAME(inputs) -> TYPE { ... }'")
        return CheckedModule(Path(self.file).stem, self.file, self.label_sets, self.consts,
                             self.functions)

    def check_labels(self, d: LabelsDecl) -> None:
        self.declare(self.defined, d.name, d, "label set")
        upper = {n.upper() for n in self.label_sets}
        if d.name.upper() in upper:
            raise self.err(d, f"label set '{d.name}' differs from another only in case",
                           "a new, unique name")
        seen: dict[str, Token] = {}
        for t in d.labels:
            reason = _reserved_reason(t.text)
            if reason:
                raise self.err(t, f"cannot use '{t.text}' as a label: {reason}", "another name")
            prev = seen.get(t.text.upper())
            if prev is not None:
                raise self.err(t, f"duplicate label '{t.text}' in '{d.name}' (first at "
                               f"{prev.line}:{prev.col})", "each label once")
            seen[t.text.upper()] = t
        self.label_sets[d.name] = tuple(t.text for t in d.labels)

    def check_const(self, d: ConstDecl) -> None:
        expr, _ = self.expr(d.expr, {}, {})
        if not isinstance(expr, (Num, BoolLit)):
            raise self.err(d.expr, f"constant '{d.name}' is not a constant expression",
                           "numbers, other constants and header(...) only")
        self.declare(self.defined, d.name, d, "constant")
        self.consts[d.name] = expr.value

    def check_fn(self, d: FnDecl) -> None:
        self.declare(self.defined, d.name, d, "function")
        del self.defined[d.name]  # visible only after its body (no recursion)
        scope: dict[str, tuple[int, int, str]] = {}
        types: dict[str, str] = {}
        for p in d.params:
            self.declare(scope, p.text, p, "input")
            types[p.text] = NUM
        ret = d.returns.text
        labels: tuple[str, ...] | None = None
        if d.returns.kind != "kw":
            if ret not in self.label_sets:
                raise self.err(d.returns, f"unknown label set '{ret}'",
                               "'number' or a label set declared above with 'labels'")
            labels = self.label_sets[ret]
        fn = CheckedFn(d.name, [p.text for p in d.params], ret, labels)
        closed: Node | None = None  # the rule after which nothing can run
        for item in d.body:
            if closed is not None:
                kind = "rule" if isinstance(item, Rule) else "let"
                raise self.err(item, f"unreachable {kind} after 'otherwise' (at {closed.line}:"
                               f"{closed.col})", "'}' — the fallback must be the last rule")
            if isinstance(item, Let):
                e, t = self.expr(item.expr, scope, types)
                self.declare(scope, item.name, item, "let")
                types[item.name] = t
                fn.body.append(("let", item.name, e, t))
                continue
            cond: Node | None = None
            if item.cond is not None:
                cond, t = self.expr(item.cond, scope, types)
                if t != BOOL:
                    raise self.err(item.cond, "type error: a rule's condition must be a bool, "
                                   "got a number", "a comparison such as x > 0")
                if isinstance(cond, BoolLit):
                    if not cond.value:
                        raise self.err(item.cond, "this rule can never fire (its condition is "
                                       "always false)", "a condition that depends on an input")
                    raise self.err(item.cond, "this rule always fires (its condition is always "
                                   "true), so nothing after it is reachable",
                                   "'otherwise => ...' for the fallback")
            else:
                closed = item
            fn.body.append(("rule", cond, self.result(item.result, fn, scope, types)))
        if closed is None:
            raise ParenaError(self.file, d.end_line, d.end_col,
                              f"function '{d.name}' has no fallback rule",
                              "'otherwise => ...' as the last rule")
        self.functions[d.name] = fn
        self.defined[d.name] = (d.line, d.col, "function")

    def result(self, node: Node, fn: CheckedFn, scope: dict, types: dict[str, str]) -> Node:
        if fn.labels is not None:
            if isinstance(node, Name) and node.id in fn.labels:
                return LabelRef(node.line, node.col, fn.labels.index(node.id), node.id)
            choices = "one of " + ", ".join(fn.labels)
            if isinstance(node, Name) and node.id not in types:
                raise self.err(node, f"'{node.id}' is not a label of '{fn.returns}'", choices)
            raise self.err(node, f"function '{fn.name}' returns a '{fn.returns}' label, not a "
                           "value", choices)
        if isinstance(node, Name) and node.id not in types and node.id not in self.consts:
            for set_name, labels in self.label_sets.items():
                if node.id in labels:
                    raise self.err(node, f"function '{fn.name}' returns a number, but "
                                   f"'{node.id}' is a label of '{set_name}'", "a number")
        e, t = self.expr(node, scope, types)
        if t != NUM:
            raise self.err(node, f"type error: function '{fn.name}' returns a number, got a "
                           "bool", "a numeric expression")
        return e

    # ---------------------------------------------------------------- expressions
    def expr(self, n: Node, scope: dict, types: dict[str, str]) -> tuple[Node, str]:
        if isinstance(n, Num):
            return n, NUM
        if isinstance(n, BoolLit):
            return n, BOOL
        if isinstance(n, Name):
            if n.id in types:
                return n, types[n.id]
            if n.id in self.consts:
                v = self.consts[n.id]
                if isinstance(v, bool):
                    return BoolLit(n.line, n.col, v), BOOL
                return Num(n.line, n.col, v), NUM
            if n.id in self.functions:
                raise self.err(n, f"'{n.id}' is a function", f"a call: {n.id}(...)")
            for set_name, labels in self.label_sets.items():
                if n.id in labels:
                    raise self.err(n, f"label '{n.id}' of '{set_name}' used as a value",
                                   "a number or bool; labels are only results of rules")
            raise self.err(n, f"unknown name '{n.id}'",
                           "an input, a let, or a constant defined above")
        if isinstance(n, Unary):
            e, t = self.expr(n.operand, scope, types)
            want = NUM if n.op == "-" else BOOL
            if t != want:
                raise self.err(n, f"type error: '{n.op}' needs a {want}, got a {t}", f"a {want}")
            if isinstance(e, Num):
                return Num(n.line, n.col, -e.value), NUM
            if isinstance(e, BoolLit):
                return BoolLit(n.line, n.col, not e.value), BOOL
            return Unary(n.line, n.col, n.op, e), t
        if isinstance(n, Binary):
            left, lt = self.expr(n.left, scope, types)
            right, rt = self.expr(n.right, scope, types)
            if n.op in ("and", "or"):
                want, out = BOOL, BOOL
            elif n.op in ARITH:
                want, out = NUM, NUM
            elif n.op in ORDER:
                want, out = NUM, BOOL
            else:  # == !=
                want, out = lt, BOOL
            for side, t in ((n.left, lt), (n.right, rt)):
                if t != want:
                    raise self.err(side, f"type error: '{n.op}' needs {want} operands, got a "
                                   f"{t}", f"a {want}")
            node = Binary(n.line, n.col, n.op, left, right)
            return self.fold(node), out
        if isinstance(n, Call):
            return self.call(n, scope, types)
        raise self.err(n, "unsupported expression")  # pragma: no cover

    def call(self, n: Call, scope: dict, types: dict[str, str]) -> tuple[Node, str]:
        if n.func in BUILTIN_ARITY:
            arity = BUILTIN_ARITY[n.func]
        elif n.func in self.functions:
            fn = self.functions[n.func]
            if fn.labels is not None:
                raise self.err(n, f"function '{n.func}' returns a '{fn.returns}' label and "
                               "cannot be used in an expression", "a number function")
            arity = len(fn.params)
        else:
            raise self.err(n, f"unknown function '{n.func}'",
                           "abs, sign, min, max, clip, header, or a number function defined above")
        if len(n.args) != arity:
            raise self.err(n, f"wrong number of arguments to '{n.func}': got {len(n.args)}",
                           f"{arity} argument{'s' if arity != 1 else ''}")
        if n.func == "header":
            return self.header_const(n), NUM
        args: list[Node] = []
        for a in n.args:
            e, t = self.expr(a, scope, types)
            if t != NUM:
                raise self.err(a, f"type error: argument of '{n.func}' must be a number, got "
                               "a bool", "a number")
            args.append(e)
        return self.fold(Call(n.line, n.col, n.func, args)), NUM

    def header_const(self, n: Call) -> Num:
        arg = n.args[0]
        if not isinstance(arg, Name):
            raise self.err(arg, "header() takes the name of a #define",
                           "a name such as BP_STAGE_HALF_WIDTH")
        path = self.header or default_header()
        try:
            defines = read_header(path)
        except OSError as e:
            raise self.err(n, f"cannot read header {path}: {e.strerror or e}",
                           "an existing C header (--header PATH)") from None
        if arg.id not in defines:
            raise self.err(arg, f"'{arg.id}' is not a numeric #define in {path.name}",
                           "a '#define NAME literal' of the header")
        return Num(n.line, n.col, defines[arg.id])

    def fold(self, n: Binary | Call) -> Node:
        """Evaluate a node whose operands are all literals (IEEE double, like C)."""
        if isinstance(n, Binary):
            a, b = n.left, n.right
            if not isinstance(a, (Num, BoolLit)) or not isinstance(b, (Num, BoolLit)):
                return n
            x, y = a.value, b.value
            op = n.op
            if op == "and":
                return BoolLit(n.line, n.col, bool(x) and bool(y))
            if op == "or":
                return BoolLit(n.line, n.col, bool(x) or bool(y))
            if op in ("<", "<=", ">", ">=", "==", "!="):
                r = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y,
                     "!=": x != y}[op]
                return BoolLit(n.line, n.col, r)
            fx, fy = float(x), float(y)
            v = {"+": lambda: fx + fy, "-": lambda: fx - fy, "*": lambda: fx * fy,
                 "/": lambda: HELPERS["_div"](fx, fy)}[op]()
            return self.num(n, v)
        if not all(isinstance(a, Num) for a in n.args) or n.func not in BUILTIN_ARITY:
            return n
        vals = [a.value for a in n.args]  # type: ignore[attr-defined]
        fn = {"abs": HELPERS["_abs"], "sign": HELPERS["_sign"], "min": HELPERS["_min"],
              "max": HELPERS["_max"], "clip": HELPERS["_clip"]}[n.func]
        return self.num(n, float(fn(*vals)))

    def num(self, n: Node, v: float) -> Num:
        if not math.isfinite(v):
            raise self.err(n, f"constant expression evaluates to {v}", "a finite number")
        return Num(n.line, n.col, v)


def check(ast: ModuleAst, header: Path | None = None) -> CheckedModule:
    return Checker(ast, header).run()
