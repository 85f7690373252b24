"""The hybrid layout of the categorical kernel (jaxdp._descent): an alias table over
the leaves' blocks of K, then one level of the descent within the drawn block.

Its law at every block-table width it can build (forced on, both entry points),
its implemented law computed exactly at the table level on the adversarial
neighbours of issue 10, a dominant outcome followed by tiny ones, many rows, and
the shape it exists for (a ``vmap`` over an ε grid, chosen by the default rule).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from test_alias import _grouped_law, _privacy_loss, _weights, implemented_law
from test_descent import _group_pvalue as _pvalue

import jaxdp
from jaxdp import _alias, _descent, _threefry, _tuning

# The CPU's layout rules on every backend: these tests reach each layout through them.
pytestmark = pytest.mark.usefixtures("cpu_layout_rules")

K = _descent.K
U = 2.0**-24

#: Forces the hybrid for every size it can take (two blocks at least, a full table
#: within the largest width) and any row or draw count.
ALWAYS = {"min_n": 0, "bands": ((1 << 30, 0.0, 1e300),)}


@pytest.fixture
def hybrid_everywhere(monkeypatch):
    monkeypatch.setitem(_tuning.HYBRID, _tuning.kind(), ALWAYS)
    jax.clear_caches()
    yield
    jax.clear_caches()


# One size per width of the block table (b = 2..17 for 2..2**17 blocks), at the
# boundaries, with a last block of one leaf (8 * 2**b + 1) or full (2**20).
SIZES = [9, 17] + [K * 2**b + 1 for b in range(2, 17)] + [2**20]


def test_sizes_cover_every_block_table_width():
    widths = {_alias.log2_columns(-(-n // K)) for n in SIZES}
    assert widths == set(range(2, _alias.MAX_LOG2_COLUMNS - 3 + 1))
    assert max(SIZES) == 2**_alias.MAX_LOG2_COLUMNS  # the largest n the hybrid takes


def test_hybrid_needs_two_blocks_and_a_bounded_table(hybrid_everywhere):
    assert _tuning.layout(K, 100) != "hybrid"
    assert _tuning.layout(K + 1, 100) == "hybrid"
    assert _tuning.layout(2**20, 100, num_rows=7) == "hybrid"
    assert _tuning.layout(2**20 + 1, 100) == "descent"


@pytest.mark.parametrize("entry", ["scores", "weights"])
@pytest.mark.parametrize("n", SIZES)
def test_law_every_block_table_width(n, entry, hybrid_everywhere):
    """The law at every width, through ``exponential`` (weights recomputed from the
    scores at each draw) and through ``_descent.sample`` (weights given, as the
    tabulated noisy max, joint top-k and the measures use it); 0.8 ε is rejected."""
    eps = 2.0
    g, scores, probs = _grouped_law(n, eps)
    draws = max(200_000, n // 2)
    assert _tuning.layout(n, draws) == "hybrid"
    key = jax.random.key(n)
    if entry == "scores":
        r = jaxdp.exponential(key, scores, epsilon=eps, sensitivity=1.0, shape=(draws,))
    else:
        w = _weights(scores, eps)[None]
        r, ok = jax.jit(_descent.sample, static_argnums=2)(_threefry.fast_key(key), w, draws)
        assert bool(ok[0])
    r = np.asarray(r).ravel()
    assert r.min() >= 0 and r.max() < n
    assert _pvalue(r, g, probs) > 1e-4
    wrong = _grouped_law(n, 0.8 * eps)[2]
    assert _pvalue(r, g, wrong) < 1e-4


def test_law_test_catches_a_wrong_block_table(hybrid_everywhere, monkeypatch):
    """The same test against a deliberately wrong hybrid (its block sums to the power
    1.02, so that the table's law is off while the leaf level is right) rejects."""
    n, eps = 4097, 2.0
    g, scores, probs = _grouped_law(n, eps)
    right = _descent._leaf_block_sums
    monkeypatch.setattr(
        _descent, "_leaf_block_sums", lambda w_of, n, *a: right(w_of, n, *a) ** 1.02
    )
    jax.clear_caches()
    r = jaxdp.exponential(jax.random.key(1), scores, epsilon=eps, sensitivity=1.0, shape=(10**6,))
    assert _pvalue(r, g, probs) < 1e-6


def test_law_test_catches_a_wrong_leaf_level(hybrid_everywhere):
    """And a hybrid whose leaf level is wrong (the table over the right block sums,
    then a uniform leaf within the block) is rejected too."""
    n, eps, draws = 4097, 2.0, 10**6
    g, scores, probs = _grouped_law(n, eps)
    # Scores that differ inside every block, so that a uniform leaf is wrong.
    scores = scores + jnp.asarray((np.arange(n) % K) * -0.3, jnp.float32)
    s = np.asarray(scores, np.float64)
    p = np.exp(eps * (s - s.max()) / 2)
    p /= p.sum()
    w = _weights(scores, eps)[None]
    key = _threefry.fast_key(jax.random.key(2))
    blocks = _descent._leaf_block_sums(lambda cols: w[..., cols], n)
    block, _ = _alias.sample(key, blocks, draws)
    wrong = np.minimum(
        np.asarray(block)[:, 0] * K + np.random.default_rng(0).integers(0, K, draws), n - 1
    )
    right = np.asarray(jaxdp.exponential(jax.random.key(2), scores, epsilon=eps,
                                         sensitivity=1.0, shape=(draws,)))  # fmt: skip
    lane = np.arange(n) % K
    lane_p = np.bincount(lane, weights=p, minlength=K)
    assert _pvalue(right, lane, lane_p) > 1e-4
    assert _pvalue(wrong, lane, lane_p) < 1e-6


def test_dominant_outcome_followed_by_tiny_ones(hybrid_everywhere):
    """A dominant outcome, then 4095 outcomes 20 nats below it (8.4e-6 of the mass
    in all): drawn at their exact rate, whether they share the dominant outcome's
    block (the leaf level) or not (the table)."""
    n, draws = 4096, 2 * 10**7
    scores = np.full(n, -40.0, np.float32)
    scores[0] = 0.0
    w = np.exp(scores.astype(np.float64) / 2)
    p_tail = 1 - w[0] / w.sum()
    r = np.asarray(
        jaxdp.exponential(jax.random.key(3), jnp.asarray(scores), epsilon=1.0,
                          sensitivity=1.0, shape=(draws,))
    )  # fmt: skip
    k = int((r != 0).sum())
    assert k > 0
    assert scipy.stats.binomtest(k, draws, p_tail).pvalue > 1e-3
    # Less tiny ones (6.1e-6 each), counted per level: in block 0 and beyond it.
    scores = np.full(n, -12.0, np.float32)
    scores[0] = 0.0
    w = np.exp(scores.astype(np.float64))
    p = w / w.sum()
    r = np.asarray(
        jaxdp.exponential(jax.random.key(4), jnp.asarray(scores), epsilon=2.0,
                          sensitivity=1.0, shape=(draws,))
    )  # fmt: skip
    in_block = int(((r > 0) & (r < K)).sum())
    beyond = int((r >= K).sum())
    assert scipy.stats.binomtest(in_block, draws, p[1:K].sum()).pvalue > 1e-3
    assert scipy.stats.binomtest(beyond, draws, p[K:].sum()).pvalue > 1e-3


# ----------------------------------------------------------------------------- exact law


def _hybrid_law(w, depth=1):
    """The hybrid's law at ``depth`` for weights ``w`` ``(n,)``: the level-``depth``
    table's implemented law computed exactly from the stored tables (built
    compiled, from the compiled level masses: the leaves' block sums at depth 1,
    the high words of their double-float sums above), times each leaf's share of
    its node (float64 of the float32 weights; the levels below, within 2**-23
    relative each for shares above 2**-40, are proven rather than computed here)."""
    n = w.shape[0]
    count = _descent.level_counts(n)[depth]

    @jax.jit
    def level(w):
        blocks = _descent._leaf_block_sums(lambda cols: w[..., cols], n)
        leaves = _descent._pad_to(w, _descent.level_sizes(n)[0])
        return _descent._tables(leaves, blocks, n, depth + 1)[depth][0][:, :count]

    p_node, ok = implemented_law(level(jnp.asarray(w)[None])[0])
    assert ok
    assert np.all(p_node[count:] == 0)  # padding columns are never drawn
    span = K**depth
    leaves = np.zeros(count * span)
    leaves[:n] = np.asarray(w, np.float64)
    leaves = leaves.reshape(count, span)
    total = leaves.sum(axis=1, keepdims=True)
    share = np.divide(leaves, total, out=np.zeros_like(leaves), where=total > 0)
    return (p_node[:count, None] * share).ravel()[:n]


def test_hybrid_law_is_within_its_bound():
    """Every outcome's probability is within the hybrid's relative bound of the
    weights' law (the block sums' (K - 1) u and the table's a_t, on top of the
    leaf level), up to the table's absolute grid."""
    scores = np.random.default_rng(0).normal(size=10**4).astype(np.float32) * 20
    w = np.asarray(_weights(scores, 2.0), np.float64)
    p, q = _hybrid_law(w.astype(np.float32)), w / w.sum()
    b = _alias.log2_columns(-(-w.size // K))
    bound = 2 * (K - 1) * U + _alias.table_error(b)
    excess = np.abs(p - q) - bound * q
    assert np.all(excess <= 2 * 2.0**-64)


def test_hybrid_law_check_catches_wrong_weights():
    """The check above fails for block sums built from slightly wrong weights."""
    scores = np.random.default_rng(0).normal(size=10**4).astype(np.float32) * 20
    w = np.asarray(_weights(scores, 2.0), np.float64)
    wrong = (w * (1 + 1e-5 * (np.arange(w.size) // K % 2))).astype(np.float32)
    p, q = _hybrid_law(wrong), w / w.sum()
    b = _alias.log2_columns(-(-w.size // K))
    bound = 2 * (K - 1) * U + _alias.table_error(b)
    assert np.max(np.abs(p - q) - bound * q) > 2 * 2.0**-64


def _neighbours():
    n = 4096  # finding 1: D = [17, 0, ...] against D' = [17, 1, ...], monotonic
    d = np.zeros(n, np.float32)
    d[0] = 17
    d2 = np.ones(n, np.float32)
    d2[0] = 17
    yield "finding 1", d, d2, True
    n = 2**20 - 3  # a dominant outcome moved by Δ over 2**20 - 4 tiny ones
    a = np.full(n, -40.0, np.float32)
    a[7] = 0.0
    b = a.copy()
    b[7] = 1.0
    yield "dominant then tiny", a, b, False


def check_neighbours(case, depth):
    """Issue 10's attack ``case`` on the hybrid at ``depth``: its laws on both
    neighbours are within the stated (ε', δ') with room for the ``depth`` proven
    levels' 2**-23 on each side, and no outcome is possible on one side only."""
    _, d, d2, monotonic = next(c for c in _neighbours() if c[0] == case)
    eps_p, delta_p = _descent.guarantee(d.size, 1.0)
    pa = _hybrid_law(_weights(d, 1.0, monotonic=monotonic), depth)
    pb = _hybrid_law(_weights(d2, 1.0, monotonic=monotonic), depth)
    assert np.all(pa > 0) and np.all(pb > 0)
    room = eps_p - 2 * depth * 2.0**-23
    ratio, delta = _privacy_loss(pa, pb, room)
    assert ratio <= room
    assert delta <= delta_p


@pytest.mark.parametrize("case", [c[0] for c in _neighbours()])
def test_adversarial_neighbours_exactly(case):
    """Issue 10's attacks on the hybrid (depth 1): see :func:`check_neighbours`."""
    check_neighbours(case, 1)


def test_stated_guarantee_covers_the_hybrid():
    """The stated guarantee is at least the hybrid's own bound at every size it can
    take, and equals the descent's and the table's where they are larger."""
    for n in (9, 1000, 10**5, 2**20):
        eps_p, delta_p = _descent.guarantee(n, 1.0)
        b = _alias.log2_columns(-(-n // K))
        a = 12 * U + (K - 1) * U + _alias.table_error(b) + 2.0**-23
        assert eps_p >= 1.0 + 4 * a
        eps_h = 1.0 + 4 * a
        delta_h = (1 + math.exp(eps_h)) * 2.0 ** -(60 - b) + (K - 1) * 2.0**-40
        assert delta_p >= delta_h


# ----------------------------------------------------------------------------- shapes


def row_laws(rows, num_groups=10):
    """Each row's exponential-mechanism law (ε = 1, Δ = 1) over ``num_groups``
    contiguous groups of outcomes, and the groups."""
    n = rows.shape[1]
    g = np.arange(n) * num_groups // n
    laws = []
    for s in rows.astype(np.float64):
        p = np.exp((s - s.max()) / 2)
        laws.append(np.bincount(g, weights=p / p.sum(), minlength=num_groups))
    return g, laws


def test_rows_do_not_mix(hybrid_everywhere):
    """Several rows with different laws, each drawn by the hybrid in one call."""
    n, draws = 300, 100_000
    rows = np.stack([np.linspace(0, -k, n) for k in (1.0, 5.0, 20.0)]).astype(np.float32)
    r = np.asarray(jaxdp.exponential(jax.random.key(5), rows, epsilon=1.0, sensitivity=1.0,
                                     shape=(draws, 3)))  # fmt: skip
    g, laws = row_laws(rows)
    for k in range(3):
        assert _pvalue(r[:, k], g, laws[k]) > 1e-4


def test_a_dozen_rows_take_the_hybrid_by_default():
    """Twelve rows of n = 2000 drawn 2048 times each (one draw per column, N = 2048:
    the band of several rows) take the hybrid under the default rule, their draws
    walked flat; each row follows its own law (three laws, four rows each)."""
    n, draws, reps = 2000, 2048, 40
    assert _tuning.layout(n, draws, num_rows=12) == "hybrid"
    rows = np.stack([np.linspace(0, -k, n) for k in (1.0, 5.0, 20.0)]).astype(np.float32)
    tiled = np.tile(rows, (4, 1))  # row r has law r % 3

    @jax.jit
    def many(key):
        def one(k):
            return jaxdp.exponential(k, tiled, epsilon=1.0, sensitivity=1.0, shape=(draws, 12))

        return jax.vmap(one)(jax.random.split(key, reps))

    r = np.asarray(many(jax.random.key(7)))  # (reps, draws, 12)
    g, laws = row_laws(rows)
    for k in range(3):
        mine = r[..., k::3]
        assert _pvalue(mine, g, laws[k]) > 1e-4
        assert _pvalue(mine, g, laws[(k + 1) % 3]) < 1e-6
        for j in range(4):  # and each row on its own
            assert _pvalue(r[..., k + 3 * j], g, laws[k]) > 1e-4


def test_epsilon_grid_under_vmap_takes_the_hybrid():
    """The shape the hybrid exists for, under the default rule: ``vmap`` over an ε
    grid of 1,024-2,048 draws each over n = 1000 (one row per trace). Each ε's
    draws follow its own law and not its neighbour's."""
    n, draws, reps = 1000, 2048, 100
    assert _tuning.layout(n, draws) == "hybrid"
    g, scores, _ = _grouped_law(n, 1.0)
    eps = jnp.asarray([0.5, 1.0, 2.0], jnp.float32)

    @jax.jit
    def grid(key):
        def one(k, e):
            return jaxdp.exponential(k, scores, epsilon=e, sensitivity=1.0, shape=(draws,))

        keys = jax.random.split(key, (reps, 3))
        return jax.vmap(jax.vmap(one), in_axes=(0, None))(keys, eps)

    r = np.asarray(grid(jax.random.key(6)))  # (reps, 3, draws)
    for i, e in enumerate((0.5, 1.0, 2.0)):
        law = _grouped_law(n, e)[2]
        assert _pvalue(r[:, i], g, law) > 1e-4
        other = _grouped_law(n, (0.5, 1.0, 2.0)[(i + 1) % 3])[2]
        assert _pvalue(r[:, i], g, other) < 1e-6


def test_lone_level_weights_same_draws_alone_and_under_vmap(monkeypatch):
    """The depth-1 hybrid over one row with a partial last block materialises its
    lanes' weights (``_descent._lone_level_weights``), rows under ``vmap`` do not:
    the draws equal those with the lanes left fused, one row at a time, and a
    ``vmap`` over rows equals its rows drawn one by one with the same keys."""
    n, draws = 1003, 1024
    assert _tuning.layout(n, draws) == "hybrid" and _tuning.hybrid_depth(n, draws) == 1
    rng = np.random.default_rng(11)
    rows = jnp.asarray(rng.normal(size=(3, n)) * 3.0, jnp.float32)
    keys = jax.random.split(jax.random.key(12), 3)

    def one(k, row):
        return jaxdp.exponential(k, row, epsilon=1.0, sensitivity=1.0, shape=(draws,))

    alone = [np.asarray(jax.jit(one)(keys[i], rows[i])) for i in range(3)]
    batched = np.asarray(jax.jit(jax.vmap(one))(keys, rows))
    for i in range(3):
        np.testing.assert_array_equal(batched[i], alone[i])
    monkeypatch.setattr(_descent, "_lone_level_weights", lambda num_rows: lambda w: w)
    jax.clear_caches()
    fused = [np.asarray(jax.jit(one)(keys[i], rows[i])) for i in range(3)]
    jax.clear_caches()
    for i in range(3):
        np.testing.assert_array_equal(fused[i], alone[i])


def check_invalid_rows(n, inf_at):
    """A row with one positive weight (the last, in a partial last node) always
    draws it; rows with a NaN, an infinite weight (at ``inf_at``) or no positive
    weight are flagged invalid, for the layout the caller forces."""
    w = np.zeros((4, n), np.float32)
    w[0, n - 1] = 1.0
    w[1] = 1.0
    w[1, 3] = np.nan
    w[2, inf_at] = np.inf
    r, ok = jax.jit(_descent.sample, static_argnums=2)(
        _threefry.fast_key(jax.random.key(0)), jnp.asarray(w), 1000
    )
    assert list(np.asarray(ok)) == [True, False, False, False]
    assert np.all(np.asarray(r)[:, 0] == n - 1)


def test_invalid_and_degenerate_rows(hybrid_everywhere):
    check_invalid_rows(21, 5)
