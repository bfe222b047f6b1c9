"""The ``/move`` contract: named moves any model can play BRAWLPIT with (docs/move.md).

* :mod:`~brawlkit.policy_server.moves` — the declared moves (one declaration for the
  server, the worker and the docs table).
* :mod:`~brawlkit.policy_server.policy` — the request model and a PPO checkpoint as a
  chooser of moves.
* :mod:`~brawlkit.policy_server.app` — the FastAPI app (``POST /move``, ``GET /moves``,
  ``GET /info``).
* :mod:`~brawlkit.policy_server.player` — the worker playing matches through an endpoint.
* :mod:`~brawlkit.policy_server.cli` — ``python -m brawlkit policy serve|play|train``.
"""
