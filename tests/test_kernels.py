"""The sampling kernels: exactness of the fast paths against plain references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, exponential_law, laplace_noisy_max_law

import jaxdp
from jaxdp import _inverse_cdf, _kernels, _random, _threefry, _tuning


@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (1000, 3)])
@pytest.mark.parametrize("bits", [8, 16, 32])
def test_fused_threefry_is_bit_identical(shape, bits):
    key = jax.random.key(11)
    dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}[bits]
    ref = jax.random.bits(key, shape, dtype)
    fast = jax.jit(lambda k: jax.random.bits(_threefry.fused_threefry(k), shape, dtype))(key)
    np.testing.assert_array_equal(np.asarray(ref), np.asarray(fast))
    ref_split = jax.random.key_data(jax.random.split(key, 3))
    fast_split = jax.random.key_data(jax.random.split(_threefry.fused_threefry(key), 3))
    np.testing.assert_array_equal(np.asarray(ref_split), np.asarray(fast_split))
    folded = jax.random.key_data(jax.random.fold_in(_threefry.fused_threefry(key), 5))
    np.testing.assert_array_equal(
        np.asarray(folded), np.asarray(jax.random.key_data(jax.random.fold_in(key, 5)))
    )


@pytest.mark.parametrize("shape", [(), (2,), (7,), (3, 4)])
def test_fused_threefry_split_is_bit_identical(shape):
    """The fused implementation's own split (unrolled, not JAX's rolled loop) gives
    JAX's keys bit for bit: eager, jitted and under vmap over a batch of keys."""
    keys = jax.random.split(jax.random.key(5), 12)
    fused = jax.vmap(_threefry.fused_threefry)(keys)
    for i in (0, 11):
        ref = jax.random.key_data(jax.random.split(keys[i], shape))
        eager = jax.random.key_data(jax.random.split(fused[i], shape))
        np.testing.assert_array_equal(np.asarray(ref), np.asarray(eager))
    split = jax.vmap(lambda k: jax.random.key_data(jax.random.split(k, shape)))
    ref = jax.jit(split)(keys)
    np.testing.assert_array_equal(np.asarray(ref), np.asarray(jax.jit(split)(fused)))


def test_fused_threefry_bit_identical_float64_and_noise():
    key = jax.random.key(3)
    with jax.enable_x64():
        ref = jax.random.bits(key, (257,), jnp.uint64)
        fast = jax.random.bits(_threefry.fused_threefry(key), (257,), jnp.uint64)
        np.testing.assert_array_equal(np.asarray(ref), np.asarray(fast))
    for noise in (_random.uniform, _random.gumbel, _random.laplace, _random.exponential):
        a = jax.jit(lambda k, f=noise: f(k, (64, 9), jnp.float32))(key)
        b = jax.jit(lambda k, f=noise: f(_threefry.fused_threefry(k), (64, 9), jnp.float32))(key)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = jax.random.key(0, impl="rbg")
    assert _threefry.fast_key(other) is other


def _block_law_case(n, seed):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n) * 2
    scores[rng.integers(n, size=n // 4)] = -np.inf
    scores[: min(n, 70)] = -np.inf  # whole blocks of zero mass
    scores[-1] = -np.inf
    scores[n // 2] = scores[n // 3] = 6.0  # an exact tie at the top
    return scores


@pytest.mark.parametrize(
    ("n", "rows", "wrong_eps"), [(100, 200_000, 1.6), (2200, 30_000, 1.3), (9000, 40_000, 1.6)]
)
def test_blocked_law(n, rows, wrong_eps):
    """One draw for each of many rows: the multi-level block search (blocks of
    32 in two levels for n=100; blocks of 64 in two levels for n=2200, three
    for n=9000) matches the exact law."""
    scores = _block_law_case(n, n)
    if n > 64 * 128:  # few finite scores, spread over many blocks
        finite = np.random.default_rng(0).choice(n, size=80, replace=False)
        sparse = np.full(n, -np.inf)
        sparse[finite] = scores[finite]
        sparse[finite[:2]] = 6.0
        scores = sparse
    eps = np.full(rows, 1.7)
    draws = jaxdp.exponential(
        jax.random.key(9), scores, epsilon=eps, sensitivity=1.0, method="inverse_cdf"
    )
    assert draws.shape == (rows,)
    assert_matches_law(draws, exponential_law(scores, 1.7, 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exponential_law(scores, wrong_eps, 1.0))


def test_blocked_path_without_scores_and_underflow():
    """The kernel alone (leaves read from the logits) never returns an outcome
    of logit -inf, even when every finite logit underflows exp()."""
    n = 300
    logits = np.full((4000, n), -np.inf, np.float32)
    logits[:, 7] = 0.0
    logits[:, 100:140] = -200.0  # exp underflows to 0: mass only by rounding
    logits[:, 250] = 0.0
    out = jax.jit(lambda k, x: _inverse_cdf.from_logits(k, x, (4000,))[0])(
        jax.random.key(2), logits
    )
    out = np.asarray(out)
    assert set(np.unique(out)) <= {7, 250} | set(range(100, 140))
    frac = np.mean(out == 7)
    assert 0.45 < frac < 0.55


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_no_nan_for_extreme_scale(method):
    """epsilon / sensitivity overflowing or underflowing float32 gives no NaN."""
    scores = np.array([0.0, -1.0, 2.0, -np.inf, 2.0])
    for eps, sens in [(1e30, 1e-30), (1e-30, 1e30)]:
        d = jaxdp.exponential(
            jax.random.key(1), scores, epsilon=eps, sensitivity=sens, shape=(2000,), method=method
        )
        d = np.asarray(d)
        assert d.min() >= 0 and not np.any(d == 3)
        if eps > 1:
            assert set(np.unique(d)) <= {2, 4}


def test_noisy_argmax_long_rows_scan_blocks(monkeypatch):
    """Rows longer than a chunk are scanned block by block with a running max."""
    monkeypatch.setitem(_tuning.RACE_CHUNK, _tuning.kind(), 64)
    scores = np.array([0.0, 1.0, -np.inf, 0.5] * 40)  # n = 160 > 64
    draws = jaxdp.report_noisy_max(
        jax.random.key(4), scores, epsilon=2.0, sensitivity=1.0, noise="gumbel", shape=(20_000,)
    )
    assert_matches_law(draws, exponential_law(scores, 2.0, 1.0))
    top = jaxdp.top_k(jax.random.key(4), scores, 3, epsilon=1e6, sensitivity=1.0, shape=(5,))
    assert np.all(np.asarray(top)[:, 0] % 4 == 1) and np.all(np.asarray(top) % 4 == 1)


def test_choose_method_rule():
    assert _kernels.choose_method(10**6, 1000, 1) == "inverse_cdf"
    assert _kernels.choose_method(1, 1000, 10**4) == "inverse_cdf"
    assert _kernels.choose_method(1, 8, 10**4) == _tuning.choose_method(1, 8, 10**4, "cpu")


def test_noisy_argmax_blocks_of_rows_from_scores(monkeypatch):
    """Rows longer than nothing but too many for one chunk: blocks of rows whose
    logits are recomputed from the scores (no (B, n) copy), one draw each."""
    monkeypatch.setitem(_tuning.RACE_CHUNK, _tuning.kind(), 600)
    row = np.array([0.0, 1.0, -3.0, 0.5, 2.0, -1.0, 0.0, 1.5, 0.25, -0.5])
    scores = np.tile(row, (3000, 1))
    draws = jaxdp.report_noisy_max(
        jax.random.key(6), scores, epsilon=1.5, sensitivity=1.0, noise="laplace", shape=(100, 3000)
    )
    assert draws.shape == (100, 3000)
    assert_matches_law(draws, laplace_noisy_max_law(row, 1.5, 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, laplace_noisy_max_law(row, 1.2, 1.0))
    fn = jax.jit(
        lambda k, s: jaxdp.report_noisy_max(k, s, epsilon=1.0, sensitivity=1.0, noise="laplace")
    )
    wide = jnp.tile(jnp.linspace(0.0, 1.0, 200, dtype=jnp.float32), (3000, 1))
    stats = fn.lower(jax.random.key(0), wide).compile().memory_analysis()
    assert stats.temp_size_in_bytes < wide.size * 4 // 8  # no copy of the logits
