"""The logit products ``(s - max s) * c`` at extreme units.

XLA flushes subnormals to 0, so a split product of a scale ``c = ε/(2Δ)`` below about
``2**-103`` (scores and Δ in units of 1e36) or above ``2**102`` (units of 1e-36)
lost up to ``2**-11`` of the logit: 0.019 nats at a logit of -79, 3e4 times the
stated bound. Every kernel that forms the product rebalances it first
(:func:`jaxdp._twofloat.balance`). Each check below is against mpmath on the exact
product of the float32 inputs, at the bound the kernel's docstring states, and fails
with the rebalancing removed.
"""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import jaxdp
from jaxdp import _continuous, _descent, _joint_top_k, _measure, _noisy_kernels
from jaxdp import _twofloat as _tf

U = 2.0**-24
F32 = np.float32
RNG = np.random.default_rng(0)
# (scores, ε, Δ): c ~ 2**-120.6, c ~ 2**118.6, ordinary units, and the worst gap: d with
# its low 12 bits set just below 2**-114, at a logit of -79.
WORST_D = np.frombuffer(np.uint32(0x067FFFFF).tobytes(), F32)[0]
CASES = {
    "units_1e36": (F32(3e37) - RNG.uniform(0, 2e37, 64).astype(F32), 1.0, 1e36),
    "units_1e-36": (F32(3e-35) - RNG.uniform(0, 2e-35, 64).astype(F32), 1.0, 1e-36),
    "ordinary": (F32(30) - RNG.uniform(0, 20, 64).astype(F32), 1.0, 1.0),
    "worst_gap": (np.array([0.0, -WORST_D], F32), 1.0, float(WORST_D) / 79 / 2),
}


def _logits(scores, m, c):
    mpmath.mp.prec = 200
    return [(mpmath.mpf(float(s)) - mpmath.mpf(float(m))) * mpmath.mpf(float(c)) for s in scores]


def _errors(name):
    """Each kernel's largest error on one case, in units of u, and its stated bound."""
    scores, eps, sens = CASES[name]
    m = scores.max()
    c0 = jnp.float32(eps) / (2 * jnp.float32(sens))
    out = {}
    c = _descent.scale_down(c0)
    w = np.asarray(jax.jit(_descent.weights)(scores[None], m[None], c[None]))[0]
    t = _logits(scores, m, c)
    out["weights"] = (
        max(
            abs(float(mpmath.mpf(float(a)) / mpmath.exp(b) - 1))
            for a, b in zip(w, t, strict=True)
            if b > -85
        ),
        _descent.weight_error() / U,
    )
    cr = _noisy_kernels.round_down_scale(c0)
    r = np.asarray(jax.jit(_noisy_kernels.race_rates)(scores[None], m[None, None], cr[None, None]))
    t = _logits(scores, m, cr)
    out["race_rates"] = (
        max(
            abs(float(mpmath.mpf(float(a)) * mpmath.exp(b) - 1))
            for a, b in zip(r[0], t, strict=True)
            if b > -80
        ),
        _descent.EXP_ERROR_U + 1.25,
    )
    hi, lo, _ = jax.jit(_measure.combined_logits)(
        scores[None], jnp.zeros((1, len(scores))), c[None]
    )
    t = _logits(scores, m, c)
    pairs = zip(np.asarray(hi)[0], np.asarray(lo)[0], t, strict=True)
    out["combined_logits"] = (
        max(
            abs(float(mpmath.mpf(float(h)) + mpmath.mpf(float(lo_)) - b))
            for h, lo_, b in pairs
            if b > -85
        ),
        1.0,  # the logit's error is u**2 times its size and the row's constants: far below u
    )
    cs = np.sort(scores)[::-1].copy()
    wj, big_t = jax.jit(_joint_top_k.group_weights, static_argnums=2)(cs[None], c[None], 1)
    wj, big_t = np.asarray(wj)[0, 0], float(np.asarray(big_t)[0])
    t = _logits(cs, cs[0], c)
    scale = mpmath.mpf(2) ** (-big_t)
    out["group_weights"] = (
        max(
            abs(float(mpmath.mpf(float(a)) / (mpmath.exp(b) * scale) - 1))
            for a, b in zip(wj, t, strict=True)
            if b > -85
        ),
        _joint_top_k.weight_error(len(scores), 1) / U,
    )
    return {k: (err / U, bound) for k, (err, bound) in out.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_logit_products_within_their_bounds(name):
    for kernel, (err, bound) in _errors(name).items():
        assert err <= bound, (kernel, err, bound)


@pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="the failure it shows is the CPU's: on a GPU (H100, 2026-11-27) the "
    "unbalanced products came out within their bounds (fused multiply-adds)",
)
def test_without_rebalancing_the_check_fails(monkeypatch):
    """The negative control: the same kernels with the rebalancing removed."""

    def identity(d_hi, d_lo, c):
        return d_hi, d_lo, c

    monkeypatch.setattr(_tf, "balance", identity)
    monkeypatch.setattr(_noisy_kernels, "balance", identity)
    monkeypatch.setattr(_measure, "balance", identity)
    jax.clear_caches()
    for name in ("units_1e36", "units_1e-36", "worst_gap"):
        errors = _errors(name)
        assert all(err > bound for err, bound in errors.values()), (name, errors)
    jax.clear_caches()


def test_balance_keeps_the_product_and_infinities():
    """The rebalanced product is the same real number wherever nothing under- or
    overflows; a gap scaled beyond the cap stays a product of at least 2**56; an
    infinite gap stays infinite unless the scale is large (then clipped, finite)."""
    d = jnp.array([-3.0, 0.0, -jnp.inf, -(2.0**-90), -(2.0**100)], jnp.float32)
    for c in (2.0**-120, 2.0**-59, 1.0, 2.0**59, 2.0**120):
        hi, lo, c2 = _tf.balance(d, jnp.zeros_like(d), jnp.float32(c))
        prod = np.asarray(hi, np.float64) * float(c2)
        want = np.asarray(d, np.float64) * c
        exact = np.isfinite(want) & (np.abs(want) < 2.0**56) & (np.abs(want) >= 2.0**-100)
        np.testing.assert_array_equal(prod[exact], want[exact])
        tiny = np.abs(want) < 2.0**-100  # may underflow: then below 2**-122 anyway
        assert np.all(np.abs(prod[tiny] - want[tiny]) <= 2.0**-122)
        big = np.abs(want) >= 2.0**56
        assert np.all(np.abs(prod[big]) >= 2.0**56), (c, prod, want)
        assert np.isneginf(np.asarray(hi)[2]) == (c <= 2.0**60)


# ----------------------------------------------------------------------------- continuous

M = mpmath.mpf


def _affine_error(c, m, r):
    h, lo = jax.jit(_continuous._affine)(jnp.asarray(c), jnp.asarray(m), jnp.asarray(r))
    rows = zip(np.asarray(h), np.asarray(lo), c, m, r, strict=True)
    return max(
        abs(M(float(a)) + M(float(b)) - (M(float(ci)) + M(float(mi)) * M(float(ri))))
        / abs(M(float(ci)) + M(float(mi)) * M(float(ri)))
        for a, b, ci, mi, ri in rows
    )


def test_affine_utilities_at_extreme_units():
    """exponential_piecewise's c + m r within 2u**2 relative for slopes of 1e-36 over
    edges of 1e36 and the reverse (the unrescaled product loses up to 2**-11)."""
    rng = np.random.default_rng(1)
    small = (rng.uniform(1, 2, 64) * 1e-36).astype(F32)
    large = (rng.uniform(1, 2, 64) * 1e36).astype(F32)
    c = np.zeros(64, F32)
    for m, r in ((small, large), (large, small)):
        assert _affine_error(c, m, r) <= 2 * U * U
        ph, pl = _tf.two_prod(jnp.asarray(m), jnp.asarray(r))  # the product unrescaled
        old = max(
            abs(M(float(a)) + M(float(b)) - M(float(x)) * M(float(y))) / (M(float(x)) * M(float(y)))
            for a, b, x, y in zip(np.asarray(ph), np.asarray(pl), m, r, strict=True)
        )
        if jax.default_backend() == "cpu":  # a GPU's fused multiply-add gets it exact
            assert old > 100 * U  # what the check would catch


def _gap_error(util, k):
    """The largest absolute error of _scaled_gap's ``k (util - max util)``."""
    best = util.max()
    args = ((jnp.asarray(util)[None], jnp.zeros((1, len(util)), jnp.float32)), best[None], k[None])
    h, lo = jax.jit(_continuous._scaled_gap)(*args)
    pairs = zip(np.asarray(h)[0], np.asarray(lo)[0], util, strict=True)
    return max(
        abs(M(float(a)) + M(float(b)) - (M(float(x)) - M(float(best))) * M(float(k)))
        for a, b, x in pairs
    )


def test_scaled_gaps_and_price_logits_at_extreme_units(monkeypatch):
    """scale (u - best) in units of 1e37 and of 1e-35 within 4u**2 k (|u| + |best|), and
    private_price's revenue logits with bids of 1e-35 within the stated nu; without
    the rebalancing the scaled gaps fail the same check."""
    rng = np.random.default_rng(1)
    for util, k in (
        (F32(3e37) - rng.uniform(0, 2e37, 64).astype(F32), F32(5e-37)),
        (F32(3e-35) - rng.uniform(0, 2e-35, 64).astype(F32), F32(5e35)),
    ):
        best = util.max()
        bound = 4 * U * U * float(k) * 2 * abs(float(best))
        assert _gap_error(util, k) <= bound
        monkeypatch.setattr(_tf, "balance", lambda d_hi, d_lo, c: (d_hi, d_lo, c))
        jax.clear_caches()
        if jax.default_backend() == "cpu":  # a GPU's fused multiply-add gets it exact
            assert _gap_error(util, k) > 100 * U
        monkeypatch.undo()
        jax.clear_caches()

    n = 200
    hi = F32(1e-35)
    prices = np.concatenate([np.sort((rng.uniform(0.5, 1, n) * 1e-35).astype(F32)), [hi]])
    scale = np.asarray(_continuous._scale(jnp.float32(1.0), jnp.float32(hi), False, jnp.float32))
    h, lo = jax.jit(_continuous._price_logits)(jnp.asarray(prices)[None], scale.reshape(1))
    rev = [(n - j) * M(float(p)) for j, p in enumerate(prices)]
    best = max(rev)
    errs = [
        M(float(a)) + M(float(b)) - (x - best) * M(float(scale))
        for a, b, x in zip(np.asarray(h)[0], np.asarray(lo)[0], rev, strict=True)
    ]
    assert float((max(errs) - min(errs)) / 2) <= 3 * U * U * n  # a common offset cancels


# Finite scores whose differences overflow float32: the top one is 3e38 above the
# next, so every sampler returns it (each other outcome's weight is e**-(c 3e38) = 0).
SPAN = np.array([-3e38, 0.0, 3e38, 1.0], F32)
SPAN_PATHS = {
    **{
        f"exponential_{method}_{draws}": (
            lambda key, s, m=method, d=draws: jaxdp.exponential(
                key, s, epsilon=1.0, sensitivity=1.0, method=m, shape=(d,)
            )
        )
        for method in ("auto", "gumbel", "inverse_cdf")
        for draws in (1, 5000)
    },
    **{
        f"report_noisy_max_{noise}_{draws}": (
            lambda key, s, z=noise, d=draws: jaxdp.report_noisy_max(
                key, s, epsilon=1.0, sensitivity=1.0, noise=z, shape=(d,)
            )
        )
        for noise in ("laplace", "gumbel", "exponential")
        for draws in (1, 5000)
    },
    **{
        f"permute_and_flip_{draws}": (
            lambda key, s, d=draws: jaxdp.permute_and_flip(
                key, s, epsilon=1.0, sensitivity=1.0, shape=(d,)
            )
        )
        for draws in (1, 5000)
    },
    "top_k": lambda key, s: jaxdp.top_k(key, s, 2, epsilon=1.0, sensitivity=1.0)[..., :1],
    "top_k_float64": lambda key, s: jaxdp.top_k(
        key, jnp.concatenate([s, jnp.full(4, -1e38, s.dtype)]), 5, epsilon=1.0, sensitivity=1.0
    )[..., :1],
    "joint_top_k": lambda key, s: jaxdp.joint_top_k(key, s, 2, epsilon=1.0, sensitivity=1.0)[
        ..., :1
    ],
}


@pytest.mark.parametrize("name", sorted(SPAN_PATHS))
def test_scores_spanning_more_than_float32(name):
    """A difference that overflows to -inf is a weight of 0, not an invalid row: the
    categorical kernel's weights were NaN there, and the row returned -1."""
    out = np.asarray(SPAN_PATHS[name](jax.random.key(0), jnp.asarray(SPAN)))
    np.testing.assert_array_equal(out, np.full(out.shape, 2))
    log_p = np.asarray(jaxdp.exponential_log_probs(SPAN, epsilon=1.0, sensitivity=1.0))
    assert log_p[2] == 0 and np.all(log_p[[0, 1, 3]] < -1e37)
