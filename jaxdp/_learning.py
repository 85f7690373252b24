"""A private learner: choosing a hypothesis by the exponential mechanism."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from . import _checks
from ._exponential import _exponential_impl
from ._typing import Array, ArrayLike, PRNGKey


def _codes(predictions: Any, labels: Any) -> tuple[Array, Array]:
    """Both as JAX arrays. 64-bit integer labels on the host with x64 off (which
    ``jnp.asarray`` would wrap modulo 2**32, so that 2**32 + 1 would equal 1) are
    replaced by int32 codes of the distinct values of both arrays: the same
    equalities, so the same errors."""
    wide_p, wide_l = _checks.wide_host(predictions), _checks.wide_host(labels)
    if wide_p is not None or wide_l is not None:
        p, lab = np.asarray(predictions), np.asarray(labels)
        if p.dtype.kind in "iub" and lab.dtype.kind in "iub":
            common = np.result_type(p.dtype, lab.dtype)
            common = object if common.kind == "f" else common  # int64 with uint64
            both = np.concatenate([p.ravel().astype(common), lab.ravel().astype(common)])
            _, codes = np.unique(both, return_inverse=True)
            codes = codes.astype(np.int32)
            predictions, labels = (
                codes[: p.size].reshape(p.shape),
                codes[p.size :].reshape(lab.shape),
            )
        else:
            predictions = _checks._wide_to_float(wide_p) if wide_p is not None else predictions
            labels = _checks._wide_to_float(wide_l) if wide_l is not None else labels
    return jnp.asarray(predictions), jnp.asarray(labels)


def select_hypothesis(
    key: PRNGKey,
    predictions: ArrayLike,
    labels: ArrayLike,
    *,
    epsilon: ArrayLike,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""Chooses a hypothesis with few training errors, privately.

    Each hypothesis h is scored by its negated empirical error,
    :math:`u(x, h) = -\frac{1}{n}\#\{i : h(x_i) \ne y_i\}`, with sensitivity
    :math:`\Delta = 1/n`, and drawn by the exponential mechanism:

    .. math::

        \Pr[h] \propto \exp\!\left(\frac{\varepsilon\, u(x, h)}{2\Delta}\right)
               = \exp\!\left(-\frac{\varepsilon}{2}\, \mathrm{errors}(h)\right)

    **Privacy.** ε-DP where neighbouring datasets differ by *replacing* one
    labelled example (n is public): one example changes each error count by at
    most 1, i.e. each score by 1/n, in either direction (not monotonic), so the
    factor is ε/(2Δ) (McSherry & Talwar 2007; the generic private learner of
    Kasiviswanathan et al. 2011, whose excess error is
    O((log|H| + log(1/β)) / (εn)) with probability 1 - β).

    **Finite precision.** The scores are the integer error counts (exact; the
    form -errors with Δ = 1 gives the same logits as -errors/n with Δ = 1/n
    without rounding 1/n), so the logits ``ε/2·gap`` carry one rounding and the
    draw is the categorical kernel's (``SECURITY.md``, "The categorical
    kernel"): each draw is (ε + ε_c', δ_c')-DP with the kernel's (ε_c', δ_c')
    for H outcomes.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      predictions: ``[..., H, n]`` predictions of H hypotheses on n examples.
      labels: ``[..., n]`` labels, compared with ``predictions`` by equality.
      epsilon: ε > 0; number or array broadcasting with the batch shape; may be traced.
      shape: static draw shape with :func:`jax.random.categorical` semantics over
        the batch shape ``predictions.shape[:-2]``.

    Returns:
      int32 array of ``shape``: indices of hypotheses (empty for an empty batch,
      as :func:`jax.random.categorical`). Under tracing, invalid ε gives -1.

    Raises:
      ValueError: ε not finite and > 0; ``predictions`` not at least 2-d; the
        example axes of predictions and labels differ or their batch shapes do not
        broadcast; H = 0; bad ``shape`` or key. No examples (n = 0) is data, not
        an error: every hypothesis then has 0 errors, and the draw is uniform.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> preds = jnp.array([[0, 1, 1, 0], [1, 1, 1, 1]])
      >>> jaxdp.select_hypothesis(jax.random.key(0), preds, jnp.array([0, 1, 1, 1]),
      ...                         epsilon=1.0, shape=(10,)).shape
      (10,)

    References:
      S. P. Kasiviswanathan, H. K. Lee, K. Nissim, S. Raskhodnikova and A. Smith,
      `What Can We Learn Privately? <https://doi.org/10.1137/090756090>`_, SIAM J.
      Comput. 2011.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "select_hypothesis"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, epsilon=epsilon)
    predictions, labels = _codes(predictions, labels)
    if predictions.ndim < 2:
        raise ValueError(
            f"{fn}: predictions must have shape [..., H, n], got shape {predictions.shape}"
        )
    if labels.ndim < 1 or labels.shape[-1] != predictions.shape[-1]:
        raise ValueError(
            f"{fn}: labels must have shape [..., n] with n = predictions.shape[-1] = "
            f"{predictions.shape[-1]}, got labels of shape {labels.shape} for predictions "
            f"of shape {predictions.shape}"
        )
    try:
        batch = jnp.broadcast_shapes(predictions.shape[:-2], labels.shape[:-1])
    except ValueError as err:
        raise ValueError(
            f"{fn}: the batch shapes of predictions {predictions.shape} and labels "
            f"{labels.shape} do not broadcast"
        ) from err
    num_h, n = predictions.shape[-2], predictions.shape[-1]
    if num_h == 0:
        raise ValueError(f"{fn}: predictions holds no hypotheses (H = 0)")
    predictions = jnp.broadcast_to(predictions, tuple(batch) + (num_h, n))
    labels = jnp.broadcast_to(labels, tuple(batch) + (n,))
    errors = jnp.sum(predictions != labels[..., None, :], axis=-1)
    # -errors/n with sensitivity 1/n gives the same logits as -errors with
    # sensitivity 1; the integer form is exact in float.
    _, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, -errors, epsilon, 1.0, shape, -1
    )
    if math.prod(shape) == 0:
        return jnp.zeros(shape, jnp.int32)  # as jax.random.categorical on an empty batch
    return _exponential_impl(
        key, scores, epsilon, sensitivity, monotonic=False, shape=shape, method="auto"
    )
