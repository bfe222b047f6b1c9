"""The numbers a JSON request to the registry may hold, and the 422 naming where one
does not fit.

Why: Python converts no integer of more than 4,300 digits (``ValueError: Exceeds the
limit (4300 digits)``, a guard against quadratic conversions), so a 5,000-digit
``ticks`` in ``POST /matches`` made FastAPI's body parser fail with a bare 400 "There
was an error parsing the body", and one in a checkpoint's ``settings`` a 400 with
Python's raw message — neither naming the item nor the field.  Here every JSON body
is parsed with number hooks that never fail: an integer that does not fit a signed
64-bit integer (:data:`INT_MIN` … :data:`INT_MAX`; more than :data:`MAX_INT_DIGITS`
digits is never converted at all) and a number whose double is not finite (``1e999``)
become an :class:`OutOfRange` marker; :func:`first_out_of_range` then finds where
the first one is, and the request is answered **422** naming it (``loc``: ``["body",
0, "ticks"]``, or ``metadata: settings.seed: ...`` for an upload).  Every route of the
API is a :class:`JSONNumbersRoute`, so the rule holds for every JSON body; the
fields' own ranges (``ticks`` in [0, 2³¹ − 1], ...) are checked after, by their
schemas, also with 422.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

#: the range of a JSON integer the registry reads: a signed 64-bit integer (what every
#: database column and every JSON reader — not only Python — holds exactly)
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
#: digits of an integer converted at all (one more than INT_MAX has): longer is out of
#: range unread, never handed to ``int()``
MAX_INT_DIGITS = 19


class OutOfRange:
    """A JSON number the registry does not read (its literal, shortened for messages)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        digits = sum(c.isdigit() for c in text)
        self.text = text if len(text) <= 40 else f"{text[:12]}...{text[-6:]} ({digits} digits)"

    def __repr__(self) -> str:
        return f"OutOfRange({self.text!r})"

    def why(self) -> str:
        """The message of a 422: what the number is and what fits."""
        return (f"number {self.text} is out of range: a JSON integer "
                f"must fit a signed 64-bit integer [{INT_MIN}, {INT_MAX}], any other number "
                "a finite double")


def _int(text: str) -> int | OutOfRange:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return OutOfRange(text)
    n = int(text)
    return n if INT_MIN <= n <= INT_MAX else OutOfRange(text)


def _float(text: str) -> float | OutOfRange:
    x = float(text)  # no digit limit and linear: only an int conversion is guarded
    return x if math.isfinite(x) else OutOfRange(text)


def loads(data: bytes | str, **kw: Any) -> Any:
    """``json.loads`` whose out-of-range numbers are :class:`OutOfRange` markers (it
    raises only what ``json.loads`` raises for text that is not JSON)."""
    return json.loads(data, parse_int=_int, parse_float=_float, **kw)


def first_out_of_range(obj: Any) -> tuple[tuple[int | str, ...], OutOfRange] | None:
    """(path, marker) of the first :class:`OutOfRange` in ``obj`` (depth first, in
    document order), or None.  Iterative: as deep as the parser let the document be."""
    stack: list[tuple[tuple[int | str, ...], Any]] = [((), obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, OutOfRange):
            return path, value
        if isinstance(value, dict):
            stack.extend(((*path, str(k)), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(value))))
    return None


def _is_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


class JSONNumbersRoute(APIRoute):
    """A route whose JSON body is parsed by :func:`loads` before FastAPI sees it: an
    out-of-range number is answered 422 naming where it is (``["body", *path]``), and
    the parsed body is what FastAPI validates (it is not parsed twice).  A body that is
    not JSON is left to FastAPI's own answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH") and _is_json(request):
                try:
                    body = await request.body()
                except ClientDisconnect:  # what FastAPI answers it too (nobody reads it)
                    return JSONResponse({"detail": "the client disconnected before its body "
                                                   "was complete"}, status_code=400)
                if body:
                    try:
                        obj = loads(body)
                    except (ValueError, RecursionError):
                        obj = None  # not JSON: FastAPI parses it again and says so
                    else:
                        bad = first_out_of_range(obj)
                        if bad is not None:
                            raise RequestValidationError([{
                                "type": "number_out_of_range", "loc": ("body", *bad[0]),
                                "msg": bad[1].why(), "input": None}])
                        request._json = obj  # what Request.json() returns from now on
            return await handler(request)

        return checked
