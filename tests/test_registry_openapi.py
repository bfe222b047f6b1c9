"""The registry's OpenAPI document (``/openapi.json``, the API reference) stays what
the committed fixture says: route order, operation ids, tags, summaries, parameters,
request and response models, error responses.  A refactoring of the service must
leave it identical; a change of the API changes the fixture on purpose.

The fixture is the document with sorted keys, which loses the order of its mappings,
so it carries the order that /docs shows beside it: ``x-order`` lists every operation
(``METHOD path``, in the document's order) with its response codes in order.

Regenerate the fixture (only when the API is meant to change) with::

    python tests/test_registry_openapi.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent / "data" / "registry_openapi.json"
ORDER_KEY = "x-order"
REGENERATE = "python tests/test_registry_openapi.py"


def build_openapi(tmp: Path) -> dict[str, Any]:
    """The document of an app on a fresh SQLite registry in ``tmp`` (the document does
    not depend on what is stored, but building the app needs a real registry)."""
    from brawlkit.registry.auth import TokenSigner
    from brawlkit.registry.database import RegistryDB
    from brawlkit.registry.service import Registry, create_app
    from brawlkit.registry.store import Store

    db = RegistryDB(f"sqlite:///{tmp / 'registry.db'}")
    try:
        reg = Registry(db=db, store=Store(tmp), signer=TokenSigner.from_data_dir(tmp))
        return create_app(reg).openapi()
    finally:
        db.close()


def order_of(spec: dict[str, Any]) -> list[list[Any]]:
    """``[["GET /health", ["200"]], ...]``: what sorting the keys would hide."""
    return [[f"{method.upper()} {path}", list(op.get("responses", {}))]
            for path, item in spec["paths"].items() for method, op in item.items()]


def render(spec: dict[str, Any]) -> str:
    return json.dumps({**spec, ORDER_KEY: order_of(spec)}, sort_keys=True, indent=1,
                      ensure_ascii=False) + "\n"


def test_openapi_matches_fixture(tmp_path: Path) -> None:
    got = render(build_openapi(tmp_path))
    want = FIXTURE.read_text(encoding="utf-8")
    assert got == want, (
        f"the registry's OpenAPI document (or its {ORDER_KEY}: the order of the routes and "
        f"their responses) differs from tests/data/{FIXTURE.name}; if the API change is "
        f"intentional, regenerate the fixture with `{REGENERATE}` and commit it")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        text = render(build_openapi(Path(tmp)))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(text, encoding="utf-8")
    print(f"wrote {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
