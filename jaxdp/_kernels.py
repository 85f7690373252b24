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

import jax.numpy as jnp

from . import _inverse_cdf, _noisy_kernels
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
        method = choose_method(num_lead, logits.n, max(1, len(tail)))
    if method == "gumbel":
        idx = _noisy_kernels.noisy_argmax(key, logits, shape, "gumbel")
        return idx, jnp.isfinite(logits.row_max)
    return _inverse_cdf.from_scores(key, logits, shape)


def choose_method(num_draws_per_row: int, n: int, num_rows: int) -> str:
    """The faster of ``"gumbel"`` and ``"inverse_cdf"`` for these static sizes.

    Gumbel-max costs ``S * n`` noise variates (a uniform and two logs each) per
    row; the inverse CDF costs ``n`` exps per row, then per draw a few gathers
    (guide table) or a walk down the block levels. Measured with
    ``python -m benchmarks crossover`` (2-core AMD EPYC, jax 0.10.2, median ms
    per call, ``B`` rows, ``S`` draws per row; full table in
    ``benchmarks/results/``):

    ====  ====  =====  ===========  ============  =======
    B     S     n      gumbel ms    inverse_cdf   faster
    ====  ====  =====  ===========  ============  =======
    1024  1     2      0.13         0.30          gumbel
    1024  1     16     0.24         0.28          gumbel
    1024  1     32     0.33         0.28          icdf
    1024  1     64     0.65         0.45          icdf
    1024  1     1024   3.9          0.95          icdf
    1024  4     2      0.39         0.27          icdf
    1024  4     32     1.25         0.54          icdf
    1024  16    4      1.39         0.37          icdf
    1024  1024  8      49.8         4.1           icdf
    1     1024  8192   27.5         0.30          icdf
    1     1..64 <=64   ~0.1         ~0.1          (dispatch-bound: a tie)
    ====  ====  =====  ===========  ============  =======

    These timings were taken on the float32 prefix-sum kernels that the sound
    descent (:mod:`jaxdp._descent`) and the race replaced; the rule is kept as it
    was, and the crossover is to be measured again on the new kernels.

    So the Gumbel method wins only for one draw per row over at most 16
    candidates (where the inverse CDF's fixed per-row work dominates); the
    inverse CDF wins everywhere else, by up to 90x for many draws of a long
    row. ``num_rows`` does not move the crossover.
    """
    del num_rows
    if num_draws_per_row == 1 and n <= 16:
        return "gumbel"
    return "inverse_cdf"
