"""64-bit integer inputs with x64 off: exact, never wrapped modulo 2**32.

``jnp.asarray`` truncates int64 to int32 when ``jax_enable_x64`` is off, so a count
of 2**31 + 10 became -2**31 + 10 and a millisecond timestamp became noise (and a
Python int beyond int32 raised ``OverflowError``). jaxdp converts such host data
itself: scores to their exact gaps to the row maximum, data to the nearest float32,
categories after a range check (float64 and int64 *values* of ``laplace`` and
``gaussian`` are in test_additive.py).
"""

import jax
import numpy as np
import pytest
from laws import assert_matches_law, exponential_law

import jaxdp

KEY = jax.random.key(11)
BIG = np.array([2**40, 2**40 - 1, 2**40 - 3, 2**40 - 6, -(2**40)], np.int64)


def test_int64_scores_law_is_that_of_their_gaps():
    draws = jaxdp.exponential(KEY, BIG, epsilon=1.0, sensitivity=1.0, shape=(200_000,))
    gaps = (BIG - BIG.max()).astype(np.float64)  # exact: |gaps| < 2**53
    assert_matches_law(draws, exponential_law(gaps, 1.0, 1.0))
    with pytest.raises(AssertionError):  # what int32 wrapping would have drawn
        assert_matches_law(
            draws, exponential_law(BIG.astype(np.int32).astype(np.float64), 1.0, 1.0)
        )
    logp = jaxdp.exponential_log_probs(BIG, epsilon=1.0, sensitivity=1.0)
    with np.errstate(divide="ignore"):
        want = np.log(exponential_law(gaps, 1.0, 1.0))
    np.testing.assert_allclose(np.asarray(logp)[:4], want[:4], rtol=1e-6)
    assert np.asarray(logp)[4] < -1e11  # 2**41 below the top: 2**40 nats down


@pytest.mark.parametrize(
    "call",
    [
        lambda s: jaxdp.exponential(KEY, s, epsilon=1.0, sensitivity=1.0, shape=(1000, 2)),
        lambda s: jaxdp.report_noisy_max(KEY, s, epsilon=1.0, sensitivity=1.0, shape=(1000, 2)),
        lambda s: jaxdp.permute_and_flip(KEY, s, epsilon=1.0, sensitivity=1.0, shape=(1000, 2)),
        lambda s: jaxdp.top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0),
        lambda s: jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0),
    ],
)
def test_int64_scores_draw_as_their_int32_gaps(call):
    # Rows far beyond int32 whose gaps fit it: the same draws as the gaps themselves.
    scores = np.stack([BIG[:4], np.array([2**35 + 3, 2**35, 2**35 - 2, 2**35 - 100], np.int64)])
    gaps = (scores - scores.max(axis=1, keepdims=True)).astype(np.int32)
    np.testing.assert_array_equal(call(scores), call(gaps))
    # Python ints beyond int32 (an OverflowError from jnp.asarray before)
    np.testing.assert_array_equal(call(scores.tolist()), call(gaps))


def test_int64_gaps_beyond_int32_round_once():
    scores = np.array([2**62, 2**62 - 1, -(2**62)], np.int64)
    logp = np.asarray(jaxdp.exponential_log_probs(scores, epsilon=1.0, sensitivity=1.0))
    with np.errstate(divide="ignore"):
        want = np.log(exponential_law(np.array([0.0, -1.0, -(2.0**63)]), 1.0, 1.0))
    np.testing.assert_allclose(logp[:2], want[:2], rtol=1e-6)
    assert logp[2] < -1e18


def test_int64_data_are_rounded_not_wrapped():
    ts = 1_700_000_000_000 + np.arange(50, dtype=np.int64) * 1_000_000_000  # ms timestamps
    kw = dict(epsilon=1.0, bounds=(1.6e12, 1.8e12), shape=(64,))
    got = jaxdp.private_quantile(KEY, ts, 0.5, **kw)
    np.testing.assert_array_equal(
        got, jaxdp.private_quantile(KEY, ts.astype(np.float64), 0.5, **kw)
    )
    assert np.all((got > 1.6e12) & (got < 1.8e12))
    bids = np.full(20, 2**32 + 7, np.int64)
    kw = dict(epsilon=1.0, bounds=(0.0, 5e9), shape=(16,))
    np.testing.assert_array_equal(
        jaxdp.private_price(KEY, bids, **kw),
        jaxdp.private_price(KEY, bids.astype(np.float64), **kw),
    )


def test_int64_categories_are_range_checked_before_int32():
    ok = np.array([0, 2, 2, 1], np.int64)
    for fn in (jaxdp.private_mode, jaxdp.randomized_response):
        np.testing.assert_array_equal(
            fn(KEY, ok, epsilon=1.0, num_categories=3),
            fn(KEY, ok.astype(np.int32), epsilon=1.0, num_categories=3),
        )
        with pytest.raises(ValueError, match=r"num_categories=3\).*4294967297"):
            fn(KEY, np.array([1, 2**32 + 1], np.int64), epsilon=1.0, num_categories=3)  # not 1


def test_int64_labels_keep_their_equalities():
    # 2**32 + 1 wrapped to 1 would make hypothesis 1 as right as hypothesis 0
    labels = np.array([2**32 + 1, 5, 7], np.int64)
    predictions = np.array([[2**32 + 1, 5, 7], [1, 5, 7]], np.int64)
    draws = jaxdp.select_hypothesis(KEY, predictions, labels, epsilon=1.0, shape=(100_000,))
    # errors (0, 1): scores -errors/n at sensitivity 1/n, so P(0) = 1 / (1 + e**-0.5)
    assert_matches_law(draws, exponential_law(np.array([0.0, -1.0]), 1.0, 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, np.array([0.5, 0.5]))
