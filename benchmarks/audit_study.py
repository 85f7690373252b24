"""Audit study: jaxdp's empirical epsilon per mechanism and the auditor's power.

Run from the repository root (CPU or GPU)::

    python -m benchmarks.audit_study --samples 10000000 --out audit_study.json

1. **Empirical epsilon.** :func:`jaxdp.audit.estimate_epsilon` on every
   mechanism with near-worst-case neighbours (the pairs of
   ``tests/test_audit.py``), claimed ε = 1: the 95% lower bound and the
   point estimate at the largest budget. Each must stay below 1.
2. **Power.** Mechanisms whose true loss is exactly ε_true (binary randomized
   response; Laplace whose sensitivity is understated by ε_true) are audited
   against a claim of ε = 1 at several budgets and keys; the detection rate
   is the fraction of keys with ``lower_bound > 1``. The power is the smallest
   violation detected at every key.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time

import jax
import jax.numpy as jnp

import jaxdp
from benchmarks._suite import price_bounds
from jaxdp import audit

EPS = 1.0
KW = dict(epsilon=EPS, sensitivity=1.0)
N_OUT = 10
X = jnp.zeros(N_OUT)
XN = jnp.ones(N_OUT).at[0].set(-1.0)
X_MONO = jnp.ones(N_OUT).at[0].set(0.0)


def _streaming(key, scores, shape=None):
    return jaxdp.exponential_streaming(
        key, lambda i: scores[i], N_OUT, chunk_size=4, shape=shape, **KW
    )


def _piecewise(key, intercepts, shape=None):
    edges, slopes = jnp.array([0.0, 1.0, 2.0]), jnp.array([0.0, 0.0])
    return jaxdp.exponential_piecewise(key, edges, intercepts, slopes, shape=shape, **KW)


_PREDS = jnp.zeros((10, 4), jnp.int32).at[0, 0].set(1)


def _learner(key, labels, shape=None):
    return jaxdp.select_hypothesis(key, _PREDS, labels, epsilon=EPS, shape=shape)


VOTES = jnp.repeat(jnp.arange(10), 5)
DATA = jnp.array([1.0, 2.0, 3.0, 4.0, 6.0])
BIDS = jnp.array([1.0, 2.0, 3.0, 4.0])
LABELS = jnp.zeros(4, jnp.int32)

MECHANISMS = {
    "exponential (gumbel)": (functools.partial(jaxdp.exponential, method="gumbel", **KW), X, XN),
    "exponential (inverse_cdf)": (
        functools.partial(jaxdp.exponential, method="inverse_cdf", **KW), X, XN),
    "exponential (monotonic)": (
        functools.partial(jaxdp.exponential, monotonic=True, **KW), X, X_MONO),
    "report_noisy_max (laplace)": (functools.partial(jaxdp.report_noisy_max, **KW), X, XN),
    "report_noisy_max (exponential)": (
        functools.partial(jaxdp.report_noisy_max, noise="exponential", **KW), X, XN),
    "report_noisy_max (gumbel)": (
        functools.partial(jaxdp.report_noisy_max, noise="gumbel", **KW), X, XN),
    "permute_and_flip": (functools.partial(jaxdp.permute_and_flip, **KW), X, XN),
    "top_k (k=2)": (functools.partial(jaxdp.top_k, k=2, **KW), X, XN),
    "exponential_streaming": (_streaming, X, XN),
    "laplace": (functools.partial(jaxdp.laplace, **KW), jnp.array(0.0), jnp.array(1.0)),
    "laplace (granularity 1/4)": (
        functools.partial(jaxdp.laplace, granularity=0.25, **KW), jnp.array(0.1),
        jnp.array(1.1)),
    "gaussian (delta=1e-2, eps at delta)": (
        functools.partial(jaxdp.gaussian, delta=1e-2, **KW), jnp.array(0.0), jnp.array(1.0)),
    "randomized_response (k=4)": (
        functools.partial(jaxdp.randomized_response, epsilon=EPS, num_categories=4),
        jnp.array(0), jnp.array(1)),
    "private_mode": (
        functools.partial(jaxdp.private_mode, epsilon=EPS, num_categories=10), VOTES,
        jnp.concatenate([VOTES, jnp.array([0])])),
    "select_hypothesis": (_learner, LABELS, LABELS.at[0].set(1)),
    "exponential_piecewise": (_piecewise, jnp.array([0.0, 0.0]), jnp.array([1.0, -1.0])),
    "private_quantile": (
        functools.partial(jaxdp.private_quantile, q=0.5, epsilon=EPS, bounds=(0.0, 10.0)),
        DATA, jnp.concatenate([DATA, jnp.array([9.0])])),
    "private_price": (
        functools.partial(jaxdp.private_price, epsilon=EPS, **price_bounds(0.0, 4.0)),
        BIDS, jnp.concatenate([BIDS, jnp.array([4.0])])),
}  # fmt: skip


def empirical_epsilon(samples: int, seed: int) -> list[dict]:
    rows = []
    for i, (name, (mech, x, xn)) in enumerate(MECHANISMS.items()):
        delta = 1e-2 if name.startswith("gaussian") else 0.0
        start = time.perf_counter()
        est = audit.estimate_epsilon(
            mech, x, xn, samples, key=jax.random.key(seed + i), delta=delta
        )
        rows.append(
            dict(
                mechanism=name,
                claimed=EPS,
                lower_bound=est.lower_bound,
                point_estimate=est.point_estimate,
                event=est.event,
                samples_per_side=est.num_samples,
                seconds=time.perf_counter() - start,
            )
        )
        print(f"{name:38s} lb={est.lower_bound:.4f} point={est.point_estimate:.4f}", flush=True)
    gauss = functools.partial(jaxdp.gaussian, delta=1e-2, **KW)
    est = audit.estimate_delta(
        gauss, jnp.array(0.0), jnp.array(1.0), samples, epsilon=EPS, key=jax.random.key(seed)
    )
    rows.append(dict(mechanism="gaussian (delta at eps)", claimed_delta=1e-2,
                     delta_lower_bound=est.lower_bound, delta_point=est.point_estimate,
                     samples_per_side=est.num_samples))  # fmt: skip
    print(f"gaussian delta lb={est.lower_bound:.5f} point={est.point_estimate:.5f}", flush=True)
    return rows


def power(budgets: list[int], keys: int) -> list[dict]:
    rows = []
    families = {
        "randomized_response": lambda e: (
            functools.partial(jaxdp.randomized_response, epsilon=e),
            jnp.array(0),
            jnp.array(1),
        ),
        "laplace_understated_sensitivity": lambda e: (
            functools.partial(jaxdp.laplace, epsilon=EPS, sensitivity=EPS / e),
            jnp.array(0.0),
            jnp.array(1.0),
        ),
    }
    for family, make in families.items():
        for n in budgets:
            for eps_true in (1.0, 1.005, 1.01, 1.02, 1.05, 1.1, 1.2):
                mech, x, xn = make(eps_true)
                lbs = [
                    audit.estimate_epsilon(mech, x, xn, n, key=jax.random.key(1000 + k)).lower_bound
                    for k in range(keys)
                ]
                rate = sum(lb > EPS for lb in lbs) / keys
                rows.append(dict(family=family, samples_per_side=n, eps_true=eps_true,
                                 detection_rate=rate, lower_bounds=lbs))  # fmt: skip
                print(f"{family:32s} n={n:>9d} eps_true={eps_true:.3f} detect={rate:.2f} "
                      f"lb_mean={sum(lbs) / keys:.4f}", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10**7, help="draws per side")
    parser.add_argument("--budgets", type=int, nargs="*", default=[200_000, 10**6, 10**7])
    parser.add_argument("--keys", type=int, default=5, help="repetitions for the power")
    parser.add_argument("--out", default=None, help="JSON file to write")
    parser.add_argument("--skip-power", action="store_true")
    args = parser.parse_args()
    result = dict(
        backend=jax.default_backend(),
        device=str(jax.devices()[0]),
        jax=jax.__version__,
        python=platform.python_version(),
        empirical_epsilon=empirical_epsilon(args.samples, seed=0),
        power=[] if args.skip_power else power(args.budgets, args.keys),
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
