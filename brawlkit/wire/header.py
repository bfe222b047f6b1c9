"""The one reader of ``#define NAME literal`` lines in a C header.

Two consumers, one parser: :mod:`brawlkit.wire.constants` (the ``BP_*`` values
Python uses, so no constant is typed twice) and the PARENA compiler's
``header(NAME)`` (which must fold a constant to exactly what C sees).  That is
why each value records whether it carried C's float suffix: ``0.1f`` in C is the
float32 nearest to 0.1, and :attr:`Define.c_value` is that float32 widened to a
double — what ``(double)BP_X`` is in C.

Standard library only: the native build runs the PARENA compiler with any
Python, before a virtualenv exists.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.+?)\s*(?:/\*.*|//.*)?$")
_INT = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?[lL]{0,2}$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?$")


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32, widened back to a double."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


@dataclass(frozen=True)
class Define:
    """One ``#define NAME value`` line; ``value`` is None when it is not a plain literal."""

    name: str
    text: str
    line: int
    value: int | float | None
    float32: bool = False

    @property
    def c_value(self) -> int | float | None:
        """The value as C computes with it (a ``f``-suffixed literal is a float32)."""
        if isinstance(self.value, float) and self.float32:
            return f32(self.value)
        return self.value


def _literal(raw: str) -> tuple[int | float | None, bool]:
    if raw.startswith("(") and raw.endswith(")"):
        raw = raw[1:-1].strip()
    if _INT.match(raw):
        return int(raw.rstrip("uUlL"), 0), False
    if _FLOAT.match(raw):
        if raw[-1] in "fF":
            return float(raw[:-1]), True
        return float(raw), False
    return None, False


def read_defines(path: str | Path) -> dict[str, Define]:
    """Every ``#define`` of ``path``, by name (OSError if unreadable)."""
    out: dict[str, Define] = {}
    text = Path(path).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _DEFINE.match(line)
        if m:
            raw = m.group(2).strip()
            value, is_f32 = _literal(raw)
            out[m.group(1)] = Define(m.group(1), raw, lineno, value, is_f32)
    return out


# ----------------------------------------------------------------- struct layouts
#: C scalar types the headers use in their structs, as ctypes types' names
SCALARS = {
    "uint8_t": "c_uint8", "int8_t": "c_int8", "uint16_t": "c_uint16", "int16_t": "c_int16",
    "uint32_t": "c_uint32", "int32_t": "c_int32", "uint64_t": "c_uint64", "int64_t": "c_int64",
    "float": "c_float", "double": "c_double", "char": "c_char", "size_t": "c_size_t",
    "int": "c_int",
}
_TYPEDEF = re.compile(r"typedef\s+struct\s*(?:\w+\s*)?\{(?P<body>[^{}]*)\}\s*(?P<name>\w+)\s*;")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_MEMBER = re.compile(r"^(?P<type>(?:const\s+)?\w+)\s+(?P<decls>[^;]+)$")
_DECL = re.compile(r"^(?P<ptr>\*?)\s*(?P<name>\w+)\s*(?:\[(?P<dim>[^\]]+)\])?$")


@dataclass(frozen=True)
class Field:
    """One member of a C struct: its name, C type (a scalar of :data:`SCALARS`, another
    struct's name, or ``"*"`` for any pointer) and, for an array, its length."""

    name: str
    ctype: str
    count: int | None = None


@dataclass(frozen=True)
class StructDecl:
    """A ``typedef struct { ... } Name;`` of a header, in declaration order; ``packed``
    when it lies inside ``#pragma pack(push, 1)`` ... ``#pragma pack(pop)``."""

    name: str
    fields: tuple[Field, ...]
    packed: bool
    line: int


def read_structs(*paths: str | Path) -> dict[str, StructDecl]:
    """Every struct typedef of ``paths`` (read in order, so a later header may use an
    earlier one's structs and defines in its array sizes), by name.

    The headers keep their structs in the plain subset this reads — one or more
    declarators per member line, scalar or struct or pointer types, array sizes that
    are sums of literals, ``BP_*`` defines and ``sizeof(Struct)`` — and a struct that
    leaves it is a ``ValueError`` naming the file and line, so the Python mirrors can
    never silently drift from C (the layouts are also checked against a compiled C
    offset printer by the tests)."""
    structs: dict[str, StructDecl] = {}
    consts: dict[str, int] = {}
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        consts.update({n: int(d.value) for n, d in read_defines(path).items()
                       if isinstance(d.value, int)})
        for m in _TYPEDEF.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()]
            packed = before.rfind("#pragma pack(push, 1)") > before.rfind("#pragma pack(pop)")
            fields = _members(m["body"], structs, consts, f"{path}:{line}")
            structs[m["name"]] = StructDecl(m["name"], fields, packed, line)
    return structs


def _members(body: str, structs: dict[str, StructDecl], consts: dict[str, int],
             where: str) -> tuple[Field, ...]:
    out: list[Field] = []
    for raw in _COMMENT.sub("", body).split(";"):
        stmt = " ".join(raw.split())
        if not stmt:
            continue
        m = _MEMBER.match(stmt)
        if m is None:
            raise ValueError(f"{where}: struct member {stmt!r} is outside the subset "
                             "brawlkit reads (type name[, name][N];)")
        ctype = m["type"].replace("const ", "")
        for decl in m["decls"].split(","):
            d = _DECL.match(decl.strip())
            if d is None or (not d["ptr"] and ctype not in SCALARS and ctype not in structs):
                raise ValueError(f"{where}: cannot read member {decl.strip()!r} of type "
                                 f"{ctype!r}")
            count = _dim(d["dim"], structs, consts, where) if d["dim"] else None
            out.append(Field(d["name"], "*" if d["ptr"] else ctype, count))
    return tuple(out)


def _dim(expr: str, structs: dict[str, StructDecl], consts: dict[str, int], where: str) -> int:
    """An array size: a sum of integer literals, defines and ``sizeof(Struct)``."""
    total = 0
    for term in (t.strip() for t in expr.split("+")):
        s = re.fullmatch(r"sizeof\s*\(\s*(\w+)\s*\)", term)
        if s and s[1] in structs:
            total += struct_size(structs[s[1]], structs)
        elif term in consts:
            total += consts[term]
        elif _INT.match(term):
            total += int(term.rstrip("uUlL"), 0)
        else:
            raise ValueError(f"{where}: array size term {term!r} is not a literal, a define "
                             "or sizeof(a struct read before)")
    return total


_SCALAR_BYTES = {"c_uint8": 1, "c_int8": 1, "c_char": 1, "c_uint16": 2, "c_int16": 2,
                 "c_uint32": 4, "c_int32": 4, "c_float": 4, "c_int": 4, "c_uint64": 8,
                 "c_int64": 8, "c_double": 8, "c_size_t": 8}


def struct_size(decl: StructDecl, structs: dict[str, StructDecl]) -> int:
    """``sizeof`` of a struct with C's alignment rules (none when packed), on LP64."""
    size, align = 0, 1
    for f in decl.fields:
        if f.ctype == "*":
            fsize = falign = 8
        elif f.ctype in structs:
            inner = structs[f.ctype]
            fsize, falign = struct_size(inner, structs), _alignment(inner, structs)
        else:
            fsize = falign = _SCALAR_BYTES[SCALARS[f.ctype]]
        falign = 1 if decl.packed else falign
        size = -(-size // falign) * falign + fsize * (f.count or 1)
        align = max(align, falign)
    return -(-size // align) * align


def _alignment(decl: StructDecl, structs: dict[str, StructDecl]) -> int:
    if decl.packed:
        return 1
    out = 1
    for f in decl.fields:
        if f.ctype == "*":
            out = max(out, 8)
        elif f.ctype in structs:
            out = max(out, _alignment(structs[f.ctype], structs))
        else:
            out = max(out, _SCALAR_BYTES[SCALARS[f.ctype]])
    return out
