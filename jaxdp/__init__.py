"""jaxdp: differentially private selection in JAX.

The exponential mechanism and its family as pure functions of an explicit PRNG
key, ready for ``jax.jit``, ``jax.vmap`` and sharding, drawing millions of
samples per call.

Start with ``help(jaxdp.exponential)``; ``jaxdp.__all__`` lists every public name.
The submodules ``jaxdp.accounting``, ``jaxdp.utility``, ``jaxdp.montecarlo`` and
``jaxdp.audit`` hold privacy accounting, accuracy bounds, Monte Carlo studies and
the empirical auditor. The README (privacy semantics and the conventions every
sampler follows), the API reference built from these docstrings (``docs/``:
``sphinx-build -b html docs docs/_build``), SECURITY.md and runnable scripts in
``examples/`` ship with the source repository.
"""

from . import accounting as accounting
from . import audit as audit
from . import montecarlo as montecarlo
from . import utility as utility
from ._additive import gaussian as gaussian
from ._additive import laplace as laplace
from ._categorical import private_mode as private_mode
from ._categorical import randomized_response as randomized_response
from ._checked import checked as checked
from ._continuous import exponential_piecewise as exponential_piecewise
from ._continuous import private_price as private_price
from ._continuous import private_quantile as private_quantile
from ._exponential import exponential as exponential
from ._exponential import exponential_log_probs as exponential_log_probs
from ._joint_top_k import joint_top_k as joint_top_k
from ._learning import select_hypothesis as select_hypothesis
from ._noisy_max import permute_and_flip as permute_and_flip
from ._noisy_max import report_noisy_max as report_noisy_max
from ._quantiles import private_quantiles as private_quantiles
from ._random import random_key as random_key
from ._selection import select_private_candidate as select_private_candidate
from ._streaming import exponential_streaming as exponential_streaming
from ._top_k import top_k as top_k

__version__ = "0.1.0"

__all__ = [
    "accounting",
    "audit",
    "checked",
    "exponential",
    "exponential_log_probs",
    "exponential_piecewise",
    "exponential_streaming",
    "gaussian",
    "joint_top_k",
    "laplace",
    "montecarlo",
    "permute_and_flip",
    "private_mode",
    "private_price",
    "private_quantile",
    "private_quantiles",
    "random_key",
    "randomized_response",
    "report_noisy_max",
    "select_hypothesis",
    "select_private_candidate",
    "top_k",
    "utility",
]
