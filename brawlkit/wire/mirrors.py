"""ctypes mirrors of the C structs, laid out from the headers' own declarations.

Why not type the fields again in Python: a struct layout is a constant too, and a second
hand-typed copy is how a mirror drifts from C.  So a mirror is a named, documented class
whose ``_fields_`` come from the ``typedef struct`` of the header that declares it
(:func:`brawlkit.wire.header.read_structs`)::

    @mirror("NetHeader")
    class NetHeader(ctypes.LittleEndianStructure):
        '''The 12 bytes every datagram starts with.'''

``packed`` (``#pragma pack(push, 1)``) structs get ``_pack_ = 1``; a member of another
struct type takes that struct's mirror (the one already declared, so ``snap.hdr`` is a
:class:`~brawlkit.wire.protocol.NetHeader`); a pointer is a ``c_void_p``.  Headers are
named relative to ``native/`` and read after ``include/brawlpit.h`` (or
``BRAWLKIT_HEADER``); a test compiles a C program printing every size and offset and
compares it with these mirrors.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from brawlkit.common.paths import header_path, native_dir
from brawlkit.wire.header import SCALARS, Field, StructDecl, read_structs

S = TypeVar("S", bound=type[ctypes.Structure])

#: every mirror declared so far, by C name: nested members resolve to these
_MIRRORS: dict[str, type[ctypes.Structure]] = {}


@cache
def declarations(headers: tuple[str, ...] = ()) -> dict[str, StructDecl]:
    """The struct declarations of ``include/brawlpit.h`` and then ``headers`` (paths
    relative to ``native/``), by name."""
    return read_structs(header_path(), *(native_dir() / h for h in headers))


def mirror(name: str, *headers: str) -> Callable[[S], S]:
    """Class decorator: give the decorated ctypes struct the layout of C's ``name``,
    declared in ``include/brawlpit.h`` or one of ``headers``."""
    def apply(cls: S) -> S:
        decls = declarations(tuple(headers))
        if name not in decls:
            raise ValueError(f"no 'typedef struct {{...}} {name};' in native/include/brawlpit.h "
                             f"{' '.join(headers)}")
        decl = decls[name]
        if decl.packed:
            cls._pack_ = 1  # before _fields_, as ctypes requires
        cls._fields_ = [(f.name, _ctype(f, decls, headers)) for f in decl.fields]
        _MIRRORS[name] = cls
        return cls
    return apply


def _ctype(f: Field, decls: dict[str, StructDecl], headers: tuple[str, ...]) -> Any:
    if f.ctype == "*":
        base: Any = ctypes.c_void_p
    elif f.ctype in decls:
        base = _MIRRORS.get(f.ctype) or _anonymous(f.ctype, headers)
    else:
        base = getattr(ctypes, SCALARS[f.ctype])
    return base if f.count is None else base * f.count


def _anonymous(name: str, headers: tuple[str, ...]) -> type[ctypes.Structure]:
    """A mirror for a nested struct no module declared (its own name, nothing else)."""
    base = ctypes.LittleEndianStructure if declarations(headers)[name].packed \
        else ctypes.Structure
    return mirror(name, *headers)(type(name, (base,), {}))
