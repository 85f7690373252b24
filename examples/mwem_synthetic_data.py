"""MWEM: private synthetic data from range queries, in one jitted ``lax.scan``.

MWEM (Hardt, Ligett & McSherry 2012) keeps a synthetic histogram ``A`` over a public
domain of ``d`` values and, for ``T`` rounds:

1. picks the range query the synthetic data answers worst, with
   ``jaxdp.exponential`` over the queries' errors (ε/(2T) per round);
2. measures that query on the real data with ``jaxdp.laplace`` (ε/(2T));
3. reweights ``A`` multiplicatively towards the noisy answer.

Neighbouring datasets add or remove one record, so every count and every range
query moves by at most 1; the record count ``n`` is treated as public (as in the
paper). The whole run is ε-DP by basic composition over 2T releases, and the
synthetic histogram is post-processing.

Run::

    python examples/mwem_synthetic_data.py            # d = 512, 500 queries, 30 rounds
    python examples/mwem_synthetic_data.py --tiny     # seconds, for CI
"""

from __future__ import annotations

import argparse
import os
from functools import partial

import jax
import jax.numpy as jnp

import jaxdp


def range_queries(key, d: int, num_queries: int) -> jax.Array:
    """``num_queries`` random intervals [lo, hi) of the domain, as 0/1 rows ``(Q, d)``."""
    lo, hi = jnp.sort(jax.random.randint(key, (2, num_queries), 0, d + 1), axis=0)
    hi = jnp.maximum(hi, lo + 1)
    cells = jnp.arange(d)
    return ((cells >= lo[:, None]) & (cells < hi[:, None])).astype(jnp.float32)


@partial(jax.jit, static_argnames=("rounds",))
def mwem(key, histogram, queries, *, epsilon, rounds):
    """Runs MWEM; returns the synthetic histogram (scaled to ``n``) and the chosen queries."""
    n = histogram.sum()  # public, as in MWEM
    d = histogram.shape[0]
    true_answers = queries @ histogram
    eps_round = epsilon / (2 * rounds)

    def step(carry, key):
        weights, measured, mask = carry  # weights: synthetic distribution over the domain
        k_select, k_measure = jax.random.split(key)
        errors = jnp.abs(true_answers - n * (queries @ weights))
        # 1. the worst-answered query; each error moves by <= 1 between neighbours
        i = jaxdp.exponential(k_select, errors, epsilon=eps_round, sensitivity=1.0)
        # 2. its answer on the real data, with Laplace noise (a count: sensitivity 1)
        answer = jaxdp.laplace(k_measure, true_answers[i], epsilon=eps_round, sensitivity=1.0)
        measured = measured.at[i].set(answer)
        mask = mask.at[i].set(True)

        # 3. multiplicative weights over every query measured so far
        def mw(w, _):
            est = n * (queries @ w)
            grad = jnp.where(mask, (measured - est) / (2 * n), 0.0) @ queries
            w = w * jnp.exp(grad)
            return w / w.sum(), None

        weights, _ = jax.lax.scan(mw, weights, None, length=5)
        return (weights, measured, mask), i

    init = (
        jnp.full((d,), 1.0 / d),
        jnp.zeros(queries.shape[0]),
        jnp.zeros(queries.shape[0], bool),
    )
    (weights, _, _), chosen = jax.lax.scan(step, init, jax.random.split(key, rounds))
    return n * weights, chosen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", default=bool(os.environ.get("JAXDP_TINY")))
    p.add_argument("--epsilon", type=float, default=1.0, help="total privacy budget")
    args = p.parse_args(argv)
    d, num_queries, rounds, n = (32, 40, 5, 2_000) if args.tiny else (512, 500, 30, 100_000)

    k_data, k_queries, k_mwem = jax.random.split(jax.random.key(0), 3)
    # Real data: a two-bump mixture over the domain {0, ..., d-1}.
    centres = jnp.where(jax.random.bernoulli(k_data, 0.3, (n,)), 0.25 * d, 0.7 * d)
    values = jnp.clip(centres + 0.08 * d * jax.random.normal(k_data, (n,)), 0, d - 1)
    histogram = jnp.zeros(d).at[values.astype(jnp.int32)].add(1.0)
    queries = range_queries(k_queries, d, num_queries)

    synthetic, chosen = mwem(k_mwem, histogram, queries, epsilon=args.epsilon, rounds=rounds)
    uniform = jnp.full((d,), n / d)
    err = lambda h: float(jnp.max(jnp.abs(queries @ h - queries @ histogram)) / n)  # noqa: E731
    print(f"MWEM, ε = {args.epsilon} in {rounds} rounds, n = {n:,}, domain {d}, "
          f"{num_queries} range queries")  # fmt: skip
    print(f"  max query error / n: uniform {err(uniform):.3f} -> MWEM {err(synthetic):.3f}")
    print(f"  queries chosen: {sorted(set(chosen.tolist()))[:10]} ...")
    assert err(synthetic) < err(uniform), "MWEM should beat the uniform histogram"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
