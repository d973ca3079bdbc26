"""Special functions for the paired statistics, without scipy.

The normal quantile (Wichura's AS 241), the Student t distribution through the regularized
incomplete beta function (Numerical Recipes' continued fraction, with DiDonato and Morris's BGRAT
expansion where the fraction loses digits), each checked against scipy to 1e-10 in the tests.
Kept apart from `stats.py` because they are numerics, not statistics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Wichura (1988), algorithm AS 241 (PPND16): rational approximations with ~1e-16 relative
# accuracy. Coefficients lowest degree first.
_AS241_A = (
    3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
    1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
    3.3430575583588128105e4, 2.5090809287301226727e3,
)  # fmt: skip
_AS241_B = (
    1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
    2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
    5.2264952788528545610e3,
)  # fmt: skip
_AS241_C = (
    1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
    3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
    2.27238449892691845833e-2, 7.74545014278341407640e-4,
)  # fmt: skip
_AS241_D = (
    1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
    1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
    1.05075007164441684324e-9,
)  # fmt: skip
_AS241_E = (
    6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
    2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
    2.71155556874348757815e-5, 2.01033439929228813265e-7,
)  # fmt: skip
_AS241_F = (
    1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
    7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
    2.04426310338993978564e-15,
)  # fmt: skip


def normal_quantile(p: float) -> float:
    """Standard normal quantile ``Phi^{-1}(p)`` by Wichura's AS 241; +-inf at 0 and 1."""
    if not 0 <= p <= 1:
        raise ValueError(f"probability must be in [0, 1], got {p}")
    if p in (0, 1):
        return math.copysign(math.inf, p - 0.5)
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * _ratio(_AS241_A, _AS241_B, r)
    r = math.sqrt(-math.log(p if q < 0 else 1 - p))
    tail = _ratio(_AS241_C, _AS241_D, r - 1.6) if r <= 5 else _ratio(_AS241_E, _AS241_F, r - 5)
    return -tail if q < 0 else tail


def _ratio(num: Sequence[float], den: Sequence[float], r: float) -> float:
    top = bottom = 0.0
    for a, b in zip(reversed(num), reversed(den), strict=True):
        top, bottom = top * r + a, bottom * r + b
    return top / bottom


def student_t_cdf(t: float, df: float) -> float:
    """Student t CDF via the upper tail ``P(T > |t|) = I_x(df/2, 1/2) / 2``, ``x = df/(df+t^2)``."""
    if df <= 0 or math.isnan(t):
        raise ValueError("need df > 0 and a number t")
    tail = t_two_sided_p(t, df) / 2
    return tail if t < 0 else 1 - tail


def t_two_sided_p(t: float, df: float) -> float:
    if t == 0:
        return 1.0
    t2 = t * t
    if math.isinf(t2):
        return 0.0
    # Both x and 1 - x are formed directly so that neither loses digits to cancellation.
    a, x, y = df / 2, df / (df + t2), t2 / (df + t2)
    if a >= 15 and y < 0.35 and -(a - 0.25) * math.log1p(-y) < 500:
        return _betainc_half_large_a(a, y)
    return betainc(a, 0.5, x, y)


def _bgrat_half_p() -> tuple[float, ...]:
    """DiDonato & Morris's ``p_n`` for ``b = 1/2``: ``p_0 = 1``,
    ``p_n = (b-1)/(2n+1)! + (1/n) sum_{m=1}^{n-1} (m b - n) p_{n-m} / (2m+1)!``."""
    b, p = 0.5, [1.0]
    for n in range(1, 30):
        acc = sum((m * b - n) * p[n - m] / math.factorial(2 * m + 1) for m in range(1, n))
        p.append(acc / n + (b - 1) / math.factorial(2 * n + 1))
    return tuple(p)


_BGRAT_P = _bgrat_half_p()


def _betainc_half_large_a(a: float, y: float) -> float:
    """``I_x(a, 1/2)`` for large ``a`` and ``x = 1 - y`` near 1 (DiDonato & Morris, BGRAT).

    There the continued fraction adds terms close to -1 to 1 and loses ~``a/u`` ulps (1e-10
    at a million degrees of freedom). BGRAT expands instead around ``Q(1/2, u) = erfc(sqrt u)``
    with ``T = a - 1/4``, ``u = -T log x``: ``I = M sum_n p_n J_n``, where
    ``M = h Gamma(a + 1/2) / (Gamma(a) T^(1/2))``, ``h = u^(1/2) e^-u / Gamma(1/2)``,
    ``J_0 = Q(1/2, u) / h`` and ``J_n = ((b2)(b2+1) J_{n-1} + (u + b2 + 1) (log(x)/2)^(2n-2)) /
    (4 T^2)`` with ``b2 = 2n - 3/2``.
    """
    t = a - 0.25
    lx = math.log1p(-y)
    u = -t * lx
    log_h = 0.5 * math.log(u) - u - 0.5 * math.log(math.pi)
    prefix = math.exp(log_h + _log_gamma_ratio(a, 0.5) - 0.5 * math.log(t))
    j = math.erfc(math.sqrt(u)) / math.exp(log_h)
    total, lx2, lxp, b2n = prefix * j, (lx / 2) ** 2, 1.0, 0.5
    for p_n in _BGRAT_P[1:]:
        j = (b2n * (b2n + 1) * j + (u + b2n + 1) * lxp) / (4 * t * t)
        lxp, b2n = lxp * lx2, b2n + 2
        term = prefix * p_n * j
        total += term
        if abs(term) <= 1e-17 * abs(total):
            break
    return total


def betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularised incomplete beta ``I_x(a, b)`` with ``y = 1 - x`` given exactly.

    ``I_x(a, b) = x^a y^b / (a B(a, b)) * cf``, ``cf`` the continued fraction of Numerical
    Recipes' betacf. It converges fast for ``x < (a + 1)/(a + b + 2)``; above that the
    symmetry ``I_x(a, b) = 1 - I_y(b, a)`` is used instead.
    """
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - betainc(b, a, y, x)
    return math.exp(_log_beta_front(a, b, x, y)) * _betacf(a, b, x) / a


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta by the modified Lentz method."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for aa in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def _log_beta_front(a: float, b: float, x: float, y: float) -> float:
    """``log(x^a y^b / B(a, b))`` without the cancellation of large log-gammas.

    For large ``a`` and ``b`` Stirling's series gives ``B(a,b) = sqrt(2 pi) a^(a-1/2)
    b^(b-1/2) (a+b)^(1/2-a-b) e^(s(a)+s(b)-s(a+b))``, so the front is
    ``a log1p(u/a) + b log1p(-u/b) + log(ab/(2 pi (a+b)))/2 + s(a+b) - s(a) - s(b)`` with
    ``u = b x - a y`` (Boost's ibeta_power_terms does the same). ``s`` is the Stirling error.
    """
    log_x = math.log1p(-y) if x > 0.5 else math.log(x)
    log_y = math.log1p(-x) if y > 0.5 else math.log(y)
    small, big = min(a, b), max(a, b)
    if small >= 10:
        u = b * x - a * y
        return (
            a * _log_scaled(u / a, log_x, b / a)
            + b * _log_scaled(-u / b, log_y, a / b)
            + 0.5 * math.log(a * b / (2 * math.pi * (a + b)))
            + _stirling_error(a + b)
            - _stirling_error(a)
            - _stirling_error(b)
        )
    if big >= 10:
        # log B = lgamma(small) - [lgamma(big + small) - lgamma(big)], the bracket by Stirling.
        return a * log_x + b * log_y - math.lgamma(small) + _log_gamma_ratio(big, small)
    return a * log_x + b * log_y - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b)


def _log_scaled(excess: float, log_v: float, other_over_own: float) -> float:
    """``log(v (a+b)/a)`` given ``excess = v (a+b)/a - 1``: log1p near 1, plain logs far from it.

    Near 1 the log1p form is exact where the plain logs cancel; far from 1 (``v`` tiny)
    ``1 + excess`` would itself round away the digits that matter.
    """
    if abs(excess) < 0.5:
        return math.log1p(excess)
    return log_v + math.log1p(other_over_own)


def _log_gamma_ratio(big: float, small: float) -> float:
    """``log(Gamma(big + small) / Gamma(big))`` for ``big >= 10``, without cancelling lgammas:
    ``(big - 1/2) log1p(small/big) + small log(big + small) - small + s(big + small) - s(big)``.
    """
    return (
        (big - 0.5) * math.log1p(small / big)
        + small * math.log(big + small)
        - small
        + _stirling_error(big + small)
        - _stirling_error(big)
    )


def _stirling_error(x: float) -> float:
    """``s(x) = lgamma(x) - (x - 1/2) log x + x - log(2 pi)/2``; asymptotic series for x >= 10."""
    if x < 10:
        return math.lgamma(x) - (x - 0.5) * math.log(x) + x - 0.5 * math.log(2 * math.pi)
    inv, inv2 = 1 / x, 1 / (x * x)
    series = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
    total = 0.0
    for coefficient in reversed(series):
        total = total * inv2 + coefficient
    return total * inv
