"""Report-noisy-max and permute-and-flip."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp

from . import _checks, _kernels, _logits, _noisy_kernels, _rows, _tabulated, _tuning
from ._typing import Array, ArrayLike, PRNGKey

_NOISES = ("laplace", "gumbel", "exponential")


def report_noisy_max(
    key: PRNGKey,
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    noise: str = "laplace",
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
) -> Array:
    r"""Returns the index of the largest noisy score.

    .. math::

        \hat r = \arg\max_r \; s_r + Z_r, \qquad Z_r \overset{iid}{\sim}
        \mathrm{Lap}(b) \text{ or } \mathrm{Gumbel}(b) \text{ or } \mathrm{Exp}(b),
        \quad b = 2\Delta/\varepsilon \;(\Delta/\varepsilon \text{ if monotonic})

    Only the index is released, never the noisy values.

    **Privacy.** ε-DP for scores of sensitivity Δ under add/remove-one neighbours.
    Laplace noise Lap(2Δ/ε): Dwork & Roth 2014, Claim 3.9 (proved there for
    monotonic counts with Lap(1/ε), i.e. b = Δ/ε; the general case pays the factor
    2). Gumbel noise of scale 2Δ/ε makes the argmax equal in law to
    :func:`exponential` (the Gumbel-max trick), hence ε-DP by McSherry & Talwar
    2007. Exponential noise Exp(2Δ/ε) makes it equal in law to permute-and-flip
    (Ding et al. 2021), ε-DP by McKenna & Sheldon 2020, Thm 1.

    **Gumbel noise** is drawn by :func:`exponential`'s own kernels (``method="auto"``:
    the inverse CDF, or the race for one draw per row over at most 32 outcomes),
    so ``report_noisy_max(key, scores, noise="gumbel", ...)`` returns exactly the
    draws of ``exponential(key, scores, ...)`` with the same arguments, at its
    speed and with its finite-precision guarantee (in float32 at ε = 1, n = 10³:
    ε' = ε + 8.3e-6, δ' = 2.6e-11 by the inverse CDF; see :func:`exponential`).

    **Finite precision** (Laplace and exponential noise). Drawn as the
    exponential race ``argmin X_i * r_i`` (``r_i = exp(c (max s - s_i))``, ``X`` =
    ``exp(-noise)``, the same law): noise from 64 random bits per variate, logits
    computed exactly as two-float pairs and clipped 80 below the row maximum
    (exactly as private), the scale ``c`` rounded down. In float32 each draw is
    (ε', δ')-DP with ε' = ε + 40·2⁻²⁴ = ε + 2.4e-6 and δ' = n·(1 + e^ε')·2⁻⁶⁵; at
    ε = 1, δ' = 1.0e-16 (n = 10³), 1.0e-13 (n = 10⁶), 2.2e-10 (n = 2³¹). No outcome
    is impossible unless its probability is below 3e-20. Derivation: SECURITY.md,
    "Finite precision: noise-based paths".

    **Many draws per row.** When the static sizes make it cheaper (many draws of
    one row, e.g. ``n = 10**3`` and ``shape=(10**6,)``, for n ≤ 4096), the law is
    computed once per row and drawn by the categorical kernel instead of ``n``
    variates per draw: exponential noise through the exact permute-and-flip law
    (Gauss-Legendre quadrature of its polynomial, in double-float), Laplace noise
    through the exact law of the event "the noisy maximum is above the top score"
    (the same polynomial at half the acceptance probabilities), its complement
    (probability ``prod_j (1 - e^{-ε (s* - s_j) / (2Δ)} / 2)``, at most 1/2)
    finished by the race conditioned on it, drawn exactly by inverse CDFs. Same
    law; the finite-precision guarantee is then: ε' = ε + 6.4e-6 (exponential),
    ε + 9.7e-6 (Laplace) and δ' ≤ 3.4e-11 at ε = 1 for n ≤ 4096
    (``jaxdp._tabulated.guarantee``); derivation: SECURITY.md, "Finite precision:
    tabulated noisy max". With Laplace noise the running time of such a call
    depends on the scores, through that probability (SECURITY.md, "Timing and side
    channels"). On a GPU, Laplace noise is always drawn by the race, which is
    faster there (``jaxdp._tuning.LAPLACE_BELOW_COST``); the choice is made per
    platform when the program is lowered.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      scores: ``[..., n, ...]`` real array; ``-inf`` never selected.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be traced.
      sensitivity: Δ > 0, same rules.
      noise: static, ``"laplace"``, ``"gumbel"`` or ``"exponential"``.
      monotonic: static bool: scores all move in one direction between neighbours.
      shape: static draw shape with :func:`jax.random.categorical` semantics.
      axis: static int, the axis of outcomes.

    Returns:
      int32 array of ``shape``. Under tracing, invalid rows give -1.

    Raises:
      ValueError: bad ε, Δ, scores, ``shape``, ``axis``, ``noise`` or key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.report_noisy_max(jax.random.key(0), jnp.array([3.0, 1.0, 2.0]),
      ...                        epsilon=1.0, sensitivity=1.0, shape=(5,)).shape
      (5,)

    .. note::
      The noise is drawn chunk by chunk (2**18 variates live at a time on CPU,
      up to 2**27 on an accelerator: ``jaxdp._tuning.RACE_CHUNK``), so
      ``draws x n`` noise is never materialised. The noise is resolved to
      about 45 scale units (2**-65 in probability), in float32 and float64.

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.3.
      Z. Ding, D. Kifer, S. M. Saghaian N. E., T. Steinke, Y. Wang, Y. Xiao and
      D. Zhang, `The Permute-and-Flip Mechanism is Identical to Report-Noisy-Max
      with Exponential Noise <https://arxiv.org/abs/2105.07260>`_, 2021.
    """
    fn = "report_noisy_max"
    key, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, scores, epsilon, sensitivity, shape, axis
    )
    noise = _checks.choice(noise, _NOISES, fn, "noise")
    _debug_checks(fn, scores, epsilon, sensitivity)
    return _noisy_max_impl(
        key,
        scores,
        epsilon,
        sensitivity,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
        noise=noise,
    )


def _debug_checks(fn: str, scores: Array, epsilon: Array, sensitivity: Array) -> None:
    """The checkify checks of traced arguments, named after the public function.

    Made here rather than in :func:`_noisy_max_impl`, so that
    ``report_noisy_max(noise="exponential")`` and ``permute_and_flip`` share one
    compiled program. Concrete arguments were checked already (and raised).
    """
    params = {"epsilon": epsilon, "sensitivity": sensitivity}
    traced = {name: p for name, p in params.items() if not _checks.is_concrete(p)}
    if traced:
        _checks.debug_check_positive(fn, **traced)
    if not _checks.is_concrete(scores) and not jnp.issubdtype(scores.dtype, jnp.integer):
        _checks.debug_check_scores(fn, scores)
        _checks.debug_check_selectable(fn, jnp.max(scores, axis=-1))


@partial(jax.jit, static_argnames=("monotonic", "shape", "noise"))
def _noisy_max_impl(key, scores, epsilon, sensitivity, *, monotonic, shape, noise):
    # argmax(s + b Z) == argmax(s / b + Z): the logits are the scores over the scale.
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, _checks.compute_dtype())
    logits = _logits.from_scores(scores, scale)
    if noise == "gumbel":  # the exponential mechanism's law: drawn as exponential() draws it
        idx, rows_ok = _kernels.exponential_draws(key, logits, shape, "auto")
        valid = rows_ok & _logits.params_valid(rows_ok.shape, epsilon, sensitivity)
        return jnp.where(jnp.broadcast_to(valid, shape), idx, -1)
    valid = _logits.row_valid(logits.row_max, epsilon, sensitivity)
    draws_per_row = _rows.split_shape(shape, logits.batch)[0]

    def plan(kind: str) -> bool:
        return _tabulated.use_table(noise, draws_per_row, logits.n, kind)

    def build(tabulate: bool) -> Callable[[PRNGKey, _logits.Logits], tuple[Array, Array]]:
        def run(key: PRNGKey, logits: _logits.Logits) -> tuple[Array, Array]:
            if tabulate:  # many draws per row: the law once per row, then the kernel
                idx, rows_ok = _tabulated.draw(key, logits, shape, noise)
                return idx, jnp.broadcast_to(rows_ok, logits.batch)
            return _noisy_kernels.noisy_argmax(key, logits, shape, noise), jnp.ones(
                logits.batch, bool
            )

        return run

    # The rule differs between CPU and GPU for Laplace noise (jaxdp._tuning), so
    # the choice is staged per platform; elsewhere it is one program.
    idx, rows_ok = _tuning.staged(plan, build, key, logits)
    return jnp.where(jnp.broadcast_to(valid & rows_ok, shape), idx, -1)


def permute_and_flip(
    key: PRNGKey,
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
) -> Array:
    r"""The permute-and-flip mechanism (McKenna & Sheldon 2020).

    Visit the outcomes in a uniformly random order and accept outcome r with
    probability :math:`\exp(\varepsilon (s_r - s^*) / (2\Delta))`, where
    :math:`s^*` is the best score (ε / Δ if monotonic); return the first accepted.

    This is drawn in one vectorised pass through the identity of Ding et al.
    (2021): permute-and-flip is equal in law to report-noisy-max with
    exponential noise Exp(2Δ/ε), i.e. ``argmax(s + Exp(2Δ/ε))``; ties between
    equal scores are broken uniformly by the continuous noise. When a row is
    drawn many times (e.g. ``n = 10**3``, ``shape=(10**6,)``), its exact law

    .. math::

        P(r) = p_r \int_0^1 \prod_{j \ne r} (1 - p_j t)\, dt, \qquad
        p_j = e^{\varepsilon (s_j - s^*) / (2\Delta)},

    a polynomial of degree n - 1, is computed once by Gauss-Legendre quadrature
    with ⌈n/2⌉ nodes (exact for it) in double-float, and drawn by the categorical
    kernel (for n ≤ 4096, when the static sizes make it cheaper).

    **Privacy.** ε-DP for scores of sensitivity Δ (McKenna & Sheldon 2020, Thm 1;
    with ε / Δ for monotonic scores, their §4). Its expected score gap is never
    worse than the exponential mechanism's (their Thm 2).

    **Finite precision.** Drawn as the exponential race ``argmin X_i * r_i``
    (``r_i = exp(c (max s - s_i))``, ``X`` uniform: ``exp(-Exp(1))``): noise
    from 64 random bits per variate, logits computed exactly as two-float pairs
    and clipped 80 below the row maximum (exactly as private), the scale ``c``
    rounded down. In float32 each draw is (ε', δ')-DP with
    ε' = ε + 40·2⁻²⁴ = ε + 2.4e-6 and δ' = n·(1 + e^ε')·2⁻⁶⁵; at ε = 1,
    δ' = 1.0e-16 (n = 10³), 1.0e-13 (n = 10⁶), 2.2e-10 (n = 2³¹). No outcome is
    impossible unless its probability is below 3e-20. Derivation: SECURITY.md,
    "Finite precision: noise-based paths". When the law is tabulated (many
    draws per row), each draw is instead (ε + 6.4e-6, 2.6e-11)-DP for n ≤ 4096
    (the table's relative error, ≤ 3e-10, and the categorical kernel's
    guarantee; ``jaxdp._tabulated.guarantee``); derivation: SECURITY.md,
    "Finite precision: tabulated noisy max".

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      scores: ``[..., n, ...]`` real array; ``-inf`` never selected.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be traced.
      sensitivity: Δ > 0, same rules.
      monotonic: static bool.
      shape: static draw shape with :func:`jax.random.categorical` semantics.
      axis: static int, the axis of outcomes.

    Returns:
      int32 array of ``shape``. Under tracing, invalid rows give -1.

    Raises:
      ValueError: bad ε, Δ, scores, ``shape``, ``axis`` or key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.permute_and_flip(jax.random.key(0), jnp.zeros((4, 10)),
      ...                        epsilon=1.0, sensitivity=1.0).shape
      (4,)

    References:
      R. McKenna and D. Sheldon, `Permute-and-Flip: A new mechanism for
      differentially private selection <https://arxiv.org/abs/2010.12603>`_,
      NeurIPS 2020.
      Z. Ding, D. Kifer, et al., `The Permute-and-Flip Mechanism is Identical to
      Report-Noisy-Max with Exponential Noise <https://arxiv.org/abs/2105.07260>`_, 2021.
    """
    fn = "permute_and_flip"
    key, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, scores, epsilon, sensitivity, shape, axis
    )
    _debug_checks(fn, scores, epsilon, sensitivity)
    return _noisy_max_impl(
        key,
        scores,
        epsilon,
        sensitivity,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
        noise="exponential",
    )
