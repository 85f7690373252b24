"""The dispatcher: which kernel draws a finite-range selection.

The kernels, one module per concern:

* :mod:`jaxdp._logits`: the one scores-to-logits transform
  (:func:`~jaxdp._logits.from_scores`), whose :class:`~jaxdp._logits.Logits`
  every kernel takes;
* :mod:`jaxdp._noisy_kernels`: the noisy argmax, the race ``argmin X_i / w_i``
  (Gumbel: the exponential mechanism; Laplace and exponential noise:
  report-noisy-max), in cache-sized chunks;
* :mod:`jaxdp._inverse_cdf`: the inverse CDF, the sound categorical kernel of
  :mod:`jaxdp._descent` (and :mod:`jaxdp._alias`), whose law and
  finite-precision guarantee are in ``SECURITY.md`` ("The categorical kernel");
* :mod:`jaxdp._threefry`: the fused threefry lowering of the PRNG
  (:func:`~jaxdp._threefry.fast_key`), beside the generators of
  :mod:`jaxdp._random`;
* :mod:`jaxdp._rows`: batch and draw shapes, rows and chunked steps.

This module picks between the first two for the exponential mechanism
(:func:`exponential_draws`, by :func:`choose_method` for ``method="auto"``).
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from . import _inverse_cdf, _noisy_kernels, _tuning
from ._logits import Logits
from ._rows import split_shape
from ._typing import Array, PRNGKey


def exponential_draws(
    key: PRNGKey, logits: Logits, shape: tuple[int, ...], method: str
) -> tuple[Array, Array]:
    """Draws of ``shape`` from the exponential mechanism's law ``softmax(logits)``
    by ``method`` (``"gumbel"``, ``"inverse_cdf"`` or ``"auto"``), and a flag, of
    the batch's shape or the tail batch's, that the row is valid (a finite maximum
    for the race; a positive, finite total for the inverse CDF, which tells it
    without a separate pass over the scores)."""
    if method == "auto":
        num_lead, tail = split_shape(shape, logits.batch)
        method = choose_method(num_lead, logits.n, max(1, math.prod(tail)))
    if method == "gumbel":
        idx = _noisy_kernels.noisy_argmax(key, logits, shape, "gumbel")
        return idx, jnp.isfinite(logits.row_max)
    return _inverse_cdf.from_scores(key, logits, shape)


def choose_method(num_draws_per_row: int, n: int, num_rows: int) -> str:
    """``method="auto"``'s choice for these static sizes: :func:`jaxdp._tuning.choose_method`."""
    return _tuning.choose_method(num_draws_per_row, n, num_rows)
