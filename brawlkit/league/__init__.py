"""The league's data model: who plays whom, and how strong everyone is (docs/league.md).

``records`` (members, matches, the one rule of a match record and of an id) →
``directory`` (the league directory: write-once members, append-only match logs) →
``ratings`` (Elo replayed, Bradley–Terry, the ratings table) and ``pfsp`` / ``roles``
(opponent sampling per role, Main's kind-first mixture) → ``opponents`` (baseline,
frozen members); ``curriculum`` is the p(1 − p) ladder every trainer climbs (the CPU
curriculum of runs without a league, the fixed ladder inside one).  Training as a
member and running the league live with training (``brawlkit/training/``), the plots
and the ``elo`` command at the edge (``brawlkit/report/``).

Import-light on purpose (no numpy here): the registry's client and CLI import the
records through this package.
"""
