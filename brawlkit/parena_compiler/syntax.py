"""PARENA lexer, AST and recursive-descent parser (grammar: parena/README.md)."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from brawlkit.parena_compiler.errors import ParenaError

KEYWORDS = frozenset(
    {"labels", "const", "fn", "let", "when", "otherwise", "and", "or", "not", "true", "false",
     "number"}
)
# longest first so that "=>" wins over "=", "<=" over "<", ...
OPERATORS = ("=>", "->", "<=", ">=", "==", "!=", "(", ")", "{", "}", ",", "=", "|", "+", "-",
             "*", "/", "<", ">")
COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
#: levels of nesting an expression may have (parentheses, calls, '-', 'not'): far
#: more than anyone writes, far fewer than Python's recursion limit allows the
#: parser and the passes after it
MAX_NESTING = 64
#: the float32 range a literal must fit (the C code's and the .bpw's type)
FLT_MAX = 3.4028234663852886e38
FLT_TRUE_MIN = 1.401298464324817e-45

_NUMBER = re.compile(r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = re.compile(r"[ \t\r\f\v]+")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "name", "number", "kw", "op", "eof"
    text: str
    line: int
    col: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of file"
        if self.kind == "number":
            return f"number {self.text}"
        if self.kind == "name":
            return f"name '{self.text}'"
        return f"'{self.text}'"


def tokenize(src: str, file: str) -> list[Token]:
    toks: list[Token] = []
    line, col, i, n = 1, 1, 0, len(src)
    while i < n:
        ch = src[i]
        if ch == "\n":
            line, col, i = line + 1, 1, i + 1
            continue
        m = _SPACE.match(src, i)
        if m:
            col += m.end() - i
            i = m.end()
            continue
        if ch == "#":
            j = src.find("\n", i)
            j = n if j < 0 else j
            col += j - i
            i = j
            continue
        m = _NUMBER.match(src, i)
        if m:
            text = m.group(0)
            end = m.end()
            if end < n and (src[end].isalnum() or src[end] in "_."):
                raise ParenaError(file, line, col, f"malformed number '{text}{src[end]}'",
                                  "digits, '.', and an optional exponent like 1e-3")
            toks.append(Token("number", text, line, col))
            col += end - i
            i = end
            continue
        m = _NAME.match(src, i)
        if m:
            text = m.group(0)
            toks.append(Token("kw" if text in KEYWORDS else "name", text, line, col))
            col += m.end() - i
            i = m.end()
            continue
        for op in OPERATORS:
            if src.startswith(op, i):
                toks.append(Token("op", op, line, col))
                col += len(op)
                i += len(op)
                break
        else:
            shown = ch if ch.isprintable() else f"\\x{ord(ch):02x}"
            raise ParenaError(file, line, col, f"unexpected character '{shown}'",
                              "a name, a number, an operator or '#' comment")
    toks.append(Token("eof", "", line, col))
    return toks


# ------------------------------------------------------------------ AST
@dataclass(slots=True)
class Node:
    line: int
    col: int


@dataclass(slots=True)
class Num(Node):
    value: float


@dataclass(slots=True)
class BoolLit(Node):
    value: bool


@dataclass(slots=True)
class Name(Node):
    id: str


@dataclass(slots=True)
class Unary(Node):
    op: str  # "-" or "not"
    operand: Node


@dataclass(slots=True)
class Binary(Node):
    op: str  # + - * / < <= > >= == != and or
    left: Node
    right: Node


@dataclass(slots=True)
class Call(Node):
    func: str
    args: list[Node]


def walk(n: Node) -> Iterator[Node]:
    """Every node of the expression ``n``, itself first (pre-order)."""
    yield n
    if isinstance(n, Unary):
        yield from walk(n.operand)
    elif isinstance(n, Binary):
        yield from walk(n.left)
        yield from walk(n.right)
    elif isinstance(n, Call):
        for a in n.args:
            yield from walk(a)


@dataclass(slots=True)
class LabelsDecl(Node):
    name: str
    labels: list[Token]


@dataclass(slots=True)
class ConstDecl(Node):
    name: str
    expr: Node


@dataclass(slots=True)
class Let(Node):
    name: str
    expr: Node


@dataclass(slots=True)
class Rule(Node):
    cond: Node | None  # None = otherwise
    result: Node


@dataclass(slots=True)
class FnDecl(Node):
    name: str
    params: list[Token]
    returns: Token
    body: list[Let | Rule] = field(default_factory=list)
    end_line: int = 0
    end_col: int = 0


@dataclass(slots=True)
class ModuleAst:
    file: str
    items: list[LabelsDecl | ConstDecl | FnDecl]


# ------------------------------------------------------------------ parser
class Parser:
    def __init__(self, src: str, file: str):
        self.file = file
        self.toks = tokenize(src, file)
        self.i = 0
        self.depth = 0

    # helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, tok: Token, message: str, expected: str | None) -> ParenaError:
        return ParenaError(self.file, tok.line, tok.col, message, expected)

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.text == text)

    def expect(self, kind: str, text: str | None, what: str) -> Token:
        if not self.at(kind, text):
            raise self.error(self.tok, f"unexpected {self.tok.describe()}", what)
        return self.advance()

    def expect_name(self, what: str) -> Token:
        if self.tok.kind == "kw" and self.tok.text not in ("and", "or", "not"):
            raise self.error(self.tok, f"'{self.tok.text}' is a keyword, not a name", what)
        return self.expect("name", None, what)

    # grammar
    def parse_module(self) -> ModuleAst:
        items: list[LabelsDecl | ConstDecl | FnDecl] = []
        while not self.at("eof"):
            t = self.tok
            if self.at("kw", "labels"):
                items.append(self.parse_labels())
            elif self.at("kw", "const"):
                items.append(self.parse_const())
            elif self.at("kw", "fn"):
                items.append(self.parse_fn())
            else:
                raise self.error(t, f"unexpected {t.describe()} at top level",
                                 "'labels', 'const' or 'fn'")
        return ModuleAst(self.file, items)

    def parse_labels(self) -> LabelsDecl:
        kw = self.advance()
        name = self.expect_name("a label-set name after 'labels'")
        self.expect("op", "=", "'=' after the label-set name")
        labels = [self.expect_name("a label name")]
        while self.at("op", "|"):
            self.advance()
            labels.append(self.expect_name("a label name after '|'"))
        return LabelsDecl(kw.line, kw.col, name.text, labels)

    def parse_const(self) -> ConstDecl:
        self.advance()
        name = self.expect_name("a constant name after 'const'")
        self.expect("op", "=", "'=' after the constant name")
        return ConstDecl(name.line, name.col, name.text, self.parse_expr())

    def parse_fn(self) -> FnDecl:
        self.advance()
        name = self.expect_name("a function name after 'fn'")
        self.expect("op", "(", "'(' and the input names")
        params: list[Token] = []
        while not self.at("op", ")"):
            params.append(self.expect_name("an input name or ')'"))
            if self.at("op", ","):
                self.advance()
            elif not self.at("op", ")"):
                raise self.error(self.tok, f"unexpected {self.tok.describe()}", "',' or ')'")
        self.advance()
        self.expect("op", "->", "'->' and the return type (a label set or 'number')")
        if self.at("kw", "number"):
            returns = self.advance()
        else:
            returns = self.expect_name("a label-set name or 'number' after '->'")
        self.expect("op", "{", "'{' to open the function body")
        fn = FnDecl(name.line, name.col, name.text, params, returns)
        while not self.at("op", "}"):
            t = self.tok
            if self.at("kw", "let"):
                self.advance()
                n = self.expect_name("a name after 'let'")
                self.expect("op", "=", "'=' after the let name")
                fn.body.append(Let(n.line, n.col, n.text, self.parse_expr()))
            elif self.at("kw", "when"):
                self.advance()
                cond = self.parse_expr()
                self.expect("op", "=>", "'=>' after the rule's condition")
                fn.body.append(Rule(t.line, t.col, cond, self.parse_expr()))
            elif self.at("kw", "otherwise"):
                self.advance()
                self.expect("op", "=>", "'=>' after 'otherwise'")
                fn.body.append(Rule(t.line, t.col, None, self.parse_expr()))
            elif self.at("eof"):
                raise self.error(t, f"unexpected end of file in the body of '{name.text}'",
                                 "'}' to close the function body")
            else:
                raise self.error(t, f"unexpected {t.describe()} in a function body",
                                 "'let', 'when', 'otherwise' or '}'")
        end = self.advance()
        fn.end_line, fn.end_col = end.line, end.col
        return fn

    # expressions, lowest precedence first
    def parse_expr(self) -> Node:
        return self.parse_or()

    def parse_or(self) -> Node:
        left = self.parse_and()
        while self.at("kw", "or"):
            self.advance()
            left = Binary(left.line, left.col, "or", left, self.parse_and())
        return left

    def parse_and(self) -> Node:
        left = self.parse_not()
        while self.at("kw", "and"):
            self.advance()
            left = Binary(left.line, left.col, "and", left, self.parse_not())
        return left

    def parse_not(self) -> Node:
        if self.at("kw", "not"):
            t = self.advance()
            with self.nested(t):
                return Unary(t.line, t.col, "not", self.parse_not())
        return self.parse_cmp()

    def parse_cmp(self) -> Node:
        left = self.parse_add()
        if self.tok.kind == "op" and self.tok.text in COMPARISONS:
            t = self.advance()
            left = Binary(left.line, left.col, t.text, left, self.parse_add())
            if self.tok.kind == "op" and self.tok.text in COMPARISONS:
                raise self.error(self.tok, "chained comparison",
                                 "'and' between two comparisons, e.g. a < b and b < c")
        return left

    def parse_add(self) -> Node:
        left = self.parse_mul()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            t = self.advance()
            left = Binary(left.line, left.col, t.text, left, self.parse_mul())
        return left

    def parse_mul(self) -> Node:
        left = self.parse_unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/"):
            t = self.advance()
            left = Binary(left.line, left.col, t.text, left, self.parse_unary())
        return left

    def parse_unary(self) -> Node:
        if self.at("op", "-"):
            t = self.advance()
            with self.nested(t):
                return Unary(t.line, t.col, "-", self.parse_unary())
        return self.parse_primary()

    @contextmanager
    def nested(self, tok: Token) -> Iterator[None]:
        """One more level of nesting, opened at ``tok`` (a '(', a call, '-', 'not'):
        past :data:`MAX_NESTING` levels, an error at that token — where the nesting
        is — instead of Python's recursion limit somewhere in the compiler."""
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise self.error(tok, f"expression nested too deeply (more than {MAX_NESTING} "
                                 "levels of parentheses, calls, '-' or 'not')",
                                 "a flatter expression: name the parts with 'const' or a "
                                 "function")
            yield
        finally:
            self.depth -= 1

    def number(self, t: Token) -> Num:
        """The literal ``t`` as a float32 would hold it: a literal that does not fit
        (``1e400``, 5,000 digits, ``1e-60``, which would become 0) is an error at it,
        not a silent ``inf`` or 0 in the compiled code."""
        value = float(t.text)
        shown = t.text if len(t.text) <= 24 else f"{t.text[:12]}...({len(t.text)} characters)"
        try:
            if math.isinf(value):  # struct packs an inf without a word
                raise OverflowError
            narrowed = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            raise self.error(t, f"number {shown} does not fit a float32 (at most "
                             f"{FLT_MAX:.7g} in magnitude)", None) from None
        if narrowed == 0.0 and value != 0.0:
            raise self.error(t, f"number {shown} is too small for a float32 (it would be 0; "
                             f"the smallest is about {FLT_TRUE_MIN:.3g})", None)
        return Num(t.line, t.col, value)

    def parse_primary(self) -> Node:
        t = self.tok
        if t.kind == "number":
            self.advance()
            return self.number(t)
        if self.at("kw", "true") or self.at("kw", "false"):
            self.advance()
            return BoolLit(t.line, t.col, t.text == "true")
        if t.kind == "name":
            self.advance()
            if self.at("op", "("):
                self.advance()
                args: list[Node] = []
                while not self.at("op", ")"):
                    with self.nested(t):
                        args.append(self.parse_expr())
                    if self.at("op", ","):
                        self.advance()
                    elif not self.at("op", ")"):
                        raise self.error(self.tok, f"unexpected {self.tok.describe()} in the "
                                         f"arguments of '{t.text}'", "',' or ')'")
                self.advance()
                return Call(t.line, t.col, t.text, args)
            return Name(t.line, t.col, t.text)
        if self.at("op", "("):
            self.advance()
            with self.nested(t):
                e = self.parse_expr()
            self.expect("op", ")", "')' to close the parenthesis")
            e.line, e.col = t.line, t.col  # a parenthesised expression starts at '('
            return e
        raise self.error(t, f"unexpected {t.describe()}",
                         "an expression: a number, a name, a call, '-', 'not' or '('")


def parse(src: str, file: str) -> ModuleAst:
    return Parser(src, file).parse_module()
