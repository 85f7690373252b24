"""The peers jaxdp is measured against, each sampling the same law.

Every baseline draws from the exponential mechanism with factor
``epsilon / (2 * sensitivity)`` (or, for the noise-based ones, report-noisy-max
with the same noise scale ``2 * sensitivity / epsilon``), so that every figure
of the suite is a ratio between equal laws. DP libraries are imported only
when installed (the ``[bench]`` extra); a missing one is reported, not fatal.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# ----------------------------------------------------------------------------- NumPy


def em_probabilities(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """Exact float64 probabilities of the exponential mechanism along the last axis."""
    logits = scores.astype(np.float64) * (epsilon / (2 * sensitivity))
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=-1, keepdims=True)


def textbook_loop(scores: np.ndarray, epsilon: float, sensitivity: float, draws: int):
    """The textbook per-draw loop: probabilities once, then one
    ``np.random.choice(R, 1, p=p)`` per draw. Returns a zero-argument callable."""
    p = em_probabilities(scores, epsilon, sensitivity)
    n = len(p)

    def run() -> np.ndarray:
        return np.array([np.random.choice(n, 1, p=p)[0] for _ in range(draws)])  # noqa: NPY002

    return run


def numpy_choice(scores: np.ndarray, epsilon: float, sensitivity: float, draws: int):
    """Vectorised NumPy: ``Generator.choice(n, size=S, p=p)``."""
    p = em_probabilities(scores, epsilon, sensitivity)
    rng = np.random.default_rng(0)
    return lambda: rng.choice(len(p), size=draws, p=p)


def numpy_noisy_argmax(
    scores: np.ndarray, epsilon: float, sensitivity: float, draws: int | None, noise: str
):
    """Vectorised NumPy report-noisy-max: ``argmax(s/b + Z)`` over a whole
    ``(S, n)`` (W1) or ``(B, n)`` (W2, ``draws=None``) block of noise at once."""
    logits = scores.astype(np.float64) * (epsilon / (2 * sensitivity))
    rng = np.random.default_rng(0)
    shape = logits.shape if draws is None else (draws, logits.shape[-1])
    sample = {"gumbel": rng.gumbel, "laplace": rng.laplace, "exponential": rng.exponential}[noise]
    return lambda: np.argmax(logits + sample(size=shape), axis=-1)


def numpy_inverse_cdf_rows(scores: np.ndarray, epsilon: float, sensitivity: float):
    """Vectorised NumPy inverse CDF, one draw per row of ``(B, n)`` scores."""
    rng = np.random.default_rng(0)

    def run() -> np.ndarray:
        logits = scores * (epsilon / (2 * sensitivity))
        c = np.cumsum(np.exp(logits - logits.max(axis=1, keepdims=True)), axis=1)
        v = rng.random(len(c)) * c[:, -1]
        return np.minimum((c <= v[:, None]).sum(axis=1), c.shape[1] - 1)

    return run


# ----------------------------------------------------------------------------- JAX


@partial(jax.jit, static_argnames=("draws",))
def hand_inverse_cdf(key, scores, *, draws):
    """A few lines of hand-written JAX: logsumexp + cumsum + searchsorted (W1)."""
    logits = scores * 0.5
    cdf = jnp.cumsum(jnp.exp(logits - jax.nn.logsumexp(logits)))
    return jnp.searchsorted(cdf, jax.random.uniform(key, (draws,)))


@jax.jit
def hand_inverse_cdf_rows(key, scores):
    """The same, per row of ``(B, n)`` scores, one draw each (W2)."""
    logits = scores * 0.5
    cdf = jnp.cumsum(jnp.exp(logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)), -1)
    u = jax.random.uniform(key, (scores.shape[0],))
    return jax.vmap(lambda c, x: jnp.searchsorted(c, x))(cdf, u)


@partial(jax.jit, static_argnames=("shape",))
def jax_categorical(key, scores, *, shape):
    """``jax.random.categorical``: one Gumbel per (draw, candidate), all at once."""
    return jax.random.categorical(key, scores * 0.5, shape=shape)


# ----------------------------------------------------------------------------- DP libraries

#: The peer DP libraries the suite compares against: distribution name -> the module the
#: suite imports. All come with the ``[bench]`` extra; tests/test_peers.py imports each.
PEERS: dict[str, str] = {"diffprivlib": "diffprivlib.mechanisms", "opendp": "opendp.prelude"}


def import_optional(name: str) -> tuple[Any | None, str | None]:
    """(module, None) or (None, why it could not be imported)."""
    try:
        return importlib.import_module(name), None
    except Exception as err:  # noqa: BLE001 - any import failure means "not available"
        return None, f"{type(err).__name__}: {err}"


def dp_library_samplers(
    scores: np.ndarray, epsilon: float, sensitivity: float, draws: int
) -> tuple[dict[str, tuple[Callable[[], Any], str]], list[str]]:
    """Per-draw samplers of the installed DP libraries, each doing ``draws`` calls.

    Returns ``({name: (callable, law)}, notes)``; ``law`` is ``"em"`` or
    ``"noise"``. The mechanism objects are built once, outside the timer.
    """
    out: dict[str, tuple[Callable[[], Any], str]] = {}
    notes: list[str] = []
    utility = [float(x) for x in scores]
    mech, why = import_optional(PEERS["diffprivlib"])
    if mech is None:
        notes.append(f"diffprivlib not importable ({why}); install the [bench] extra")
    else:
        em = mech.Exponential(epsilon=epsilon, sensitivity=sensitivity, utility=utility)
        pf = mech.PermuteAndFlip(epsilon=epsilon, sensitivity=sensitivity, utility=utility)
        out["diffprivlib_exponential"] = (
            lambda: [em.randomise() for _ in range(draws)],
            "em",
        )
        out["diffprivlib_permute_and_flip"] = (
            lambda: [pf.randomise() for _ in range(draws)],
            "noise",
        )
    dp, why = import_optional(PEERS["opendp"])
    if dp is None:
        notes.append(f"opendp not importable ({why}); install the [bench] extra")
    else:
        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        # OpenDP's noisy max under pure DP adds exponential noise of scale
        # 2 * sensitivity / epsilon: report-noisy-max with exponential noise.
        meas = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=2 * sensitivity / epsilon)
        out["opendp_noisy_max"] = (lambda: [meas(utility) for _ in range(draws)], "noise")
    return out, notes
