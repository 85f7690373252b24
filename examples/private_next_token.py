"""Private next-token selection over a 32k vocabulary from teacher votes (PATE-style).

An ensemble of ``T`` teacher models, each trained on a disjoint part of the private
data, votes for the next token. The vote histogram over the vocabulary is a count
vector: adding or removing one teacher's data changes one teacher's vote, so each
count moves by at most 1 and all counts that move, move the same way when one vote
is added or removed (``monotonic=True``). The student then samples the next token
with the exponential mechanism (``jaxdp.exponential``; report-noisy-max with
Gumbel noise is the same law), one ε-DP release per generated token, and the
whole sequence costs the sum of the per-token ε (``jaxdp.accounting``).

Here the "teachers" are simulated: at every position each teacher votes for the
true next token with probability ``agreement``, otherwise for a random token.

Run::

    python examples/private_next_token.py            # V = 32,000, 250 teachers, 64 tokens
    python examples/private_next_token.py --tiny     # seconds, for CI
"""

from __future__ import annotations

import argparse
import os
from functools import partial

import jax
import jax.numpy as jnp

import jaxdp
from jaxdp import accounting


def teacher_votes(key, truth, *, num_teachers, vocab, agreement):
    """Vote counts ``(L, V)``: each teacher votes for ``truth[t]`` w.p. ``agreement``."""
    k_agree, k_other = jax.random.split(key)
    length = truth.shape[0]
    agrees = jax.random.bernoulli(k_agree, agreement, (length, num_teachers))
    other = jax.random.randint(k_other, (length, num_teachers), 0, vocab)
    votes = jnp.where(agrees, truth[:, None], other)
    return jax.vmap(lambda v: jnp.bincount(v, length=vocab))(votes)


@partial(jax.jit, static_argnames=("noise",))
def select_tokens(key, counts, epsilon, noise="exponential"):
    """One private token per row of ``counts`` (one ε-DP release each)."""
    if noise == "exponential":  # the exponential mechanism, ε/Δ since counts are monotonic
        return jaxdp.exponential(key, counts, epsilon=epsilon, sensitivity=1.0, monotonic=True)
    return jaxdp.report_noisy_max(
        key, counts, epsilon=epsilon, sensitivity=1.0, noise=noise, monotonic=True
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", default=bool(os.environ.get("JAXDP_TINY")))
    p.add_argument("--epsilon", type=float, default=0.5, help="privacy budget per token")
    args = p.parse_args(argv)
    vocab, teachers, length = (32_000, 50, 8) if args.tiny else (32_000, 250, 64)
    agreement = 0.4

    k_truth, k_votes, k_select = jax.random.split(jax.random.key(0), 3)
    truth = jax.random.randint(k_truth, (length,), 0, vocab)
    counts = teacher_votes(k_votes, truth, num_teachers=teachers, vocab=vocab, agreement=agreement)
    plurality = jnp.argmax(counts, axis=-1)
    print(f"{teachers} teachers, vocabulary {vocab:,}, {length} tokens, ε = {args.epsilon}/token")
    for noise in ("exponential", "laplace", "gumbel"):
        tokens = select_tokens(k_select, counts, args.epsilon, noise=noise)
        hit = float(jnp.mean(tokens == plurality))
        name = "jaxdp.exponential" if noise == "exponential" else f"report_noisy_max({noise})"
        print(f"  {name:<28} agrees with the plurality vote on {hit:.0%} of tokens")
    total = accounting.basic_composition([args.epsilon] * length)
    print(f"  the sequence costs ε = {total.epsilon:g} under basic composition "
          f"({length} releases of ε = {args.epsilon})")  # fmt: skip
    # The exact probability that the private token is the plurality token, per position:
    probs = jnp.exp(
        jaxdp.exponential_log_probs(counts, epsilon=args.epsilon, sensitivity=1.0, monotonic=True)
    )
    exact = jnp.take_along_axis(probs, plurality[:, None], axis=-1).mean()
    print(f"  exact P[private token = plurality], averaged over positions: {float(exact):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
