"""The registry's routes, one :class:`fastapi.APIRouter` per part of the API (its
OpenAPI tag):

* :mod:`~brawlkit.registry.routes.service` — ``/health``;
* :mod:`~brawlkit.registry.routes.auth` — ``/auth/token``;
* :mod:`~brawlkit.registry.routes.players` — sign-up, tickets, the player list;
* :mod:`~brawlkit.registry.routes.checkpoints` — upload, records, downloads, newest;
* :mod:`~brawlkit.registry.routes.active` — activate, disable, the active checkpoint;
* :mod:`~brawlkit.registry.routes.matches` — the match log and the ratings;
* :mod:`~brawlkit.registry.routes.page` — the league page (HTML, not in the API reference).

:data:`ROUTERS` is the order the app includes them in, which is the order of the
paths in ``/openapi.json`` and ``/docs``.
"""

from __future__ import annotations

from fastapi import APIRouter

from brawlkit.registry.routes import active, auth, checkpoints, matches, page, players, service

ROUTERS: tuple[APIRouter, ...] = (service.router, auth.router, players.router,
                                  checkpoints.router, active.router, matches.router,
                                  page.router)
