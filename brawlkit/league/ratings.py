"""League ratings from the match log: live Elo (replayed) and Bradley–Terry.

Nothing here keeps state between runs: every rating is recomputed from the
append-only match log (:class:`~brawlkit.league.records.MatchRecord`s, in the
pool's replay order), so ratings survive any restart, and the whole drift of
every member can be replayed and plotted.  Two views of the same log:

* :func:`elo` — standard logistic Elo on the 400 scale, replayed match by
  match.  It is the *live* rating: order-dependent, it follows a member that
  improves, and a frozen member's rating keeps moving whenever it plays (its
  opponents change, and an old checkpoint's result against a new one is news
  about both).  Zero-sum over the whole pool, so the mean stays ``initial``.
* :func:`bradley_terry` — the order-independent maximum-likelihood strength
  of each member, with bootstrap confidence intervals: what a frozen member's
  strength *is* given every game it ever played, however the log was ordered.

Plus two helpers for the league's notebook: :func:`payoff_matrix` (mean score
of row against column) and :func:`cycles` (rock-paper-scissors triples).
docs/ratings.md documents the formulas and the choices.

Human players: ``player:NAME`` is an ordinary rated id (zero-sum Elo, in BT).
``anonymous`` is not a player but many unknown people under one id: a match
against it moves only the other side's Elo (the anonymous side counts as
``initial`` and never changes), it is left out of Bradley–Terry, and
``anonymous`` is never listed — one pooled "player" would otherwise soak up or
hand out rating that belongs to nobody in particular.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brawlkit.league.records import ANONYMOUS_ID, MatchRecord, id_kind

#: Elo points per unit of Bradley–Terry strength θ: 10**(ΔR/400) = exp(Δθ)
ELO_PER_THETA = 400.0 / math.log(10.0)
#: the scale's anchor (docs/ratings.md, "The anchor"): the weakest built-in CPU level at
#: 1000, in the table's Bradley–Terry and Elo alike, so a number means the same odds
#: against a fixed player in every league and after every restart
ANCHOR: tuple[str, float] = ("cpu:1", 1000.0)
#: fewer rated games than this and a rating is marked provisional ("few games")
FEW_GAMES = 30


def _check_matches(matches: Sequence[MatchRecord]) -> None:
    """A match of a member against itself would be a silent no-op in Elo and a
    meaningless pair in BT; the pool never writes one, so it is a bug upstream.
    One pass before the work (not a call per match inside it: 100,000 matches)."""
    for i, m in enumerate(matches):
        if m.a == m.b:
            raise ValueError(f"match {i}: {m.a!r} plays itself")


def rated(matches: Sequence[MatchRecord]) -> list[MatchRecord]:
    """The games the ratings count: both sides fixed players (``MatchRecord.rated``).
    A trainer's own episodes (the sampled policy still learning, written under the id
    of the member it became) and sampled evaluations stay in the log for PFSP, the
    curriculum and the plots, but rating them would rate a player that never existed
    under that id (docs/ratings.md, "Who is rated")."""
    return [m for m in matches if m.rated]


def _ordered_ids(matches: Sequence[MatchRecord], members: Sequence[str] | None) -> list[str]:
    """``members`` first (in their order), then every other id of ``matches`` in
    order of first appearance: one deterministic order for every table.
    ``anonymous`` is never one of them (it is nobody in particular)."""
    ids: list[str] = []
    seen: set[str] = {ANONYMOUS_ID}
    for mid in members or ():
        if mid not in seen:
            seen.add(mid)
            ids.append(mid)
    for m in matches:
        for mid in (m.a, m.b):
            if mid not in seen:
                seen.add(mid)
                ids.append(mid)
    return ids


# ======================================================================== Elo
def elo_expected(r_a: float, r_b: float) -> float:
    """Expected score of a rated ``r_a`` against ``r_b``: 1 / (1 + 10**((r_b − r_a)/400))."""
    return 1.0 / (1.0 + 10.0 ** ((r_b - r_a) / 400.0))


@dataclass(frozen=True)
class EloStep:
    """The ratings of both players right after match ``index`` of the log."""

    index: int
    time: float
    a: str
    b: str
    rating_a: float
    rating_b: float


@dataclass
class EloResult:
    """Elo replayed over a match log.

    ``ratings`` / ``games`` / ``wins`` / ``draws`` / ``losses``: per member, in
    the order members first, then other ids by first appearance.  ``history``:
    one :class:`EloStep` per match, in log order — enough to plot every
    member's rating over time (:meth:`series`).
    """

    k: float
    initial: float
    ratings: dict[str, float] = field(default_factory=dict)
    games: dict[str, int] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    draws: dict[str, int] = field(default_factory=dict)
    losses: dict[str, int] = field(default_factory=dict)
    history: list[EloStep] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return list(self.ratings)

    def win_rate(self, member: str) -> float | None:
        """Wins / games (draws count as not won); None before the first game."""
        g = self.games.get(member, 0)
        return self.wins[member] / g if g else None

    def score_rate(self, member: str) -> float | None:
        """(wins + draws / 2) / games — the quantity Elo predicts; None before a game."""
        g = self.games.get(member, 0)
        return (self.wins[member] + 0.5 * self.draws[member]) / g if g else None

    def ranking(self) -> list[str]:
        """Member ids by rating, highest first (ties by id, so the order is stable)."""
        return sorted(self.ratings, key=lambda m: (-self.ratings[m], m))

    def series(self, member: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(match_index, time, rating)`` arrays after each match ``member`` played.

        Before its first match a member is at ``initial``; a step plot of these
        points over ``match_index`` (or ``time``) is its whole rating history.
        """
        idx, t, r = [], [], []
        for s in self.history:
            if s.a == member or s.b == member:
                idx.append(s.index)
                t.append(s.time)
                r.append(s.rating_a if s.a == member else s.rating_b)
        return np.asarray(idx, dtype=np.int64), np.asarray(t, dtype=float), np.asarray(r, dtype=float)


def elo(
    matches: Sequence[MatchRecord],
    members: Sequence[str] | None = None,
    k: float = 32.0,
    initial: float = 1200.0,
    history: bool = True,
    anchor: tuple[str, float] | None = None,
) -> EloResult:
    """Replay standard logistic Elo over ``matches`` in the order given.

    For each match, with a's score S (1 win, ½ draw, 0 loss) and
    E = 1 / (1 + 10**((R_b − R_a)/400)): R_a += K (S − E) and
    R_b += K ((1 − S) − (1 − E)) — exactly the opposite change, so the sum
    of all ratings stays (number of ids) × ``initial``.  Every match updates
    both players however old they are: a frozen checkpoint's rating keeps
    moving whenever it plays.

    ``members`` fixes the set reported from the start (e.g. the permanent
    members that have not played yet); an id that appears only in
    ``matches`` joins at ``initial`` when first seen.  The order is the
    order of ``matches`` (the pool already sorts its log deterministically),
    so the same log always gives the same ratings.

    A match against ``anonymous`` moves only the other side: its opponent is
    rated ``initial`` for E and is not changed, counted or listed (so the sum
    of the ratings is (number of ids) × ``initial`` plus the net of the
    anonymous games).  Its :class:`EloStep` shows ``initial`` for that side.

    ``history=False`` keeps no :class:`EloStep` per match (the same ratings; what a
    table of 100,000 matches needs, without 100,000 objects it never reads).

    Only games of two fixed players move a rating (:func:`rated`); the others are
    skipped (their ids are listed, without games), and a step's ``index`` is still
    the match's place in ``matches``.

    ``anchor`` ``(id, rating)``: after the replay every rating (and every step of the
    history) is shifted by one constant so that ``id`` ends at ``rating`` — a relabelling
    of the scale (Elo predicts from differences only), ignored when ``id`` has no games.
    """
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"k must be a finite number >= 0, got {k}")
    if not math.isfinite(initial):
        raise ValueError(f"initial must be finite, got {initial}")
    res = EloResult(k=float(k), initial=float(initial))

    def join(mid: str) -> None:
        if mid not in res.ratings:
            res.ratings[mid] = float(initial)
            for d in (res.games, res.wins, res.draws, res.losses):
                d[mid] = 0

    for mid in _ordered_ids(matches, members):  # an id only seen unrated is listed, 0 games
        join(mid)
    _check_matches(matches)
    for i, m in enumerate(matches):
        if not m.rated:
            continue
        if ANONYMOUS_ID in (m.a, m.b):
            _anonymous_step(res, i, m, history)
            continue
        join(m.a)
        join(m.b)
        s = m.score
        ra, rb = res.ratings[m.a], res.ratings[m.b]
        e = elo_expected(ra, rb)
        delta = k * (s - e)
        res.ratings[m.a] = ra + delta
        res.ratings[m.b] = rb + k * ((1.0 - s) - (1.0 - e))
        for mid in (m.a, m.b):
            res.games[mid] += 1
        if m.result == "draw":
            res.draws[m.a] += 1
            res.draws[m.b] += 1
        else:
            winner, loser = (m.a, m.b) if m.result == "win" else (m.b, m.a)
            res.wins[winner] += 1
            res.losses[loser] += 1
        if history:
            res.history.append(EloStep(i, m.time, m.a, m.b, res.ratings[m.a], res.ratings[m.b]))
    if anchor is not None and res.games.get(anchor[0]):
        _shift(res, anchor[1] - res.ratings[anchor[0]])
    return res


def _shift(res: EloResult, d: float) -> None:
    """Move the whole scale of ``res`` by ``d`` points (ratings, history, initial)."""
    res.ratings = {k: v + d for k, v in res.ratings.items()}
    res.history = [EloStep(s.index, s.time, s.a, s.b, s.rating_a + d, s.rating_b + d)
                   for s in res.history]
    res.initial += d


def _anonymous_step(res: EloResult, i: int, m: MatchRecord, history: bool = True) -> None:
    """Match ``i`` against ``anonymous``: one-sided Elo.  The known side X, with
    score S_X, against a fixed ``initial``: R_X += K (S_X − E_X), E_X =
    elo_expected(R_X, initial); the anonymous side neither moves nor is recorded."""
    x_is_a = m.b == ANONYMOUS_ID
    x = m.a if x_is_a else m.b
    if x not in res.ratings:
        res.ratings[x] = res.initial
        for d in (res.games, res.wins, res.draws, res.losses):
            d[x] = 0
    s = m.score if x_is_a else 1.0 - m.score
    rx = res.ratings[x]
    res.ratings[x] = rx + res.k * (s - elo_expected(rx, res.initial))
    res.games[x] += 1
    if s == 0.5:
        res.draws[x] += 1
    elif s == 1.0:
        res.wins[x] += 1
    else:
        res.losses[x] += 1
    if history:
        ra, rb = (res.ratings[x], res.initial) if x_is_a else (res.initial, res.ratings[x])
        res.history.append(EloStep(i, m.time, m.a, m.b, ra, rb))


# ============================================================ Bradley–Terry
@dataclass(frozen=True)
class BTRating:
    """One member's Bradley–Terry strength: ``rating`` on the Elo scale
    (``initial`` + 400/ln 10 · θ), its bootstrap 95 % interval ``[lo, hi]``
    (NaN without a bootstrap or without games), ``games`` played and the raw
    ``theta`` (mean 0 over the members with games)."""

    id: str
    rating: float
    lo: float
    hi: float
    games: int
    theta: float


@dataclass
class BTResult:
    """Bradley–Terry fit of a match log: :class:`BTRating` per member, in the
    order members first, then other ids by first appearance."""

    ratings: dict[str, BTRating]
    initial: float
    prior_games: float
    bootstrap: int
    seed: int
    matches: int

    @property
    def ids(self) -> list[str]:
        return list(self.ratings)

    def theta(self) -> np.ndarray:
        """θ of every member (mean 0), in :attr:`ids` order."""
        return np.array([r.theta for r in self.ratings.values()])

    def ranking(self) -> list[str]:
        """Member ids by rating, highest first (ties by id)."""
        return sorted(self.ratings, key=lambda m: (-self.ratings[m].rating, m))


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 0.5 (1 + tanh(x/2)) == 1/(1+e^-x) without overflow for large |x|
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _bt_objective(theta: np.ndarray, score: np.ndarray, prior: float) -> float:
    """Penalised log-likelihood: Σ_ij S_ij log σ(θ_i − θ_j) plus ``prior``
    virtual draws (½ win, ½ loss) of every member against a θ = 0 player."""
    d = theta[:, None] - theta[None, :]
    ll = float(np.sum(score * _log_sigmoid(d)))
    return ll + prior * float(np.sum(0.5 * _log_sigmoid(theta) + 0.5 * _log_sigmoid(-theta)))


def _bt_fit(
    score: np.ndarray, games: np.ndarray, prior: float, theta0: np.ndarray | None = None,
    tol: float = 1e-10, max_iter: int = 200,
) -> np.ndarray:
    """Newton's method on the penalised BT log-likelihood; θ with mean 0 over
    the members with games (members without any are at 0, the average).

    ``score[i, j]``: i's total score against j (wins + draws / 2), ``games``
    = score + scoreᵀ.  The prior makes the objective strictly concave (the
    negative Hessian is a weighted graph Laplacian plus a positive diagonal),
    so the maximum is unique and finite even for a member that won or lost
    every game, and Newton with step halving converges in a handful of steps.
    """
    n = score.shape[0]
    if n == 0:
        return np.zeros(0)
    theta = np.zeros(n) if theta0 is None else np.array(theta0, dtype=float)
    f = _bt_objective(theta, score, prior)
    row_score = score.sum(axis=1)
    for _ in range(max_iter):
        p = _sigmoid(theta[:, None] - theta[None, :])
        q = _sigmoid(theta)
        grad = row_score - np.sum(games * p, axis=1) + prior * (0.5 - q)
        w = games * p * (1.0 - p)          # symmetric, zero diagonal
        neg_h = -w
        neg_h[np.diag_indices(n)] = w.sum(axis=1) + prior * q * (1.0 - q)
        step = np.linalg.solve(neg_h, grad)
        t = 1.0
        while True:
            cand = theta + t * step
            fc = _bt_objective(cand, score, prior)
            if fc >= f - 1e-12 * max(1.0, abs(f)) or t < 1e-8:
                break
            t *= 0.5
        theta, f = cand, fc
        if float(np.max(np.abs(t * step), initial=0.0)) < tol:
            break
    # identifiability: mean 0 over the members that played; one without games in
    # this data has no information beyond the prior, so it sits exactly at the average
    played = games.sum(axis=1) > 0
    if not played.any():
        return np.zeros(n)
    return np.where(played, theta - theta[played].mean(), 0.0)


def _pair_tables(
    ia: np.ndarray, ib: np.ndarray, s: np.ndarray, weight: np.ndarray | None, n: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(score, games) matrices of matches (ia[t], ib[t], a's score s[t]), each
    counted ``weight[t]`` times (the bootstrap's resampling counts)."""
    w = np.ones_like(s) if weight is None else weight.astype(float)
    sa = np.bincount(ia * n + ib, weights=w * s, minlength=n * n).reshape(n, n)
    sb = np.bincount(ib * n + ia, weights=w * (1.0 - s), minlength=n * n).reshape(n, n)
    score = sa + sb
    return score, score + score.T


def bradley_terry(
    matches: Sequence[MatchRecord],
    members: Sequence[str] | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    prior_games: float = 1.0,
    initial: float = 1200.0,
    anchor: tuple[str, float] | None = None,
) -> BTResult:
    """Order-independent strengths: Bradley–Terry maximum likelihood.

    ``anchor`` ``(id, rating)``: the scale is shifted so that ``id`` sits at exactly
    ``rating`` (in the fit and in every bootstrap resample, so its interval is a point
    and every other interval is relative to it) — the same number then means the same
    odds against a fixed player in every league (docs/ratings.md, "The anchor").  An
    anchor without rated games is ignored (nothing ties it to the others).

    Model: P(a beats b) = 1 / (1 + exp(−(θ_a − θ_b))); a draw counts as half a
    win for each side.  Every member also plays ``prior_games`` virtual draws
    against a virtual average player (θ = 0): a weak symmetric prior (one
    game's worth of evidence by default) that keeps a member who won — or
    lost — everything finite, and places a member without games at the
    average, while it is negligible once a member has tens of games.  The
    fitted θ are shifted to mean 0 over the members with games (a member
    without any is at exactly 0, the average) and reported on the Elo scale,
    rating = ``initial`` + 400/ln 10 · θ, so BT and Elo ratings read alike
    (both average ``initial``).

    Matches against ``anonymous`` are left out (it is no one player, and the
    fit's mean-0 identifiability would otherwise be pulled by a pooled crowd);
    ``matches`` of the result counts the matches fitted.  The ids are still those
    :func:`elo` lists (one who met only ``anonymous`` is at ``initial``, no games).

    Confidence intervals: the matches are resampled with replacement
    ``bootstrap`` times (``numpy.random.default_rng(seed)``), each resample
    refitted, and the 2.5 % / 97.5 % percentiles of each member's rating
    reported as ``lo`` / ``hi`` (NaN when ``bootstrap`` is 0, and for a
    member without games: the log says nothing about it).
    """
    if not (math.isfinite(prior_games) and prior_games > 0):
        raise ValueError("prior_games must be > 0 (without a prior, a member that won or lost "
                         f"every game has an infinite rating), got {prior_games}")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    _check_matches(matches)
    ids = _ordered_ids(matches, members)  # the ids Elo lists, in its order
    matches = [m for m in rated(matches) if ANONYMOUS_ID not in (m.a, m.b)]
    index = {mid: i for i, mid in enumerate(ids)}
    n = len(ids)
    ia = np.array([index[m.a] for m in matches], dtype=np.int64)
    ib = np.array([index[m.b] for m in matches], dtype=np.int64)
    s = np.array([m.score for m in matches], dtype=float)
    score, games = _pair_tables(ia, ib, s, None, n)
    played = games.sum(axis=1)
    at = index.get(anchor[0]) if anchor is not None else None
    if at is not None and played[at] == 0:
        at = None
    shift = 0.0 if at is None or anchor is None else (anchor[1] - initial) / ELO_PER_THETA

    def fit(sc: np.ndarray, gm: np.ndarray, theta0: np.ndarray | None = None) -> np.ndarray:
        th = _bt_fit(sc, gm, prior_games, theta0=theta0)
        if at is None:
            return th
        return np.where(gm.sum(axis=1) > 0, th - th[at] + shift, th)

    theta = fit(score, games)

    lo = np.full(n, math.nan)
    hi = np.full(n, math.nan)
    if bootstrap and len(matches):
        rng = np.random.default_rng(seed)
        samples = np.empty((bootstrap, n))
        for r in range(bootstrap):
            counts = np.bincount(rng.integers(0, len(matches), len(matches)),
                                 minlength=len(matches))
            bs, bg = _pair_tables(ia, ib, s, counts, n)
            samples[r] = fit(bs, bg, theta)
        lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
        # no games, no interval: the data say nothing about such a member
        lo[played == 0] = math.nan
        hi[played == 0] = math.nan

    ratings = {
        mid: BTRating(id=mid, rating=float(initial + ELO_PER_THETA * theta[i]),
                      lo=float(initial + ELO_PER_THETA * lo[i]),
                      hi=float(initial + ELO_PER_THETA * hi[i]),
                      games=int(round(played[i])), theta=float(theta[i]))
        for i, mid in enumerate(ids)
    }
    return BTResult(ratings=ratings, initial=float(initial), prior_games=float(prior_games),
                    bootstrap=int(bootstrap), seed=int(seed), matches=len(matches))


# ============================================================ payoff, cycles
def games_matrix(
    matches: Sequence[MatchRecord], ids: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """``(ids, G)``: G[i, j] = games between ids[i] and ids[j] (either side).

    ``ids`` None: every id of the log by first appearance; matches of an id
    not in ``ids`` are left out.
    """
    ids = _ordered_ids(matches, None) if ids is None else list(ids)
    _, games = _tables(matches, ids)
    return ids, games


def payoff_matrix(
    matches: Sequence[MatchRecord], ids: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """``(ids, P)``: P[i, j] = mean score of ids[i] against ids[j] (1 win, ½ draw,
    0 loss, whichever side of the record each played); NaN where they never
    met (and on the diagonal).  P[i, j] + P[j, i] = 1 wherever defined.

    ``ids`` None: every id of the log by first appearance; matches of an id
    not in ``ids`` are left out.
    """
    ids = _ordered_ids(matches, None) if ids is None else list(ids)
    score, games = _tables(matches, ids)
    with np.errstate(invalid="ignore", divide="ignore"):
        payoff = np.where(games > 0, score / np.where(games > 0, games, 1.0), np.nan)
    return ids, payoff


def _tables(matches: Sequence[MatchRecord], ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    index = {mid: i for i, mid in enumerate(ids)}
    if len(index) != len(ids):
        raise ValueError("ids must be distinct")
    kept = [m for m in rated(matches) if m.a in index and m.b in index]
    _check_matches(kept)
    ia = np.array([index[m.a] for m in kept], dtype=np.int64)
    ib = np.array([index[m.b] for m in kept], dtype=np.int64)
    s = np.array([m.score for m in kept], dtype=float)
    return _pair_tables(ia, ib, s, None, len(ids))


def cycles(
    matches: Sequence[MatchRecord], ids: Sequence[str] | None = None, min_games: int = 10,
) -> list[tuple[str, str, str]]:
    """Rock-paper-scissors triples ``(a, b, c)``: a beats b, b beats c, c beats a.

    "x beats y" means x's mean score against y (draws count half) is > 0.5
    over at least ``min_games`` games between them — non-transitivity that a
    single rating (Elo or BT) cannot express, and that PFSP should keep
    alive.  Each cycle is reported once, starting with the member that comes
    first in ``ids``; the list is in ``ids`` order.  O(n³) over the members,
    vectorised.
    """
    ids, payoff = payoff_matrix(matches, ids)
    _, games = games_matrix(matches, ids)
    beats = (games >= max(min_games, 1)) & (np.nan_to_num(payoff, nan=0.0) > 0.5)
    out: list[tuple[str, str, str]] = []
    n = len(ids)
    for i in range(n):
        # i → j → k → i with j, k > i: each cycle once, its first member first
        sub = beats[i + 1:, i + 1:]
        hits = beats[i, i + 1:][:, None] & sub & beats[i + 1:, i][None, :]
        for j, k in zip(*np.nonzero(hits), strict=True):
            out.append((ids[i], ids[i + 1 + int(j)], ids[i + 1 + int(k)]))
    return out


# ------------------------------------------------------------ the ratings table
def _finite(x: float) -> float | None:
    """JSON has no NaN: an undefined value (no bootstrap) is null."""
    return x if math.isfinite(x) else None


def league_table(
    members: list[Any], matches: list[Any], k: float = 32.0, initial: float = 1200.0,
    bootstrap: int = 200, seed: int = 0, anchor: tuple[str, float] | None = ANCHOR,
) -> dict[str, Any]:
    """The ``--json`` object of ``members`` (:class:`~brawlkit.league.records.Member`)
    and ``matches`` (replay order): one row per id, by Elo rating, highest first.

    An id that appears in the log but not among the members (a registered human
    player ``player:NAME``, or a member whose record is gone or corrupt) is still
    rated, with role ``"?"``.  ``kind`` says what each id is (``bot``,
    ``baseline``, ``cpu``, ``human``); ``anonymous`` is never a row (its matches
    move only the other side's Elo and stay out of Bradley–Terry).

    Rows are by Bradley–Terry rating, highest first (the headline: order-free, with its
    interval); ``games`` counts rated games (two fixed players), ``unrated`` the
    others of the id (its training episodes, sampled evaluations), ``few_games`` marks
    a rating of fewer than :data:`FEW_GAMES` rated games.  Both scales are anchored
    (``anchor``, :data:`ANCHOR`) when the anchor has rated games.
    """
    ids = [m.id for m in members]
    info = {m.id: m for m in members}
    er = elo(matches, ids, k=k, initial=initial, history=False, anchor=anchor)
    bt = bradley_terry(matches, ids, bootstrap=bootstrap, seed=seed, initial=initial,
                       anchor=anchor)
    unrated: dict[str, int] = {}
    for m in matches:
        if not m.rated:
            for side in (m.a, m.b):
                unrated[side] = unrated.get(side, 0) + 1
    rows = []
    for mid in bt.ranking():
        mem = info.get(mid)
        b = bt.ratings[mid]
        wr = er.win_rate(mid)
        rows.append({
            "id": mid,
            "role": mem.role if mem is not None else "?",
            "kind": id_kind(mid, mem.role if mem is not None else None),
            "generation": mem.generation if mem is not None else None,
            "rating": round(er.ratings[mid], 3),
            "games": er.games[mid],
            "wins": er.wins[mid],
            "draws": er.draws[mid],
            "losses": er.losses[mid],
            "win_rate": None if wr is None else round(wr, 4),
            "bt_rating": round(b.rating, 3),
            "bt_lo": _finite(round(b.lo, 3)),
            "bt_hi": _finite(round(b.hi, 3)),
            "unrated": unrated.get(mid, 0),
            "few_games": er.games[mid] < FEW_GAMES,
        })
    anchored = anchor is not None and er.games.get(anchor[0], 0) > 0
    return {"members": rows, "matches": len(matches), "rated_matches": len(rated(matches)),
            "k": k, "initial": initial, "elo_initial": round(er.initial, 3),
            "bootstrap": bootstrap, "seed": seed, "bt_prior_games": bt.prior_games,
            "anchor": {"id": anchor[0], "rating": anchor[1]} if anchored and anchor else None}


def bt_text(r: dict[str, Any]) -> str:
    """A row's headline rating as text: ``BT [lo, hi]``, and ``(few games)`` when it
    rests on fewer than :data:`FEW_GAMES` rated games; ``– (no games)`` without any
    (the prior's number would read as a measurement)."""
    if not r["games"]:
        return "– (no games)"
    text = f"{r['bt_rating']:.0f}"
    if r.get("bt_lo") is not None and r.get("bt_hi") is not None:
        text += f" [{r['bt_lo']:.0f}, {r['bt_hi']:.0f}]"
    if r.get("few_games"):
        text += " (few games)"
    return text


def format_table(res: dict[str, Any]) -> str:
    """The human table: member, kind, role, generation, BT [lo, hi] (the headline), live
    Elo, rated games (and unrated ones), win rate."""
    head = ("member", "kind", "role", "gen", "bt rating [lo, hi]", "live elo", "games",
            "unrated", "win")
    lines = []
    for r in res["members"]:
        lines.append((r["id"], r.get("kind", "-"), r["role"], "-" if r["generation"] is None else str(r["generation"]),
                      bt_text(r), f"{r['rating']:.1f}", str(r["games"]), str(r.get("unrated", 0)),
                      "-" if r["win_rate"] is None else f"{r['win_rate']:.2f}"))
    widths = [max(len(h), *(len(row[c]) for row in lines)) for c, h in enumerate(head)]
    right = {5, 6, 7, 8}

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(v.rjust(w) if c in right else v.ljust(w)
                         for c, (v, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    anchor = res.get("anchor")
    scale = (f"anchored at {anchor['id']} = {anchor['rating']:g}" if anchor else
             f"not anchored (mean {res['initial']:g})")
    out = [f"{res['matches']} matches, {res.get('rated_matches', res['matches'])} rated (both "
           f"sides fixed players); Bradley-Terry with {res['bootstrap']} bootstrap resamples "
           f"(95 % interval), live Elo K {res['k']:g}; scale {scale}",
           fmt(head), fmt(tuple("-" * w for w in widths))]
    out += [fmt(row) for row in lines]
    return "\n".join(out)


# ------------------------------------------------------------ the check
#: the source of a deterministic evaluation match (a generation's, or ``elo --check --fresh``)
EVAL_SOURCE = "eval"


def evaluation_counts(matches: Sequence[MatchRecord], learned: set[str]
                      ) -> dict[tuple[str, str], list[int]]:
    """``(member, cpu level id) -> [wins, draws, losses]`` of the learned members'
    deterministic evaluation matches (source ``eval``, both sides fixed) in ``matches``."""
    out: dict[tuple[str, str], list[int]] = {}
    for m in matches:
        if m.source != EVAL_SOURCE or not m.rated:
            continue
        for me, opp, res in ((m.a, m.b, m.result),
                             (m.b, m.a, {"win": "loss", "loss": "win"}.get(m.result, m.result))):
            if me in learned and id_kind(opp) == "cpu":
                out.setdefault((me, opp), [0, 0, 0])[("win", "draw", "loss").index(res)] += 1
    return out


def check_pairs(table: dict[str, Any], counts: dict[tuple[str, str], list[int]],
                min_games: int = 1) -> list[dict[str, Any]]:
    """Each (member, level) of ``counts`` with at least ``min_games`` games: the score
    the ratings of ``table`` (a :func:`league_table`) predict — Bradley–Terry, the
    headline, and the live Elo beside it — against the measured score (wins + draws / 2
    over the games) and its 95 % Wilson interval; ``agree`` when the Bradley–Terry
    prediction lies inside the interval."""
    from brawlkit.common.stats import wilson_interval

    rows = {r["id"]: r for r in table["members"]}
    out = []
    for (mid, opp), (w, d, lo_) in sorted(counts.items()):
        n = w + d + lo_
        if n < min_games or mid not in rows or opp not in rows:
            continue
        score = (w + 0.5 * d) / n
        lo, hi = wilson_interval(w + 0.5 * d, n)  # type: ignore[arg-type]
        bt = elo_expected(rows[mid]["bt_rating"], rows[opp]["bt_rating"])
        el = elo_expected(rows[mid]["rating"], rows[opp]["rating"])
        out.append({"member": mid, "vs": opp, "games": n, "wins": w, "draws": d, "losses": lo_,
                    "score": round(score, 4), "lo": round(lo, 4), "hi": round(hi, 4),
                    "bt_predicted": round(bt, 4), "elo_predicted": round(el, 4),
                    "agree": lo <= bt <= hi})
    return out


def format_check(pairs: list[dict[str, Any]], fresh: bool) -> str:
    """The check as text: every pair, then the ones that disagree."""
    what = "fresh deterministic matches, not in the ratings" if fresh else \
        "the deterministic evaluation matches of the log"
    if not pairs:
        return (f"check: no (learned member, CPU level) pair with evaluation matches "
                f"({what}); `elo --check --fresh N` plays some")
    lines = [f"check: the win probability the ratings predict against each CPU level vs the "
             f"measured score ({what}) and its 95 % interval",
             f"{'member':<28} {'vs':<6} {'games':>5}  {'measured [95 %]':<20} {'bt':>5} {'elo':>5}"]
    for p in pairs:
        lines.append(f"{p['member']:<28} {p['vs']:<6} {p['games']:>5}  "
                     f"{p['score']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}]{'':<6} "
                     f"{p['bt_predicted']:>5.2f} {p['elo_predicted']:>5.2f}"
                     + ("" if p["agree"] else "  DISAGREES"))
    bad = [p for p in pairs if not p["agree"]]
    lines.append(f"{len(pairs) - len(bad)} of {len(pairs)} pairs agree "
                 f"({100 * (len(pairs) - len(bad)) / len(pairs):.0f} %)"
                 + ("" if not bad else "; disagree: " + ", ".join(
                     f"{p['member']} vs {p['vs']} (predicted {p['bt_predicted']:.2f}, measured "
                     f"{p['score']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}])" for p in bad)))
    return "\n".join(lines)
