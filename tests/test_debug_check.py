"""jaxdp's traced checks: reported under ``checkify``, and no effect under plain ``jit``.

A ``checkify.debug_check`` leaves an effect in the caller's program, and JAX
dispatches a program with an effect through its slow Python path on every
call. jaxdp's own ``debug_check`` must leave none, and must still report every
check under ``checkify`` in every transformation a user may wrap around it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxdp
from jaxdp import _debug_check
from jaxdp._debug_check import debug_check

KEY = jax.random.key(0)
S = jnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
DATA = jnp.array([0.1, 0.4, 0.5, 0.9])

# Every public mechanism that records traced checks, with its traced arguments.
TRACED_CALLS = {
    "exponential": (
        lambda s, e: jaxdp.exponential(KEY, s, epsilon=e, sensitivity=1.0, shape=(5, 2)),
        (S, 1.0),
    ),
    "exponential_inverse_cdf": (
        lambda s, e: jaxdp.exponential(
            KEY, s, epsilon=e, sensitivity=1.0, shape=(5, 2), method="inverse_cdf"
        ),
        (S, 1.0),
    ),
    "exponential_log_measure": (
        lambda s, e: jaxdp.exponential(
            KEY, s, epsilon=e, sensitivity=1.0, log_measure=jnp.zeros(3)
        ),
        (S, 1.0),
    ),
    "exponential_log_probs": (
        lambda s, e: jaxdp.exponential_log_probs(s, epsilon=e, sensitivity=1.0),
        (S, 1.0),
    ),
    "report_noisy_max": (
        lambda s, e: jaxdp.report_noisy_max(KEY, s, epsilon=e, sensitivity=1.0),
        (S, 1.0),
    ),
    "permute_and_flip": (
        lambda s, e: jaxdp.permute_and_flip(KEY, s, epsilon=e, sensitivity=1.0),
        (S, 1.0),
    ),
    "top_k": (lambda s, e: jaxdp.top_k(KEY, s, 2, epsilon=e, sensitivity=1.0), (S, 1.0)),
    "top_k_float64": (  # k past FLOAT32_ROUNDS: rounds in float64
        lambda s, e: jaxdp.top_k(KEY, s, 5, epsilon=e, sensitivity=1.0),
        (jnp.tile(S, (1, 2)), 1.0),
    ),
    "joint_top_k": (
        lambda s, e: jaxdp.joint_top_k(KEY, s, 2, epsilon=e, sensitivity=1.0),
        (S, 1.0),
    ),
    "exponential_streaming": (
        lambda d, e: jaxdp.exponential_streaming(
            KEY,
            lambda data, idx: -jnp.abs(idx.astype(jnp.float32) - data),
            64,
            epsilon=e,
            sensitivity=1.0,
            chunk_size=16,
            data=d,
        ),
        (3.0, 1.0),
    ),
    "laplace": (lambda x, e: jaxdp.laplace(KEY, x, epsilon=e, sensitivity=1.0), (DATA, 1.0)),
    "gaussian": (
        lambda x, e: jaxdp.gaussian(KEY, x, epsilon=e, delta=1e-5, sensitivity=1.0),
        (DATA, 1.0),
    ),
    "randomized_response": (
        lambda v, e: jaxdp.randomized_response(KEY, v, epsilon=e, num_categories=3),
        (jnp.array([0, 2, 1]), 1.0),
    ),
    "private_mode": (
        lambda v, e: jaxdp.private_mode(KEY, v, epsilon=e, num_categories=3),
        (jnp.array([0, 2, 1, 1]), 1.0),
    ),
    "exponential_piecewise": (
        lambda b, e: jaxdp.exponential_piecewise(
            KEY, jnp.array([0.0, 1.0, 2.0]), b, jnp.zeros(2), epsilon=e, sensitivity=1.0
        ),
        (jnp.array([0.0, 1.0]), 1.0),
    ),
    "private_price": (
        lambda b, e: jaxdp.private_price(KEY, b, epsilon=e, bounds=(0.0, 1.0)),
        (DATA, 1.0),
    ),
    "private_quantile": (
        lambda x, e: jaxdp.private_quantile(KEY, x, 0.5, epsilon=e, bounds=(0.0, 1.0)),
        (DATA, 1.0),
    ),
    "private_quantiles": (
        lambda x, e: jaxdp.private_quantiles(
            KEY, x, jnp.array([0.25, 0.75]), epsilon=e, bounds=(0.0, 1.0)
        ),
        (DATA, 1.0),
    ),
}


def test_the_checkify_rule_is_installed():
    # Without it every check would fall back to checkify.debug_check, correct
    # but with an effect in every caller's program: the tests below would fail.
    assert _debug_check._check_primitive() is not None
    assert _debug_check._works(_debug_check._check_primitive())


@pytest.mark.parametrize("name", list(TRACED_CALLS))
def test_jitted_mechanisms_have_no_effects(name):
    fn, args = TRACED_CALLS[name]
    jaxpr = jax.make_jaxpr(jax.jit(fn))(*args)
    assert jaxpr.effects == set(), jaxpr.effects
    # ... and the checks are there: a bad epsilon is reported under checkify.
    err, _ = checkify.checkify(jax.jit(fn), errors=checkify.user_checks)(args[0], -1.0)
    assert "epsilon must be finite and > 0" in str(err.get())
    err, _ = checkify.checkify(jax.jit(fn), errors=checkify.user_checks)(*args)
    assert err.get() is None


MASKED = S.at[:, 0].set(-jnp.inf)  # -inf: "never select this outcome"
MANY = (4096, 2)  # enough draws per row for the tables (alias, tabulated noisy max)
# The selection kernels on scores with -inf entries, in each of their layouts.
MASKED_CALLS = {
    "exponential_" + method + "_" + tag: lambda s, m=method, sh=shape: jaxdp.exponential(
        KEY, s, epsilon=1.0, sensitivity=1.0, method=m, shape=sh
    )
    for method in ("auto", "gumbel", "inverse_cdf")
    for tag, shape in (("one", None), ("many", MANY))
}
MASKED_CALLS.update(
    {
        f"report_noisy_max_{noise}_{tag}": lambda s, z=noise, sh=shape: jaxdp.report_noisy_max(
            KEY, s, epsilon=1.0, sensitivity=1.0, noise=z, shape=sh
        )
        for noise in ("laplace", "gumbel", "exponential")
        for tag, shape in (("one", None), ("many", MANY))
    }
)
MASKED_CALLS.update(
    {
        "permute_and_flip_many": lambda s: jaxdp.permute_and_flip(
            KEY, s, epsilon=1.0, sensitivity=1.0, shape=MANY
        ),
        "exponential_log_measure": lambda s: jaxdp.exponential(
            KEY, s, epsilon=1.0, sensitivity=1.0, log_measure=jnp.zeros(3), shape=MANY
        ),
        "exponential_log_probs": lambda s: jaxdp.exponential_log_probs(
            s, epsilon=1.0, sensitivity=1.0
        ),
        "top_k": lambda s: jaxdp.top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0, shape=(7, 2)),
        "top_k_float64": lambda s: jaxdp.top_k(
            KEY, jnp.tile(s, (1, 3)), 5, epsilon=1.0, sensitivity=1.0
        ),
        "joint_top_k": lambda s: jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0),
        "exponential_streaming": lambda s: jaxdp.exponential_streaming(
            KEY, lambda i: s[0][i % 3], 64, epsilon=1.0, sensitivity=1.0, chunk_size=16
        ),
    }
)


TIES = jnp.array([0.5, 0.5, 0.5, 0.9, 1.7, -0.2])  # ties, and records outside (0, 1)
# Valid inputs that once formed a NaN inside a kernel (masked before the output).
EDGE_CALLS = {
    "joint_top_k_large_counts": lambda: jaxdp.joint_top_k(
        KEY, jnp.array([1000.0, 0.0, 500.0, 200.0]), 2, epsilon=1.0, sensitivity=1.0
    ),
    "joint_top_k_large_epsilon": lambda: jaxdp.joint_top_k(KEY, S, 2, epsilon=1e3, sensitivity=1.0),
    "private_quantile_ties": lambda: jaxdp.private_quantile(
        KEY, TIES, 0.5, epsilon=1.0, bounds=(0.0, 1.0)
    ),
    "private_price_ties": lambda: jaxdp.private_price(KEY, TIES, epsilon=1.0, bounds=(0.0, 1.0)),
    "exponential_piecewise_empty_piece": lambda: jaxdp.exponential_piecewise(
        KEY,
        jnp.array([0.0, 1.0, 1.0, 2.0]),
        jnp.zeros(3),
        jnp.zeros(3),
        epsilon=1.0,
        sensitivity=1.0,
    ),
    "private_mode_vmap": lambda: jax.vmap(
        lambda v: jaxdp.private_mode(KEY, v, epsilon=1.0, num_categories=3)
    )(jnp.array([[0, 2, 1, 1], [2, 2, 0, 1]])),
}


#: Calls whose -inf log-weights reach the categorical kernel's weights, where the
#: TwoSum forms -inf - -inf (masked, but reported by nan_checks): every finite
#: stand-in tried there cost a hot fusion 19-45% (jaxdp/_descent.py, weights).
KNOWN_FALSE_POSITIVES = {
    "exponential_inverse_cdf_one",
    "exponential_auto_many",
    "exponential_inverse_cdf_many",
    "report_noisy_max_gumbel_many",
    "report_noisy_max_exponential_many",
    "permute_and_flip_many",
    "private_quantile_ties",
    "private_price_ties",
    "exponential_piecewise_empty_piece",
    "private_quantiles",
}


def _cases(names):
    known = pytest.mark.xfail(
        strict=True, reason="known nan_checks false positive in the categorical weights"
    )
    return [pytest.param(n, marks=known) if n in KNOWN_FALSE_POSITIVES else n for n in names]


@pytest.mark.parametrize("name", _cases(EDGE_CALLS))
def test_no_false_positive_at_the_edges(name):
    fn = EDGE_CALLS[name]
    err, out = checkify.checkify(jax.jit(fn), errors=checkify.all_checks)()
    assert err.get() is None, err.get()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jax.jit(fn)()))


@pytest.mark.parametrize("name", _cases(TRACED_CALLS))
def test_no_false_positive_under_all_checks(name):
    """checkify with every error set (NaN, division, index, user checks) on valid
    arguments reports nothing: no kernel computes inf - inf or 0 / 0 on the way
    (a user debugging NaNs in a training step with ``checkify.float_checks`` must
    not be sent to jaxdp)."""
    fn, args = TRACED_CALLS[name]
    err, out = checkify.checkify(jax.jit(fn), errors=checkify.all_checks)(*args)
    assert err.get() is None, err.get()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jax.jit(fn)(*args)))


@pytest.mark.parametrize("name", _cases(MASKED_CALLS))
def test_no_false_positive_on_masked_scores(name):
    fn = MASKED_CALLS[name]
    err, out = checkify.checkify(jax.jit(fn), errors=checkify.all_checks)(MASKED)
    assert err.get() is None, err.get()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jax.jit(fn)(MASKED)))


def test_vmap_over_epsilon_has_no_effects_and_reports_the_bad_member():
    fn = jax.jit(jax.vmap(lambda e: jaxdp.exponential(KEY, S[0], epsilon=e, sensitivity=1.0)))
    grid = jnp.array([1.0, 2.0, -3.0, 4.0])
    assert jax.make_jaxpr(fn)(grid).effects == set()
    err, out = checkify.checkify(fn, errors=checkify.user_checks)(grid)
    assert "got -3.0" in str(err.get())
    np.testing.assert_array_equal(np.asarray(out)[2], -1)


def _positive(x):
    debug_check(jnp.all(x > 0), "x must be > 0, got {}", x)
    return x * 2.0


X = jnp.array([1.0, 2.0, 3.0])
BAD = jnp.array([1.0, -2.0, 3.0])

# The transformations a user may wrap around a jaxdp call, each applied to _positive.
WRAPPERS = {
    "plain": lambda f: f,
    "jit": jax.jit,
    "vmap": lambda f: lambda x: jax.vmap(f)(jnp.stack([x, jnp.abs(x)])),
    "scan": lambda f: lambda x: jax.lax.scan(lambda c, xi: (c, f(xi)), 0.0, x[None])[1],
    "map": lambda f: lambda x: jax.lax.map(f, x[None]),
    "cond": lambda f: lambda x: jax.lax.cond(True, f, lambda y: y, x),
    "while": lambda f: (
        lambda x: jax.lax.while_loop(lambda c: c[1] < 1, lambda c: (f(c[0]), c[1] + 1), (x, 0))[0]
    ),
    "grad": lambda f: jax.grad(lambda x: f(x).sum()),
    "grad_of_checkpoint": lambda f: jax.grad(lambda x: jax.checkpoint(f)(x).sum()),
    "hessian": lambda f: jax.hessian(lambda x: f(x).sum()),
    "jit_of_vmap_of_jit": lambda f: jax.jit(jax.vmap(jax.jit(f))),
}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_debug_check_reports_through_every_transformation(wrapper):
    f = WRAPPERS[wrapper](_positive)
    arg = BAD if wrapper != "jit_of_vmap_of_jit" else jnp.stack([X, BAD])
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(arg)
    assert str(err.get()).startswith("x must be > 0, got [ 1. -2.  3.]")
    good = X if wrapper != "jit_of_vmap_of_jit" else jnp.stack([X, X])
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(good)
    assert err.get() is None
    # Under plain jit the check leaves no effect, so JAX's fast path dispatches.
    assert jax.make_jaxpr(jax.jit(f))(arg).effects == set()


def test_debug_check_reports_the_first_failing_member_of_a_batch():
    f = jax.vmap(jax.vmap(_positive))
    xs = jnp.ones((3, 2, 3)).at[1, 1, 2].set(-5.0).at[2, 0, 0].set(-7.0)
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(xs)
    assert "got [ 1.  1. -5.]" in str(err.get())


def test_debug_check_is_reported_only_for_user_checks():
    err, _ = checkify.checkify(_positive, errors=checkify.nan_checks)(BAD)
    assert err.get() is None


def test_debug_check_is_a_no_op_outside_checkify():
    np.testing.assert_array_equal(_positive(BAD), 2.0 * BAD)
    np.testing.assert_array_equal(jax.jit(_positive)(BAD), 2.0 * BAD)


def test_debug_check_refuses_a_non_scalar_predicate():
    with pytest.raises(TypeError, match="scalar bool predicate"):
        debug_check(X > 0, "x must be > 0")


def test_debug_check_reports_under_shard_map_as_checkify_does():
    mesh = jax.make_mesh((1,), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    bad = jax.device_put(BAD, jax.sharding.NamedSharding(mesh, spec))

    def reference(x):
        checkify.debug_check(jnp.all(x > 0), "x must be > 0, got {}", x)
        return x * 2.0

    messages = []
    for f in (_positive, reference):
        g = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=spec))
        err, _ = checkify.checkify(g, errors=checkify.user_checks)(bad)
        messages.append(str(err.get()))
    assert "x must be > 0, got [ 1. -2.  3.]" in messages[0]
    assert messages[0] == messages[1]


def test_a_jitted_check_exports_and_runs():
    exported = jax.export.export(jax.jit(_positive))(X)
    np.testing.assert_array_equal(exported.call(BAD), 2.0 * BAD)


def test_a_jax_that_breaks_the_rule_falls_back_to_checkify(monkeypatch):
    """If the rule fails its first traced check (a JAX whose checkify internals
    changed), every check goes through checkify.debug_check: still reported, with
    its effect; a wrong fallback (no check at all) would report nothing."""
    monkeypatch.setattr(_debug_check, "_works", lambda check_p: False)
    _debug_check._check_primitive.cache_clear()
    jax.clear_caches()
    try:
        assert _debug_check._check_primitive() is None

        def f(x):  # a fresh function: no trace cached from the fast path
            debug_check(jnp.all(x > 0), "x must be > 0, got {}", x)
            return x * 2.0

        err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(BAD)
        assert "x must be > 0, got [ 1. -2.  3.]" in str(err.get())
        assert jax.make_jaxpr(jax.jit(f))(X).effects
    finally:
        monkeypatch.undo()  # the real _works again, before the decision is remade
        _debug_check._check_primitive.cache_clear()
        jax.clear_caches()
    assert _debug_check._check_primitive() is not None
