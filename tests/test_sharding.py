"""Every public sampler inside ``jax.shard_map`` (JAX's varying-axes check on) and
inside ``jaxdp.montecarlo.run``.

A loop whose carry starts as a constant and is updated from a per-device key or
per-device data has a body whose output carry varies over the mesh axis while its
input does not; shard_map rejects that ("scan body function carry input and carry
output must have equal types"). The kernels cast such initial carries first
(``jaxdp._tracing.varying_like``, ``carry_for``). A one-device mesh tracks varying
axes as a larger one does, so these run in-process.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxdp
from jaxdp import montecarlo

RNG = np.random.default_rng(0)
DATA = RNG.normal(size=(1, 200)).astype(np.float32)
SCORES = RNG.normal(size=(1, 50)).astype(np.float32)
CATS = RNG.integers(0, 5, (1, 100)).astype(np.int32)
PREDS = RNG.integers(0, 2, (1, 6, 40)).astype(np.int32)
LABELS = RNG.integers(0, 2, (1, 40)).astype(np.int32)
EPS = np.ones((1,), np.float32)
SENS = dict(sensitivity=1.0)


def _candidate(key, s, d):
    return jax.random.normal(key) + s[0], d[:3] + jax.random.normal(key)


# name -> f(key, data, scores, categories, predictions, labels y, epsilon): a number
SAMPLERS = {
    "exponential": lambda k, d, s, c, p, y, e: jaxdp.exponential(k, s, epsilon=e, **SENS),
    "exponential_draws": lambda k, d, s, c, p, y, e: jaxdp.exponential(
        k, s, epsilon=e, **SENS, shape=(300,)
    ).sum(),
    "exponential_gumbel": lambda k, d, s, c, p, y, e: jaxdp.exponential(
        k, s, epsilon=e, **SENS, method="gumbel"
    ),
    "exponential_log_measure": lambda k, d, s, c, p, y, e: jaxdp.exponential(
        k, s, epsilon=e, **SENS, log_measure=jnp.zeros(50)
    ),
    "report_noisy_max": lambda k, d, s, c, p, y, e: jaxdp.report_noisy_max(
        k, s, epsilon=e, **SENS, shape=(300,)
    ).sum(),
    "report_noisy_max_exponential": lambda k, d, s, c, p, y, e: jaxdp.report_noisy_max(
        k, s, epsilon=e, **SENS, noise="exponential"
    ),
    "permute_and_flip": lambda k, d, s, c, p, y, e: jaxdp.permute_and_flip(k, s, epsilon=e, **SENS),
    "top_k": lambda k, d, s, c, p, y, e: jaxdp.top_k(k, s, 3, epsilon=e, **SENS).sum(),
    "joint_top_k": lambda k, d, s, c, p, y, e: jaxdp.joint_top_k(k, s, 3, epsilon=e, **SENS).sum(),
    "exponential_streaming": lambda k, d, s, c, p, y, e: jaxdp.exponential_streaming(
        k, lambda i: -jnp.abs(i - 30.0 * e), 1000, epsilon=1.0, **SENS, chunk_size=256
    ),
    "exponential_piecewise": lambda k, d, s, c, p, y, e: jaxdp.exponential_piecewise(
        k, jnp.array([0.0, 1.0, 2.0]), s[:2], s[2:4], epsilon=e, **SENS
    ),
    "private_price": lambda k, d, s, c, p, y, e: jaxdp.private_price(
        k, jnp.abs(d), epsilon=e, bounds=(0.0, 4.0)
    ),
    "private_quantile": lambda k, d, s, c, p, y, e: jaxdp.private_quantile(
        k, d, 0.5, epsilon=e, bounds=(-4.0, 4.0)
    ),
    "private_quantiles": lambda k, d, s, c, p, y, e: jaxdp.private_quantiles(
        k, d, jnp.array([0.25, 0.75]), epsilon=e, bounds=(-4.0, 4.0)
    ).sum(),
    "laplace": lambda k, d, s, c, p, y, e: jaxdp.laplace(k, d, epsilon=e, **SENS).sum(),
    "gaussian": lambda k, d, s, c, p, y, e: jaxdp.gaussian(
        k, d, epsilon=1.0, delta=1e-5, sensitivity=1.0
    ).sum(),
    "randomized_response": lambda k, d, s, c, p, y, e: jaxdp.randomized_response(
        k, c, epsilon=e, num_categories=5
    ).sum(),
    "private_mode": lambda k, d, s, c, p, y, e: jaxdp.private_mode(
        k, c, epsilon=e, num_categories=5
    ),
    "select_hypothesis": lambda k, d, s, c, p, y, e: jaxdp.select_hypothesis(k, p, y, epsilon=e),
    "select_private_candidate": lambda k, d, s, c, p, y, e: jaxdp.select_private_candidate(
        k,
        lambda kk: _candidate(kk, s, d),
        epsilon=1.0,
        stop_probability=0.2,
        max_repetitions=20,
    )[0],
}
# Many draws per row: the tabulated noisy max, the noise blocks, the alias table.
MANY = 20_000
SAMPLERS.update(
    {
        "report_noisy_max_many": lambda k, d, s, c, p, y, e: jaxdp.report_noisy_max(
            k, s, epsilon=e, **SENS, shape=(MANY,)
        ).sum(),
        "permute_and_flip_many": lambda k, d, s, c, p, y, e: jaxdp.permute_and_flip(
            k, s, epsilon=e, **SENS, shape=(MANY,)
        ).sum(),
        "exponential_gumbel_many": lambda k, d, s, c, p, y, e: jaxdp.exponential(
            k, s, epsilon=e, **SENS, method="gumbel", shape=(MANY,)
        ).sum(),
        "exponential_log_measure_many": lambda k, d, s, c, p, y, e: jaxdp.exponential(
            k, s, epsilon=e, **SENS, log_measure=jnp.zeros(50), shape=(MANY,)
        ).sum(),
        "top_k_many": lambda k, d, s, c, p, y, e: jaxdp.top_k(
            k, s, 5, epsilon=e, **SENS, shape=(5000,)
        ).sum(),
        "joint_top_k_many": lambda k, d, s, c, p, y, e: jaxdp.joint_top_k(
            k, s, 3, epsilon=e, **SENS, shape=(2000,)
        ).sum(),
        "private_quantile_many": lambda k, d, s, c, p, y, e: jaxdp.private_quantile(
            k, d, 0.5, epsilon=e, bounds=(-4.0, 4.0), shape=(MANY,)
        ).sum(),
    }
)


def _mesh():
    return jax.make_mesh((1,), ("d",))


@pytest.mark.parametrize("varies", ["key", "data"])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_inside_shard_map(name, varies):
    """Per-device keys (data replicated), or per-device data and ε (one key): the
    program traces, and its draws equal the sampler's outside shard_map."""
    f = SAMPLERS[name]
    mesh = _mesh()
    keys = jax.random.split(jax.random.key(3), 1)
    arrays = (DATA, SCORES, CATS, PREDS, LABELS, EPS)

    def per_device(keys, *xs):
        return jnp.asarray(f(keys[0], *(x[0] for x in xs)), jnp.float32)[None]

    specs = (P("d") if varies == "key" else P(),) + (P() if varies == "key" else P("d"),) * 6
    sharded = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P("d")))
    args = [
        jax.device_put(a, NamedSharding(mesh, sp))
        for a, sp in zip((keys, *arrays), specs, strict=True)
    ]
    got = sharded(*args)
    want = jax.jit(per_device)(keys, *arrays)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_montecarlo_runs_trials_with_loops_from_constant_carries():
    """A user's trial whose ``lax.scan`` starts from a constant and adds the key's
    uniforms (shard_map's varying-axes check would reject it), and trials calling the
    samplers whose kernels loop: ``run`` accepts them all, with the same means as a
    plain vmap over the same trial keys."""

    def own_scan(key):
        steps = jax.random.uniform(key, (5,))
        total = jax.lax.scan(lambda c, x: (c + x, None), jnp.float32(0.0), steps)[0]
        return {"v": total}

    trials = {"own_scan": own_scan}
    for name in ("top_k", "private_quantiles", "select_private_candidate"):
        f = SAMPLERS[name]
        trials[name] = lambda key, f=f: {
            "v": jnp.asarray(
                f(key, DATA[0], SCORES[0], CATS[0], PREDS[0], LABELS[0], 1.0), jnp.float32
            )
        }
    for name, trial in trials.items():
        res = montecarlo.run(trial, jax.random.key(5), 64, batch_size=64, progress=False)
        keys = jnp.stack([montecarlo.trial_key(jax.random.key(5), i) for i in range(64)])
        want = float(np.mean(np.asarray(jax.vmap(trial)(keys)["v"], np.float64)))
        assert float(res["v"].mean) == pytest.approx(want, rel=1e-5), name


LONG = RNG.normal(size=(1, 2**18 + 1)).astype(np.float32)  # past the CPU's race chunk
LONG_SAMPLERS = {
    "report_noisy_max": lambda k, s: jaxdp.report_noisy_max(k, s, epsilon=1.0, **SENS),
    "permute_and_flip": lambda k, s: jaxdp.permute_and_flip(k, s, epsilon=1.0, **SENS),
    "top_k": lambda k, s: jaxdp.top_k(k, s, 2, epsilon=1.0, **SENS).sum(),
    "exponential_gumbel": lambda k, s: jaxdp.exponential(
        k, s, epsilon=1.0, **SENS, method="gumbel"
    ),
    "exponential_gumbel_log_measure": lambda k, s: jaxdp.exponential(
        k, s, epsilon=1.0, **SENS, method="gumbel", log_measure=jnp.zeros(s.shape[-1])
    ),
}


@pytest.mark.parametrize("varies", ["key", "data"])
@pytest.mark.parametrize("name", sorted(LONG_SAMPLERS))
def test_long_rows_inside_shard_map(name, varies):
    """Rows longer than a race chunk (2**18 candidates on CPU) are raced block by
    block in loops of their own: the same check, the same draws."""
    f = LONG_SAMPLERS[name]
    mesh = _mesh()
    keys = jax.random.split(jax.random.key(4), 1)

    def per_device(keys, scores):
        return jnp.asarray(f(keys[0], scores[0]), jnp.int32)[None]

    specs = (P("d"), P()) if varies == "key" else (P(), P("d"))
    sharded = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P("d")))
    args = [
        jax.device_put(a, NamedSharding(mesh, sp))
        for a, sp in zip((keys, LONG), specs, strict=True)
    ]
    np.testing.assert_array_equal(
        np.asarray(sharded(*args)), np.asarray(jax.jit(per_device)(keys, LONG))
    )
