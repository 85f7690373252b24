"""``jax.grad`` through the samplers, as through ``jax.random.categorical``.

A drawn index is an integer and carries no gradient; a loss that uses it (``scores[r]``)
is differentiated through its own use of the scores, with the index held at the value
the sampler drew. Every kernel stops the gradient of its inputs
(``jaxdp._logits.no_gradient``): their exact reductions (double-float variadic
reduces, ``reduce_window``) have no JVP rule, and ``jax.grad`` failed inside them.
Additive noise (``laplace``, ``gaussian``) passes the gradient of its values through.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp

KEY = jax.random.key(3)
N = 50

# Every index sampler of the public API, at the shapes that reach each kernel: the
# descent, the hybrid and the alias table (one row drawn 1, 64 and 10**4 times), the
# race and the tabulated noisy max (64 and 10**5 draws), the peeling of top-k, the
# categorical kernel of joint top-k, the streaming range.
INDEX_SAMPLERS = {
    "exponential_1": lambda s: jaxdp.exponential(KEY, s, epsilon=1.0, sensitivity=1.0),
    "exponential_64": lambda s: jaxdp.exponential(KEY, s, epsilon=1.0, sensitivity=1.0,
                                                   shape=(64,)),
    "exponential_1e4": lambda s: jaxdp.exponential(KEY, s, epsilon=1.0, sensitivity=1.0,
                                                    shape=(10**4,)),
    "exponential_gumbel": lambda s: jaxdp.exponential(KEY, s, epsilon=1.0, sensitivity=1.0,
                                                       shape=(64,), method="gumbel"),
    "exponential_rows": lambda s: jaxdp.exponential(KEY, jnp.stack([s, -s]), epsilon=1.0,
                                                     sensitivity=1.0, shape=(300, 2)),
    "report_noisy_max_laplace": lambda s: jaxdp.report_noisy_max(
        KEY, s, epsilon=1.0, sensitivity=1.0, shape=(64,)),
    "report_noisy_max_laplace_table": lambda s: jaxdp.report_noisy_max(
        KEY, s, epsilon=1.0, sensitivity=1.0, shape=(10**5,)),
    "report_noisy_max_gumbel": lambda s: jaxdp.report_noisy_max(
        KEY, s, epsilon=1.0, sensitivity=1.0, noise="gumbel", shape=(10**4,)),
    "permute_and_flip_table": lambda s: jaxdp.permute_and_flip(
        KEY, s, epsilon=1.0, sensitivity=1.0, shape=(10**5,)),
    "permute_and_flip": lambda s: jaxdp.permute_and_flip(KEY, s, epsilon=1.0, sensitivity=1.0),
    "top_k": lambda s: jaxdp.top_k(KEY, s, 3, epsilon=1.0, sensitivity=1.0),
    "joint_top_k": lambda s: jaxdp.joint_top_k(KEY, s, 3, epsilon=1.0, sensitivity=1.0),
    "exponential_streaming": lambda s: jaxdp.exponential_streaming(
        KEY, lambda i: s[i], N, epsilon=1.0, sensitivity=1.0, chunk_size=16, shape=(8,)),
}  # fmt: skip


def _scores(p):
    return jnp.tanh(p) * 3


def _used(s, r):
    """The loss's use of a drawn index: the scores it picked (rows picked per row)."""
    r = jnp.clip(r, 0, N - 1)
    if s.ndim == 1:
        return jnp.sum(s[r])
    return jnp.sum(jnp.take_along_axis(s, r.reshape(-1, s.shape[0]).T, axis=1))


@pytest.mark.parametrize("name", sorted(INDEX_SAMPLERS))
def test_grad_through_an_index_sampler(name):
    """jit(grad) and grad of a loss using the drawn index equal the gradient of the
    same loss with the index fixed at the draw made outside ``grad``."""
    sample = INDEX_SAMPLERS[name]
    p = jnp.linspace(-1.0, 1.0, N)

    def loss(p):
        s = _scores(p)
        if name == "exponential_rows":
            return _used(jnp.stack([s, -s]), sample(s))
        return _used(s, sample(s))

    r = sample(_scores(p))
    if name == "exponential_rows":
        want = jax.grad(lambda p: _used(jnp.stack([_scores(p), -_scores(p)]), r))(p)
    else:
        want = jax.grad(lambda p: _used(_scores(p), r))(p)
    assert float(jnp.abs(want).sum()) > 0
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        np.testing.assert_allclose(grad(p), want, rtol=1e-5, atol=1e-6)


def test_grad_through_a_vmap_over_an_epsilon_grid():
    p = jnp.linspace(-1.0, 1.0, N)
    eps = jnp.array([0.5, 1.0, 2.0])

    def loss(p):
        s = _scores(p)
        draw = lambda e: jaxdp.exponential(KEY, s, epsilon=e, sensitivity=1.0, shape=(64,))  # noqa: E731
        return _used(s, jax.vmap(draw)(eps))

    g = jax.jit(jax.grad(loss))(p)
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_additive_noise_passes_the_gradient_through(mechanism):
    kw = {"delta": 1e-5} if mechanism == "gaussian" else {}
    fn = getattr(jaxdp, mechanism)
    g = jax.grad(lambda x: jnp.sum(fn(KEY, x, epsilon=1.0, sensitivity=1.0, **kw)))(jnp.ones(5))
    np.testing.assert_array_equal(g, np.ones(5))


def test_log_probs_keep_their_gradient():
    """``exponential_log_probs`` is a differentiable function of the scores (a log-softmax)."""
    s = jnp.linspace(-2.0, 2.0, N)
    w = jnp.linspace(0.0, 1.0, N)

    def log_probs(s):
        return jaxdp.exponential_log_probs(s, epsilon=1.0, sensitivity=1.0)

    got = jax.grad(lambda s: jnp.sum(w * log_probs(s)))(s)
    want = jax.grad(lambda s: jnp.sum(w * jax.nn.log_softmax(s / 2)))(s)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("which", ["private_quantile", "private_quantiles", "private_price"])
def test_continuous_samplers_trace_under_grad(which):
    """The continuous samplers draw their interval through the same kernels; ``grad``
    of their point traces (the point's own pathwise dependence on the data stays)."""
    data = jnp.linspace(0.1, 1.9, 40)
    calls = {
        "private_quantile": lambda d: jaxdp.private_quantile(KEY, d, 0.5, epsilon=1.0,
                                                             bounds=(0.0, 2.0)),
        "private_quantiles": lambda d: jaxdp.private_quantiles(KEY, d, jnp.array([0.25, 0.75]),
                                                               epsilon=1.0, bounds=(0.0, 2.0)),
        "private_price": lambda d: jaxdp.private_price(KEY, d, epsilon=1.0, bounds=(0.0, 2.0)),
    }  # fmt: skip
    g = jax.jit(jax.grad(lambda d: jnp.sum(calls[which](d))))(data)
    assert g.shape == data.shape and bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize("transform", ["jvp", "linearize", "checkpoint_grad", "vmap_grad"])
@pytest.mark.parametrize(
    "name", ["exponential_64", "exponential_1e4", "report_noisy_max_laplace_table", "joint_top_k"]
)
def test_other_transformations_through_an_index_sampler(name, transform):
    """Forward mode, ``linearize``, ``checkpoint`` under ``grad`` and ``vmap(grad)``: the
    tangent of a loss using a drawn index is that of the loss with the index fixed."""
    sample = INDEX_SAMPLERS[name]
    p = jnp.linspace(-1.0, 1.0, N)
    r = sample(_scores(p))

    def loss(p):
        s = _scores(p)
        return _used(s, sample(s))

    def fixed(p):
        return _used(_scores(p), r)

    t = jnp.linspace(0.5, 1.5, N)
    if transform == "jvp":
        got, want = jax.jvp(loss, (p,), (t,))[1], jax.jvp(fixed, (p,), (t,))[1]
    elif transform == "linearize":
        got, want = jax.linearize(loss, p)[1](t), jax.linearize(fixed, p)[1](t)
    elif transform == "checkpoint_grad":
        got, want = jax.grad(jax.checkpoint(loss))(p), jax.grad(fixed)(p)
    else:  # the same loss at two parameter vectors (the draws depend on them)
        ps = jnp.stack([p, 0.5 * p])
        got = jax.vmap(jax.grad(loss))(ps)

        def at(q0):
            drawn = sample(_scores(q0))
            return jax.grad(lambda q: _used(_scores(q), drawn))(q0)

        want = jnp.stack([at(q0) for q0 in ps])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
