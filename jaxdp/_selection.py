r"""Private selection from private candidates (Liu & Talwar 2019; Papernot &
Steinke 2022): run an ε₀-DP candidate generator a random number of times T and
release the best of its outputs.

T follows the truncated negative binomial ``D(η, γ)`` on ``{1, 2, ...}``:

.. math::

    P[T = t] = \frac{\Gamma(t + η)}{\Gamma(η)\, t!}\,
        \frac{(1 - γ)^t}{γ^{-η} - 1},\qquad
    \mathbb{E}[T] = \frac{η (1 - γ)}{γ (1 - γ^η)},

the geometric law ``γ (1 - γ)^{t-1}`` when ``η = 1`` (stop after each run with
probability γ). Its log-weights are computed on the host in float64 and T is
drawn by the categorical kernel. The runs are evaluated in fixed-size blocks,
``jax.vmap`` over one block of keys, inside a ``jax.lax.while_loop`` that stops
after the block holding run T; runs past T are masked out, so the work is
``ceil(T / block)`` blocks, not ``max_repetitions``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _sampling, _tracing, _tuning
from ._typing import Array, ArrayLike, PRNGKey

_TRUNCATION_DELTA = 1e-12
_MAX_SUPPORT = 1 << 24


def repetition_log_probs(stop_probability: float, eta: float, size: int) -> np.ndarray:
    """``log P[T = t]`` for ``t = 1..size`` under ``D(η, γ)``, float64 (host)."""
    g, e = float(stop_probability), float(eta)
    t = np.arange(1, size + 1, dtype=np.float64)
    if g == 1.0:
        out = np.full(size, -np.inf)
        out[0] = 0.0
        return out
    log_q = math.log1p(-g)
    # log p(t) - log p(1) = sum_{l=1}^{t-1} log((l + η) / (l + 1)) + (t - 1) log(1 - γ)
    steps = np.log((t[:-1] + e) / (t[:-1] + 1)) + log_q
    rel = np.concatenate([[0.0], np.cumsum(steps)])
    log_norm = math.log(math.expm1(-e * math.log(g)))  # log(γ^-η - 1)
    return rel + math.log(e) + log_q - log_norm


def repetition_tail(stop_probability: float, eta: float, max_repetitions: int) -> float:
    """``P[T > max_repetitions]`` under ``D(η, γ)``, float64 (host)."""
    g, e, m = float(stop_probability), float(eta), int(max_repetitions)
    if g == 1.0:
        return 0.0
    if e == 1.0:
        return float(math.exp(m * math.log1p(-g)))
    size = m
    while True:
        size = max(2 * size, m + 64)
        logp = repetition_log_probs(g, e, size)
        if logp[-1] < logp.max() - 80 and logp[-1] < logp[-2]:
            break
        if size > 4 * _MAX_SUPPORT:
            break
    return float(np.sum(np.exp(logp[m:][::-1])))


def _auto_max_repetitions(fn: str, gamma: float, eta: float, total_eps: float) -> int:
    target = _TRUNCATION_DELTA * math.exp(-min(total_eps, 600.0))
    size = 64
    while size <= _MAX_SUPPORT:
        logp = repetition_log_probs(gamma, eta, size)
        tail = np.cumsum(np.exp(logp[::-1]))[::-1]  # tail[t-1] = P[T >= t] on the grid
        # the tail is falling (or already impossible: T = 1 surely when gamma = 1)
        closed = logp[-1] < logp.max() - 80 and (logp[-1] < logp[-2] or logp[-1] == -np.inf)
        if closed:
            below = np.nonzero(tail <= target)[0]
            if below.size:
                return int(below[0])  # P[T > M] = P[T >= M + 1] <= target
        size *= 4
    raise ValueError(
        f"{fn}: stop_probability={gamma!r} (eta={eta!r}) needs more than {_MAX_SUPPORT} "
        "repetitions to bound the truncation below 1e-12; pass max_repetitions"
    )


def _real_param(fn: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        if not (hasattr(value, "shape") and getattr(value, "shape", None) == ()):
            raise ValueError(f"{fn}: {name} must be a concrete real number, got {value!r}")
    if not _checks.is_concrete(value):
        raise ValueError(f"{fn}: {name} must be concrete (it fixes the law of T), got a tracer")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{fn}: {name} must be finite, got {out!r}")
    return out


def select_private_candidate(
    key: PRNGKey,
    candidate_fn: Callable[[PRNGKey], tuple[ArrayLike, Any]],
    *,
    epsilon: ArrayLike,
    stop_probability: float,
    eta: float = 1.0,
    max_repetitions: int | None = None,
) -> tuple[Array, Any]:
    r"""Runs an ε₀-DP candidate generator T times and releases the best candidate.

    .. math::

        T \sim D(η, γ),\qquad (s^*, c^*) = \operatorname*{arg\,max}_{t \le T} s_t,
        \quad (s_t, c_t) = \texttt{candidate\_fn}(k_t),

    with ``γ = stop_probability`` and ``D(η, γ)`` the truncated negative binomial
    of Papernot & Steinke (``η = 1``: geometric on {1, 2, ...}, mean 1/γ; see the
    module notes). Ties go to the earliest run; NaN scores never win unless all
    are NaN. This is the standard tool for private hyperparameter tuning: each
    run trains and scores one randomly drawn configuration with an ε₀-DP
    procedure, and only the best is released.

    **Privacy.** If ``candidate_fn`` is ε₀-DP (``epsilon``) as a function of the
    data for every key, the release is ``(2 + η) ε₀``-DP: ``3 ε₀`` for the
    geometric ``η = 1`` (Liu & Talwar 2019, Thm 3.4), ``(2 + η) ε₀`` for any
    ``η > 0`` (Papernot & Steinke 2022, Thm 2, pure-DP case; ``η → 0`` tends to
    2ε₀ at the cost of a heavier-tailed T). ``epsilon`` itself does not change
    the computation; it declares ε₀ and sets the default truncation below.

    **What max_repetitions costs.** A static bound M is needed to hold T's law in
    a finite table: T is drawn from ``D(η, γ)`` *conditioned on* ``T <= M``.
    With ``p = P[T > M]`` (a public number, :func:`repetition_tail`), the
    conditioned mechanism A_M and the exact one A satisfy ``A_M(D) <= A(D) / (1
    - p)`` and ``A(D') <= (1 - p) A_M(D') + p``, so A_M is ``(ε, e^ε p / (1 -
    p))``-DP with ``ε = (2 + η) ε₀``. For η = 1, ``p = (1 - γ)**M``: γ = 0.1 and
    M = 300 give ``p = 1.9e-14``. With ``max_repetitions=None`` (default) M is
    the smallest bound with ``e^ε p <= 1e-12`` (computed from a concrete
    ``epsilon``). The loop stops after the block holding run T, so M bounds the
    work but is not paid unless T reaches it.

    **Finite precision.** T is drawn by the categorical kernel
    (``jaxdp._sampling.categorical``) from log-weights computed in float64 and
    rounded once to float32 (half an ulp each; the kernel's (ε', δ') in
    ``SECURITY.md``, "The categorical kernel", applies to T's law). The law of T
    is data-independent, so its rounding changes the guarantee only through
    the proof's use of T's generating function: a relative error ρ in
    ``P[T = t]`` changes the bound by at most ``2ρ`` in ε. The comparison of
    scores is exact. Everything else is ``candidate_fn``'s own guarantee.

    **Compared with OpenDP.** ``opendp.combinators.make_select_private_candidate
    (measurement, stop_probability, threshold)`` implements Liu & Talwar's
    *threshold* variant (their Algorithm 1): it stops at the first score above a
    public threshold (or, after each failure, with probability γ, releasing
    nothing), 2ε₀-DP, run eagerly one candidate at a time. This function is the
    *best-of-T* variant (no threshold to choose, always releases a candidate,
    3ε₀ for η = 1, (2 + η)ε₀ in general), traced once and run as a jitted,
    vmapped loop.

    Args:
      key: a PRNG key (typed or legacy); one key per call. Run t gets its own
        key derived from it.
      candidate_fn: ``key -> (score, candidate)``, traceable (``jax.vmap`` is
        applied to it); ``score`` a real scalar, ``candidate`` any pytree of
        arrays. It must be ε₀-DP in the data it closes over.
      epsilon: ε₀ > 0, the declared guarantee of ``candidate_fn``.
      stop_probability: γ in (0, 1], concrete (it fixes T's law).
      eta: η > 0, concrete; 1 gives the geometric law.
      max_repetitions: None or a static int M >= 1; see above.

    Returns:
      ``(score, candidate)`` of the best run, with the dtypes and shapes
      ``candidate_fn`` returns.

    Raises:
      ValueError: ``candidate_fn`` not callable or not returning a real scalar
        score; ε₀ not finite and > 0; γ not in (0, 1]; η not finite and > 0;
        ``max_repetitions`` not an int >= 1 (booleans included); a traced ε₀
        with ``max_repetitions=None``; a batched key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> def candidate(k):
      ...     lr = jax.random.uniform(k)
      ...     return -jnp.abs(lr - 0.3), lr
      >>> score, lr = jaxdp.select_private_candidate(
      ...     jax.random.key(0), candidate, epsilon=0.5, stop_probability=0.1)
      >>> score.shape, lr.dtype
      ((), dtype('float32'))

    References:
      J. Liu and K. Talwar, `Private Selection from Private Candidates
      <https://arxiv.org/abs/1811.07971>`_, STOC 2019.
      N. Papernot and T. Steinke, `Hyperparameter Tuning with Renyi Differential
      Privacy <https://arxiv.org/abs/2110.03620>`_, ICLR 2022.
    """
    fn = "select_private_candidate"
    key = _checks.single_key(key, fn)
    if not callable(candidate_fn):
        raise ValueError(f"{fn}: candidate_fn must be callable, got {candidate_fn!r}")
    _checks.positive(fn, epsilon=epsilon)
    gamma = _real_param(fn, "stop_probability", stop_probability)
    if not 0 < gamma <= 1:
        raise ValueError(f"{fn}: stop_probability must be in (0, 1], got {gamma!r}")
    eta_f = _real_param(fn, "eta", eta)
    if not eta_f > 0:
        raise ValueError(f"{fn}: eta must be finite and > 0, got {eta_f!r}")
    if max_repetitions is None:
        if not _checks.is_concrete(epsilon):
            raise ValueError(
                f"{fn}: epsilon is traced, so the default truncation cannot be set; pass "
                "max_repetitions"
            )
        eps0 = float(np.max(np.asarray(epsilon, np.float64)))
        max_repetitions = _auto_max_repetitions(fn, gamma, eta_f, (2 + eta_f) * eps0)
    else:
        if isinstance(max_repetitions, bool):
            raise ValueError(f"{fn}: max_repetitions must be an int >= 1, got {max_repetitions!r}")
        try:
            max_repetitions = operator.index(max_repetitions)
        except TypeError as err:
            raise ValueError(
                f"{fn}: max_repetitions must be an int >= 1, got {max_repetitions!r}"
            ) from err
        if max_repetitions < 1:
            raise ValueError(f"{fn}: max_repetitions must be an int >= 1, got {max_repetitions}")
    probe = jax.eval_shape(candidate_fn, key)
    if not (isinstance(probe, tuple) and len(probe) == 2):
        raise ValueError(f"{fn}: candidate_fn must return a pair (score, candidate)")
    score_spec = probe[0]
    if getattr(score_spec, "shape", None) != () or not jnp.issubdtype(
        score_spec.dtype, jnp.floating
    ):
        raise ValueError(
            f"{fn}: candidate_fn's score must be a real floating scalar, got "
            f"{getattr(score_spec, 'shape', None)} {getattr(score_spec, 'dtype', None)}"
        )
    log_probs = jnp.asarray(repetition_log_probs(gamma, eta_f, max_repetitions), jnp.float32)
    block = _tuning.selection_block(max_repetitions)
    return _select_impl(key, log_probs, candidate_fn=candidate_fn, block=block)


@partial(jax.jit, static_argnames=("candidate_fn", "block"))
def _select_impl(key, log_probs, *, candidate_fn, block):
    key_t, key_runs = jax.random.split(key)
    num = _sampling.categorical(key_t, log_probs, ()) + 1  # T in {1..M}
    spec = jax.eval_shape(candidate_fn, key_runs)
    best_score = jnp.full((), -jnp.inf, spec[0].dtype)
    best_cand = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), spec[1])
    offsets = jnp.arange(block)

    def cond(state):
        b = state[0]
        return b * block < num

    def body(state):
        b, score, cand, have = state
        keys = jax.random.split(jax.random.fold_in(key_runs, b), block)
        scores, cands = jax.vmap(candidate_fn)(keys)
        live = b * block + offsets < num
        masked = jnp.where(live & ~jnp.isnan(scores), scores, -jnp.inf)
        top = jnp.max(masked)
        j = jnp.argmax(masked == top)  # first run of the block with the top score
        better = ~have | (top > score)
        new_score = jnp.where(better, top, score)
        new_cand = jax.tree.map(lambda old, c: jnp.where(better, c[j], old), cand, cands)
        return b + 1, new_score, new_cand, jnp.bool_(True)

    state = (jnp.int32(0), best_score, best_cand, jnp.bool_(False))
    state = _tracing.carry_for(body, state)  # shard_map: runs vary with the key
    _, score, cand, _ = jax.lax.while_loop(cond, body, state)
    return score, cand


__all__ = ["repetition_log_probs", "repetition_tail", "select_private_candidate"]
