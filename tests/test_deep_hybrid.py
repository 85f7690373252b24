"""Deeper hybrids of the categorical kernel (jaxdp._descent, depth j >= 2): an alias
table over level j of the descent (the high words of its double-float sums), then
the j levels below the drawn node.

The rule that picks a depth, the law at every (size, depth) pair the rule can take
(every table width of depth 2, forced on), twins with a wrong table level or a
wrong level below it that the same tests reject, the table level's implemented
law computed exactly on issue 10's neighbours, and the shapes that take it by
default (issue 11's C4 at n = 10**5, a few rows).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_alias import _grouped_law, _weights
from test_descent import _group_pvalue as _pvalue
from test_hybrid import _hybrid_law, check_invalid_rows, check_neighbours, row_laws

import jaxdp
from jaxdp import _alias, _descent, _threefry, _tuning

# The CPU's layout rules on every backend: these tests reach each layout through them.
pytestmark = pytest.mark.usefixtures("cpu_layout_rules")

K = _descent.K
U = 2.0**-24


def _force(monkeypatch, depth):
    monkeypatch.setattr(_tuning, "hybrid_depth", lambda *args, **kwargs: depth)
    jax.clear_caches()


@pytest.fixture(autouse=True)
def _fresh_caches():
    yield
    jax.clear_caches()  # forced depths must not leak into other tests' traces


def _depths(n):
    """The depths j >= 2 the rule may take for rows of n: below the top level."""
    return list(range(2, len(_descent.level_counts(n)) - 1))


# ----------------------------------------------------------------------------- the rule


def test_level_counts_match_the_padded_sizes():
    for n in (9, 64, 65, 513, 4096, 10**5, 2**20 - 3, 2**20, 10**7):
        padded = [max(K, -(-c // K) * K) for c in _descent.level_counts(n)]
        assert padded == _descent.level_sizes(n)


@pytest.mark.parametrize(
    "n, draws, rows, depth",
    [
        (10**5, 10**4, 1, 2),  # issue 11's C4
        (10**5, 999, 1, 0),  # fewer draws than measured to pay
        (10**5, 1000, 1, 3),
        (10**6, 10**5, 1, 2),
        (10**6, 10**4, 1, 3),
        (10**4, 10**3, 4, 2),
        (10**4, 10**3, 32, 2),
        (10**4, 10**3, 33, 0),  # more rows than measured: the descent
        (4096, 1000, 1, 2),
        (4095, 1000, 1, 0),  # below min_n
        (2**20, 1000, 1, 4),  # the first level whose table gets two draws per column
        (10**5, 1, 1000, 0),  # one draw per row (C5's shape)
        (10**5, 1, 1, 0),
        (2**20 + 1, 10**5, 1, 0),  # beyond the largest table
        (10**5, 50_000, 1, 2),  # in the band, three draws per depth-1 column: depth 2
        (10**5, 10**5, 1, 2),  # six per depth-1 column: one row's depth 2 (below 12)
        (10**5, 2 * 10**5, 1, 1),  # twelve per depth-1 column: the band's depth 1
        (10**4, 16000, 4, 1),  # eight per depth-1 column, several rows: depth 1 (below 6)
        (10**4, 10**4, 1, 2),  # issue 11's C4 at n = 10**4: five per depth-1 column
        (10**4, 10**4, 2, 2),  # two rows below a draw per column: the deep rule
        (2000, 1000, 1, 1),  # below the deep rule's min_n: depth 1
        (1000, 1024, 1, 1),  # C2's shape
    ],
)
def test_rule(n, draws, rows, depth):
    assert _tuning.hybrid_depth(n, draws, num_rows=rows) == depth
    assert _descent.hybrid_depth(n, draws, num_rows=rows) == depth
    assert (_tuning.layout(n, draws, num_rows=rows) == "hybrid") == (depth > 0)
    if depth >= 2:
        assert depth in _depths(n)
        count = _descent.level_counts(n)[depth]
        assert draws >= 2 * 2 ** _alias.log2_columns(count)


# ----------------------------------------------------------------------------- law

# Every width b_2 = 4..14 of the depth-2 table (level 2 below the top, so at least
# 9 nodes), with a partial last node (64 * 2**(b - 1) + 1 outcomes), and 2**20; at
# each size every deeper depth the rule could take (widths 4..11 at depth 3, 4..8
# at depth 4, 4..5 at depth 5).
SIZES = [K**2 * 2 ** (b - 1) + 1 for b in range(4, 15)] + [2**20]
CASES = [(n, j) for n in SIZES for j in _depths(n)]


def test_forcing_takes_the_deep_path(monkeypatch):
    """The forced depth reaches the kernel: its program builds an alias table (a
    ``cummin`` for the next heavy column, which the descent has not) and its draws
    differ from the descent's on the same key."""
    n, draws = 4097, 1000
    scores = jnp.asarray(np.random.default_rng(0).normal(size=n), jnp.float32)

    def call(depth):
        _force(monkeypatch, depth)
        fn = lambda k: jaxdp.exponential(k, scores, epsilon=1.0, sensitivity=1.0,  # noqa: E731
                                         shape=(draws,))  # fmt: skip
        return str(jax.make_jaxpr(fn)(jax.random.key(0))), np.asarray(fn(jax.random.key(0)))

    (jaxpr0, r0), (jaxpr2, r2) = call(0), call(2)
    assert "cummin" in jaxpr2 and "cummin" not in jaxpr0
    assert np.mean(r0 != r2) > 0.5


def test_cases_cover_every_width():
    widths = {}
    for n, j in CASES:
        widths.setdefault(j, set()).add(_alias.log2_columns(_descent.level_counts(n)[j]))
    assert widths[2] == set(range(4, 15))
    assert widths[3] == set(range(4, 12))
    assert widths[4] == set(range(4, 9))
    assert widths[5] == {4, 5}


@pytest.mark.parametrize("n, depth", CASES)
def test_law_every_depth_and_width(n, depth, monkeypatch):
    """Drawn through ``exponential`` (weights recomputed from the scores at each
    draw), with the depth forced; 0.8 ε is rejected."""
    _force(monkeypatch, depth)
    eps = 2.0
    g, scores, probs = _grouped_law(n, eps)
    draws = max(200_000, n // 2)
    r = np.asarray(jaxdp.exponential(jax.random.key(n + depth), scores, epsilon=eps,
                                     sensitivity=1.0, shape=(draws,)))  # fmt: skip
    assert r.min() >= 0 and r.max() < n
    assert _pvalue(r, g, probs) > 1e-4
    assert _pvalue(r, g, _grouped_law(n, 0.8 * eps)[2]) < 1e-4


@pytest.mark.parametrize("n, depth", [(4097, 2), (2**17 + 1, 3), (2**20, 5)])
def test_law_given_weights(n, depth, monkeypatch):
    """The same through ``_descent.sample`` (weights given, as the tabulated noisy
    max, joint top-k and the measures use it)."""
    _force(monkeypatch, depth)
    eps = 2.0
    g, scores, probs = _grouped_law(n, eps)
    w = _weights(scores, eps)[None]
    key = _threefry.fast_key(jax.random.key(depth))
    r, ok = jax.jit(_descent.sample, static_argnums=2)(key, w, 200_000)
    assert bool(ok[0])
    assert _pvalue(r, g, probs) > 1e-4
    assert _pvalue(r, g, _grouped_law(n, 0.8 * eps)[2]) < 1e-4


def _wrong_level(monkeypatch, level):
    """Patches the descent's tables so that level ``level``'s masses are raised to
    the power 1.02 after the levels above were summed from the right ones."""
    right = _descent._tables

    def wrong(leaves, blocks, n, levels=None):
        tables = right(leaves, blocks, n, levels)
        hi, lo = tables[level]
        tables[level] = (hi**1.02, lo)
        return tables

    monkeypatch.setattr(_descent, "_tables", wrong)
    jax.clear_caches()


def test_law_test_catches_a_wrong_table_level(monkeypatch):
    """The law test above rejects a deep hybrid whose table is built over wrong
    level-2 masses (the levels below are right)."""
    n = 2**15 + 1
    _force(monkeypatch, 2)
    _wrong_level(monkeypatch, 2)
    g, scores, probs = _grouped_law(n, 2.0)
    r = jaxdp.exponential(jax.random.key(1), scores, epsilon=2.0, sensitivity=1.0,
                          shape=(10**6,))  # fmt: skip
    assert _pvalue(r, g, probs) < 1e-6


def _lane_law(n, eps, stride):
    """Scores that differ by ``(i // stride) % K`` (the lane of ``i``'s node of size
    ``stride`` within its parent), and the law of that lane."""
    lane = (np.arange(n) // stride) % K
    scores = jnp.asarray(lane * -0.3, jnp.float32)
    p = np.exp(eps * np.asarray(scores, np.float64) / 2)
    return lane, scores, np.bincount(lane, weights=p / p.sum(), minlength=K)


def test_law_test_catches_a_wrong_level_below_the_table(monkeypatch):
    """A deep hybrid whose walk below the table is wrong at level 1 (the block sums
    it compares raised to the power 1.02, the table above right) is rejected by
    the law of the blocks' lanes, which the right one passes."""
    n, eps, draws = 2**15, 2.0, 10**6
    lane, scores, law = _lane_law(n, eps, K)
    _force(monkeypatch, 2)
    right = np.asarray(jaxdp.exponential(jax.random.key(2), scores, epsilon=eps,
                                         sensitivity=1.0, shape=(draws,)))  # fmt: skip
    assert _pvalue(right, lane, law) > 1e-4
    _wrong_level(monkeypatch, 1)
    wrong = jaxdp.exponential(jax.random.key(2), scores, epsilon=eps, sensitivity=1.0,
                              shape=(draws,))  # fmt: skip
    assert _pvalue(wrong, lane, law) < 1e-6


# ----------------------------------------------------------------------------- exact law


def _bound(n, depth):
    # The float32 block sums ((K - 1) u), the high word (u), the double-float sums
    # (far below u), on each side of the ratio, and the table's own a_t.
    b = _alias.log2_columns(_descent.level_counts(n)[depth])
    return 2 * (K + 1) * U + _alias.table_error(b)


@pytest.mark.parametrize("depth", [2, 3])
def test_deep_law_is_within_its_bound(depth):
    scores = np.random.default_rng(0).normal(size=10**5).astype(np.float32) * 20
    w = np.asarray(_weights(scores, 2.0), np.float64)
    p, q = _hybrid_law(w.astype(np.float32), depth), w / w.sum()
    excess = np.abs(p - q) - _bound(w.size, depth) * q
    assert np.all(excess <= 2 * 2.0**-64)


def test_deep_law_check_catches_wrong_weights():
    """The check above fails for level masses built from slightly wrong weights."""
    scores = np.random.default_rng(0).normal(size=10**5).astype(np.float32) * 20
    w = np.asarray(_weights(scores, 2.0), np.float64)
    wrong = (w * (1 + 1e-5 * (np.arange(w.size) // K**2 % 2))).astype(np.float32)
    p, q = _hybrid_law(wrong, 2), w / w.sum()
    assert np.max(np.abs(p - q) - _bound(w.size, 2) * q) > 2 * 2.0**-64


@pytest.mark.parametrize(
    "case, depth",
    [("finding 1", 2)] + [("dominant then tiny", depth) for depth in (2, 3, 5)],
)
def test_adversarial_neighbours_exactly(case, depth):
    """Issue 10's attacks on the deep hybrid, with room for the ``depth`` proven
    levels' 2**-23 on each side (:func:`test_hybrid.check_neighbours`)."""
    size = {"finding 1": 4096, "dominant then tiny": 2**20 - 3}[case]
    assert depth in _depths(size)
    check_neighbours(case, depth)


def test_stated_guarantee_covers_every_depth():
    for n in (4096, 10**5, 2**20):
        eps_p, delta_p = _descent.guarantee(n, 1.0)
        for j in _depths(n):
            b = _alias.log2_columns(_descent.level_counts(n)[j])
            a = 12 * U + (K - 1) * U + U + _alias.table_error(b) + j * 2.0**-23
            assert eps_p >= 1.0 + 4 * a
            delta_j = (1 + np.exp(1.0 + 4 * a)) * 2.0 ** -(60 - b) + j * (K - 1) * 2.0**-40
            assert delta_p >= delta_j


# ----------------------------------------------------------------------------- shapes


def test_c4_shape_by_default():
    """Issue 11's C4 at n = 10**5 (10**4 draws of one row) takes depth 2 under the
    default rule; 100 calls in one program follow the law, and not 0.8 ε's."""
    n, draws, reps, eps = 10**5, 10**4, 30, 2.0
    assert _tuning.hybrid_depth(n, draws) == 2
    g, scores, probs = _grouped_law(n, eps)

    @jax.jit
    def many(key):
        def one(k):
            return jaxdp.exponential(k, scores, epsilon=eps, sensitivity=1.0, shape=(draws,))

        return jax.vmap(one)(jax.random.split(key, reps))

    r = np.asarray(many(jax.random.key(8)))
    assert _pvalue(r, g, probs) > 1e-4
    assert _pvalue(r, g, _grouped_law(n, 0.8 * eps)[2]) < 1e-4


def test_rows_do_not_mix_by_default():
    """Four rows of 10**4 drawn 10**3 times each take depth 2 by default; each row
    follows its own law and not the next row's."""
    n, draws = 10**4, 1000
    assert _tuning.hybrid_depth(n, draws, num_rows=4) == 2
    rows = np.stack([np.linspace(0, -k, n) for k in (1.0, 5.0, 20.0, 40.0)]).astype(np.float32)

    @jax.jit
    def many(key):
        def one(k):
            return jaxdp.exponential(k, rows, epsilon=1.0, sensitivity=1.0, shape=(draws, 4))

        return jax.vmap(one)(jax.random.split(key, 200))

    r = np.asarray(many(jax.random.key(9)))
    g, laws = row_laws(rows)
    for k in range(4):
        assert _pvalue(r[..., k], g, laws[k]) > 1e-4
        assert _pvalue(r[..., k], g, laws[(k + 1) % 4]) < 1e-6


def test_invalid_and_degenerate_rows(monkeypatch):
    """Invalid rows are flagged at depth 2 too (:func:`test_hybrid.check_invalid_rows`)."""
    _force(monkeypatch, 2)
    assert 2 in _depths(600)
    check_invalid_rows(600, 500)
