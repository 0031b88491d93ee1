# SPDX-License-Identifier: MIT
"""The extreme-value distributions behind rtlab.analysis.evt and their fits by
probability-weighted moments: the GEV (and Gumbel) of window maxima, the generalised
Pareto tail of the largest ones. The `*_rows` functions fit or evaluate one model per row
of a matrix, so a bootstrap refits all its resamples at once.

Pure numpy; numpy is imported by the functions that need it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

EULER = 0.5772156649015329
LN2, LN3 = math.log(2), math.log(3)
K_LIMIT = 0.9  # PWM shape estimates are clamped to [-K_LIMIT, K_LIMIT]


@dataclass(frozen=True)
class GevFit:
    """GEV in Hosking's parametrisation (x in µs): F(x) = exp(-(1 - k (x-mu)/sigma)^(1/k)).

    k < 0: heavy (Fréchet) tail, k = 0: Gumbel, k > 0: bounded tail (upper end mu + sigma/k).
    The usual shape xi of the literature is -k.
    """

    mu: float
    sigma: float
    k: float

    def _t(self, x: float) -> float:
        if self.sigma <= 0:
            return 0.0 if x >= self.mu else math.inf
        if abs(self.k) < 1e-9:
            return math.exp(-(x - self.mu) / self.sigma)
        y = 1 - self.k * (x - self.mu) / self.sigma
        if y <= 0:
            return 0.0 if self.k > 0 else math.inf
        return y ** (1 / self.k)

    def cdf(self, x: float) -> float:
        return math.exp(-self._t(x))

    def exceed_within(self, x: float, blocks: float) -> float:
        """P(the maximum of `blocks` windows exceeds x)."""
        return -math.expm1(-blocks * self._t(x))

    def quantile(self, p: float) -> float:
        t = -math.log(p)
        if abs(self.k) < 1e-9:
            return self.mu - self.sigma * math.log(t)
        return self.mu + self.sigma * (1 - t ** self.k) / self.k


def pwm_rows(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """b0, b1, b2 of each row of `xs` (sorted ascending along the last axis)."""
    import numpy as np

    n = xs.shape[-1]
    i = np.arange(n, dtype=np.float64)
    w1 = i / (n - 1)
    w2 = i * (i - 1) / ((n - 1) * (n - 2))
    # multiply and sum, not np.dot: BLAS threads spin on a busy machine (100x slower)
    return xs.mean(-1), (xs * w1).sum(-1) / n, (xs * w2).sum(-1) / n


def gumbel_from_b(b0: np.ndarray, b1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sigma = (2 * b1 - b0) / LN2
    return b0 - EULER * sigma, sigma


def gev_from_b(b0: np.ndarray, b1: np.ndarray, b2: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mu, sigma, k) arrays; Gumbel where the shape is ~0 or undefined."""
    import numpy as np

    l2 = 2 * b1 - b0
    denom = 3 * b2 - b0
    with np.errstate(all="ignore"):
        c = l2 / denom - LN2 / LN3
        k = 7.8590 * c + 2.9554 * c * c
    gum = ~np.isfinite(k) | (denom == 0) | (l2 <= 0) | (np.abs(k) < 1e-6)
    k = np.clip(np.where(gum, 0.0, k), -K_LIMIT, K_LIMIT)
    kk = np.where(gum, 1.0, k)
    g = np.fromiter((math.gamma(1 + v) for v in kk.ravel()), np.float64,
                    kk.size).reshape(kk.shape)
    with np.errstate(all="ignore"):
        sigma = np.where(gum, l2 / LN2, l2 * kk / (g * (1 - 2.0 ** -kk)))
        mu = np.where(gum, b0 - EULER * sigma, b0 + sigma * (g - 1) / kk)
    return mu, sigma, k


def gpd_rows(top: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(threshold u, scale alpha, shape k) of a generalised Pareto distribution fitted by
    probability-weighted moments (Hosking & Wallis 1987; Hosking's sign: k < 0 heavy) to
    the excesses of each row's values over its smallest one, u (rows sorted ascending).
    Rows without spread get alpha = 0."""
    import numpy as np

    y = top[..., 1:] - top[..., :1]
    m = y.shape[-1]
    p = (np.arange(1, m + 1, dtype=np.float64) - 0.35) / m
    a0 = y.mean(-1)
    a1 = (y * (1 - p)).sum(-1) / m
    with np.errstate(all="ignore"):
        k = a0 / (a0 - 2 * a1) - 2
        alpha = 2 * a0 * a1 / (a0 - 2 * a1)
    k = np.clip(np.nan_to_num(k, nan=0.0), -K_LIMIT, K_LIMIT)
    alpha = np.where(np.isfinite(alpha) & (alpha > 0), alpha, 0.0)
    return top[..., 0], alpha, k


def gpd_k_rows(top: np.ndarray) -> np.ndarray:
    """Shape k of `gpd_rows`."""
    return gpd_rows(top)[2]


def tail_sf_rows(u: np.ndarray, alpha: np.ndarray, k: np.ndarray, rate: float,
                  x: float) -> np.ndarray:
    """P(one window's maximum > x) under GPD tails (threshold u exceeded by a fraction
    `rate` of the windows); 0 where x is below the threshold (the tail model says nothing
    there) or the row has no scale."""
    import numpy as np

    with np.errstate(all="ignore"):
        z = (x - u) / alpha
        kk = np.where(k == 0, 1.0, k)
        y = 1 - kk * z
        s = np.where(k == 0, np.exp(-z),
                     np.where(y > 0, np.abs(y) ** (1 / kk), np.where(kk > 0, 0.0, np.inf)))
        sf = rate * np.minimum(s, 1.0)
    return np.where((x >= u) & (alpha > 0), sf, 0.0)


def tail_q_rows(u: np.ndarray, alpha: np.ndarray, k: np.ndarray, rate: float,
                 sf: float) -> np.ndarray:
    """The level that one window's maximum exceeds with probability `sf` under GPD tails
    (the threshold where sf >= rate)."""
    import numpy as np

    r = min(1.0, sf / rate)
    kk = np.where(k == 0, 1.0, k)
    with np.errstate(all="ignore"):
        return u + np.where(k == 0, -alpha * math.log(r), alpha * (1 - r ** kk) / kk)


def q_rows(mu: np.ndarray, sigma: np.ndarray, k: np.ndarray, p: float) -> np.ndarray:
    """Quantile p of GEVs given as arrays."""
    import numpy as np

    t = -math.log(p)
    kk = np.where(k == 0, 1.0, k)
    with np.errstate(all="ignore"):
        return np.where(k == 0, mu - sigma * math.log(t), mu + sigma * (1 - t ** kk) / kk)


def t_rows(mu: np.ndarray, sigma: np.ndarray, k: np.ndarray, x: float) -> np.ndarray:
    """-ln F(x) of GEVs given as arrays."""
    import numpy as np

    with np.errstate(all="ignore"):
        z = (x - mu) / sigma
        kk = np.where(k == 0, 1.0, k)
        y = 1 - kk * z
        tk = np.where(y > 0, np.abs(y) ** (1 / kk), np.where(kk > 0, 0.0, np.inf))
        return np.where(k == 0, np.exp(-z), tk)


def fit_gumbel(sorted_x: np.ndarray) -> GevFit:
    b0, b1, _ = pwm_rows(sorted_x)
    mu, sigma = gumbel_from_b(b0, b1)
    return GevFit(float(mu), float(sigma), 0.0)


def fit_gev(sorted_x: np.ndarray) -> GevFit:
    """PWM estimate (Hosking et al. 1985); Gumbel when the shape is ~0."""
    mu, sigma, k = gev_from_b(*pwm_rows(sorted_x))
    return GevFit(float(mu), float(sigma), float(k))


@dataclass(frozen=True)
class GpdTail:
    """The tail model: a generalised Pareto distribution (Hosking's sign: k < 0 heavy)
    fitted to the excesses of the largest `m` window maxima over the next one, `u` (µs),
    which a fraction `rate` = m / n of the windows exceed. It uses only the top of the
    data, so it follows a tail that gets heavier (or lighter) beyond the bulk, at the
    price of a larger spread."""

    u: float
    alpha: float
    k: float
    m: int
    rate: float

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import numpy as np

        return np.array([self.u]), np.array([self.alpha]), np.array([self.k])

    def exceed_within(self, x: float, blocks: float) -> float:
        """P(the maximum of `blocks` windows exceeds x) (0 below the threshold)."""
        return float(tail_p_rows(self._rows(), self.rate, x, blocks)[0])

    def quantile_within(self, p: float, blocks: float) -> float:
        """The level below which the maximum of `blocks` windows stays with probability p."""
        return float(tail_q_rows(*self._rows(), self.rate, -math.log(p) / blocks)[0])


def tail_p_rows(tail: tuple, rate: float, x: float, blocks: float) -> np.ndarray:
    import numpy as np

    return -np.expm1(blocks * np.log1p(-tail_sf_rows(*tail, rate, x)))
