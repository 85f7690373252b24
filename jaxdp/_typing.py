"""Type aliases used across jaxdp."""

from __future__ import annotations

import jax
from jax.typing import ArrayLike as ArrayLike

#: A PRNG key: a typed key (``jax.random.key``) or a legacy uint32 ``[2]`` key
#: (``jax.random.PRNGKey``).
PRNGKey = jax.Array

Array = jax.Array

__all__ = ["Array", "ArrayLike", "PRNGKey"]
