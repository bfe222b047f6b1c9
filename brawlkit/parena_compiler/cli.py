"""``python -m brawlkit.parena_compiler compile FILE --emit c|py [-o OUT_BASENAME] [--header H]``.

Exit status: 0 ok, 1 compile error (one line ``FILE:LINE:COL: error: ...`` on
stderr), 2 usage error.  Never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brawlkit.parena_compiler import _read, check_source
from brawlkit.parena_compiler.emit_c import emit_c
from brawlkit.parena_compiler.emit_py import emit_python
from brawlkit.parena_compiler.errors import ParenaError


def build_parser() -> argparse.ArgumentParser:
    """The compiler's parser; its sub-parsers are what `python -m brawlkit --help` lists."""
    ap = argparse.ArgumentParser(prog="parena", description="PARENA decision-language compiler")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a .prn file to C or Python")
    c.add_argument("file")
    c.add_argument("--emit", choices=("c", "py"), required=True)
    c.add_argument("-o", "--out", metavar="OUT_BASENAME",
                   help="write OUT.c + OUT.h (c) or OUT.py (py); default: stdout")
    c.add_argument("--header", type=Path, help="C header for header(NAME) (default brawlpit.h)")
    k = sub.add_parser("check", help="parse and check only")
    k.add_argument("file")
    k.add_argument("--header", type=Path)
    return ap


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:

        src_path = Path(args.file)
        mod = check_source(_read(src_path), args.file, args.header)
        if args.cmd == "check":
            return 0
        if args.emit == "py":
            text = emit_python(mod)
            if args.out:
                _write(Path(args.out + ".py"), text)
            else:
                sys.stdout.write(text)
        else:
            base = Path(args.out).name if args.out else mod.name
            h, c = emit_c(mod, base)
            if args.out:
                _write(Path(args.out + ".h"), h)
                _write(Path(args.out + ".c"), c)
            else:
                sys.stdout.write(h + "\n" + c)
        return 0
    except ParenaError as e:
        print(e.format(), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{args.file}:1:1: error: expression nested too deeply "
              "(expected fewer nested parentheses)", file=sys.stderr)
        return 1
    except Exception as e:  # never a traceback from the CLI
        msg = " ".join(f"{type(e).__name__}: {e}".splitlines())
        print(f"{args.file}:1:1: error: internal compiler error: {msg}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
