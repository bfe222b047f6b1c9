"""Small statistics every learning claim here needs: how sure a win rate is.

Standard library only.  A win rate of k wins in n matches is reported with its 95 %
Wilson score interval (Wilson 1927; the interval Agresti & Coull recommend over the
normal approximation, which collapses to a point at 0 and at n and is too narrow for
the small n of a per-generation evaluation).
"""

from __future__ import annotations

import math

#: the normal quantile of a two-sided 95 % interval
Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """(lo, hi) of the Wilson score interval of ``k`` successes in ``n`` trials.

    ``p = k/n``; centre ``(p + z²/2n) / (1 + z²/n)``; half-width
    ``z √(p(1−p)/n + z²/4n²) / (1 + z²/n)``.  ``n == 0`` gives the whole [0, 1].
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
