"""Split-sample audits of every sampling path at 10**8 draws per side (``--runslow``).

Issue 10, item 3: where a path's implemented law is not computed exactly in the
fast tests, audit it at scale on neighbours built to be its weak point: for the
finite-range samplers the rounding attack of finding 1 (``D = [17, 0, ..., 0]``
against ``D' = [17, 1, ..., 1]``, one added record, ``monotonic``), for the
noise races a leader followed by tiny outcomes, and for the continuous and
additive mechanisms a record that moves the output most.

Each audit estimates a lower bound on the hockey-stick divergence at the path's
stated ε' (``jaxdp.audit.estimate_delta``, events chosen on a selection batch
including outcomes never seen there and their unions) and checks it does not
exceed the stated δ' by more than the audit's resolution. The old rounding
sampler (``negative_controls.rounding_inverse_cdf``) runs through the same
audit and must be caught.

``JAXDP_AUDIT_DRAWS`` overrides the number of draws per side (default 10**8),
to try the file quickly. Run ``python -m pytest tests/test_audit_paths.py
--runslow -n 0 -s`` to see the measured bounds.
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from negative_controls import rounding_inverse_cdf

import jaxdp
from jaxdp import _descent, _tabulated, audit

# The CPU's layout rules on every backend: these tests reach each layout through them.
pytestmark = pytest.mark.usefixtures("cpu_layout_rules")

DRAWS = int(float(os.environ.get("JAXDP_AUDIT_DRAWS", 10**8)))
SELECT = max(DRAWS // 10, 10**6)
EPS = 1.0
#: The audit's resolution at DRAWS per side: a δ this small is below what a
#: counting step can tell from 0 (a Clopper-Pearson width at 10**8 draws).
RESOLUTION = 30.0 / DRAWS

N_BIG = 4096  # finding 1's size: the float32 prefix sums lose outcomes here
N_RACE = 64  # the noise races cost n variates per draw: a smaller range
D = jnp.zeros(N_BIG, jnp.float32).at[0].set(17.0)
D_NEIGHBOUR = jnp.ones(N_BIG, jnp.float32).at[0].set(17.0)
N_HUGE = 2**20  # finding 1's worst case: δ = 0.067 per draw for the old sampler
H = jnp.zeros(N_HUGE, jnp.float32).at[0].set(17.0)
H_NEIGHBOUR = jnp.ones(N_HUGE, jnp.float32).at[0].set(17.0)
R = jnp.zeros(N_RACE, jnp.float32).at[0].set(12.0)
R_NEIGHBOUR = jnp.ones(N_RACE, jnp.float32).at[0].set(12.0)
KW = dict(epsilon=EPS, sensitivity=1.0, monotonic=True)
#: exponential by the inverse CDF: its layout (descent, hybrid, alias table) follows the draws.
INVERSE_CDF = functools.partial(jaxdp.exponential, method="inverse_cdf", **KW)


class Path(NamedTuple):
    """One audited path: the mechanism, its neighbours, how draws are made
    (``"batched"``: many draws per call, ``"montecarlo"``: one per trial) and the
    (ε', δ') the path states."""

    mechanism: Callable
    x: Any
    x_neighbour: Any
    driver: str
    stated: tuple[float, float]


#: The noise races (SECURITY.md, "Finite precision: noise-based paths"): ε + 40u.
RACE = (EPS + 40 * 2.0**-24, 1e-10)


def _categorical(n):
    return _descent.guarantee(n, EPS)


def _inverse_cdf(x, x_neighbour, driver):
    """``exponential`` by the inverse CDF on finding 1's neighbours, at the stated
    guarantee for their size; the layout follows the driver's draws per call."""
    return Path(INVERSE_CDF, x, x_neighbour, driver, _categorical(x.shape[0]))


def _streaming(key, scores, shape=None, method="inverse_cdf"):
    return jaxdp.exponential_streaming(
        key, lambda i: scores[i], scores.shape[0], chunk_size=1024, method=method, shape=shape, **KW
    )


def _quantile(key, data, shape=None):
    return jaxdp.private_quantile(key, data, 0.5, epsilon=EPS, bounds=(0.0, 10.0), shape=shape)


def _price(key, bids, shape=None):
    return jaxdp.private_price(key, bids, epsilon=EPS, bounds=(0.1, 4.0), shape=shape)


QUANTILE_DATA = jnp.float32([1.0, 2.0, 2.0, 3.0, 5.0, 5.5, 7.0])
MODE_DATA = jnp.int32([0] * 9 + [1] * 8 + [2])
PRED = jnp.int32([[0, 1, 1, 0, 1, 1, 0, 0], [1, 1, 1, 0, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0]])
LABELS = jnp.int32([0, 1, 1, 0, 1, 1, 0, 1])

PATHS = {
    # exponential, per layout the dispatcher picks (from the draws per call: BATCH)
    "exponential_alias_table": _inverse_cdf(D, D_NEIGHBOUR, "batched"),
    "exponential_alias_table_2**20": _inverse_cdf(H, H_NEIGHBOUR, "batched"),
    "exponential_hybrid": _inverse_cdf(D, D_NEIGHBOUR, "batched"),
    "exponential_deep_hybrid": _inverse_cdf(H, H_NEIGHBOUR, "batched"),
    "exponential_descent": _inverse_cdf(D, D_NEIGHBOUR, "montecarlo"),
    "exponential_gumbel": Path(
        mechanism=functools.partial(jaxdp.exponential, method="gumbel", **KW),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="batched",
        stated=RACE,
    ),
    "exponential_streaming_inverse_cdf": Path(
        mechanism=_streaming,
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="batched",
        stated=RACE,
    ),
    "exponential_streaming_gumbel": Path(
        mechanism=functools.partial(_streaming, method="gumbel"),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="batched",
        stated=RACE,
    ),
    # report-noisy-max and permute-and-flip: tabulated at many draws, races at few
    # Gumbel noise: exponential's kernels, the categorical kernel's guarantee
    "report_noisy_max_gumbel": Path(
        mechanism=functools.partial(jaxdp.report_noisy_max, noise="gumbel", **KW),
        x=D,
        x_neighbour=D_NEIGHBOUR,
        driver="batched",
        stated=_categorical(D.shape[0]),
    ),
    "permute_and_flip_table": Path(
        mechanism=functools.partial(jaxdp.permute_and_flip, **KW),
        x=D,
        x_neighbour=D_NEIGHBOUR,
        driver="batched",
        stated=_tabulated.guarantee(N_BIG, EPS, "exponential"),
    ),
    "report_noisy_max_laplace_table": Path(  # the leader alone: half the draws conditioned
        mechanism=functools.partial(jaxdp.report_noisy_max, noise="laplace", **KW),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="batched",
        stated=_tabulated.guarantee(N_RACE, EPS, "laplace"),
    ),
    "report_noisy_max_laplace_race": Path(
        mechanism=functools.partial(jaxdp.report_noisy_max, noise="laplace", **KW),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="montecarlo",
        stated=RACE,
    ),
    "permute_and_flip_race": Path(
        mechanism=functools.partial(jaxdp.permute_and_flip, **KW),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="montecarlo",
        stated=RACE,
    ),
    "top_k_2": Path(
        mechanism=functools.partial(jaxdp.top_k, k=2, **KW),
        x=R,
        x_neighbour=R_NEIGHBOUR,
        driver="batched",
        stated=(EPS + 2 * 40 * 2.0**-24, 1e-10),
    ),
    # continuous ranges: the interval choice and the point inside it
    "private_quantile": Path(
        mechanism=_quantile,
        x=QUANTILE_DATA,
        x_neighbour=jnp.append(QUANTILE_DATA, 10.0),
        driver="batched",
        stated=(EPS + 1e-5, 1e-10),
    ),
    "private_price": Path(
        mechanism=_price,
        x=QUANTILE_DATA / 2,
        x_neighbour=jnp.append(QUANTILE_DATA / 2, 4.0),
        driver="batched",
        stated=(EPS + 1e-5, 1e-10),
    ),
    "private_mode": Path(
        mechanism=functools.partial(jaxdp.private_mode, epsilon=EPS, num_categories=3),
        x=MODE_DATA,
        x_neighbour=jnp.append(MODE_DATA, 1),
        driver="batched",
        stated=_categorical(3),
    ),
    "select_hypothesis": Path(
        mechanism=lambda key, labels, shape=None: jaxdp.select_hypothesis(
            key, PRED, labels, epsilon=EPS, shape=shape
        ),
        x=LABELS,
        x_neighbour=LABELS.at[-1].set(0),
        driver="batched",
        stated=_categorical(3),
    ),
    # additive noise
    "laplace_granular": Path(
        mechanism=functools.partial(jaxdp.laplace, epsilon=EPS, sensitivity=1.0, granularity=0.125),
        x=jnp.float32(0.0),
        x_neighbour=jnp.float32(1.0),
        driver="batched",
        stated=(EPS + 1e-5, 1e-9),
    ),
    "randomized_response": Path(
        mechanism=functools.partial(jaxdp.randomized_response, epsilon=EPS, num_categories=4),
        x=jnp.int32(0),
        x_neighbour=jnp.int32(1),
        driver="batched",
        stated=(EPS + 1e-6, 1e-10),
    ),
}


#: Draws per batched call where the default (2**20) would not pick the layout named.
BATCH = {
    "exponential_alias_table_2**20": 1 << 22,
    "exponential_hybrid": 1 << 13,
    "exponential_deep_hybrid": 1 << 13,
}


def _audit(mech, x, xn, driver, eps_stated, key, batch_size=1 << 20):
    return audit.estimate_delta(
        mech, x, xn, DRAWS, epsilon=eps_stated, key=jax.random.key(key),
        num_select=SELECT, confidence=0.99, driver=driver, batch_size=batch_size,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PATHS))
def test_path_audit(name):
    mech, x, xn, driver, (eps_stated, delta_stated) = PATHS[name]
    seed = zlib.crc32(name.encode())
    est = _audit(mech, x, xn, driver, eps_stated, key=seed, batch_size=BATCH.get(name, 1 << 20))
    print(f"\n{name}: δ lower bound {est.lower_bound:.3g} at ε' = {eps_stated:.7g} "
          f"(stated δ' {delta_stated:.2g}, resolution {RESOLUTION:.2g}); event: {est.event}; "
          f"counts {est.counts}")  # fmt: skip
    assert est.lower_bound <= delta_stated + RESOLUTION, est


@pytest.mark.slow
def test_path_audit_catches_rounding_control():
    """The old float32 inverse CDF (finding 1) through the same audit: caught."""
    mech = functools.partial(rounding_inverse_cdf, **KW)
    eps_stated, delta_stated = _categorical(N_HUGE)
    est = _audit(mech, H, H_NEIGHBOUR, "batched", eps_stated, key=5)
    print(f"\nrounding control: δ lower bound {est.lower_bound:.3g}; event: {est.event}")
    assert est.lower_bound > 10 * (delta_stated + RESOLUTION), est


def test_paths_cover_the_dispatcher():
    """Every layout of the categorical dispatcher has an audit: the alias table
    and the hybrid at depth 1 and 3 (many draws per call, batched driver) and the
    descent (one draw per trial)."""
    layouts = {
        "exponential_alias_table": _descent.layout(N_BIG, 1 << 20),
        "exponential_alias_table_2**20": _descent.layout(
            N_HUGE, BATCH["exponential_alias_table_2**20"]
        ),
        "exponential_hybrid": _descent.layout(N_BIG, BATCH["exponential_hybrid"]),
        "exponential_deep_hybrid": _descent.layout(N_HUGE, BATCH["exponential_deep_hybrid"]),
        "exponential_descent": _descent.layout(N_BIG, 1),
    }
    assert layouts == {
        "exponential_alias_table": "alias",
        "exponential_alias_table_2**20": "alias",
        "exponential_hybrid": "hybrid",
        "exponential_deep_hybrid": "hybrid",
        "exponential_descent": "descent",
    }
    assert _descent.hybrid_depth(N_BIG, BATCH["exponential_hybrid"]) == 1
    assert _descent.hybrid_depth(N_HUGE, BATCH["exponential_deep_hybrid"]) == 3
    assert {PATHS[p].driver for p in layouts} == {"batched", "montecarlo"}
    assert np.all(np.asarray(D_NEIGHBOUR) - np.asarray(D) >= 0)  # one added record
