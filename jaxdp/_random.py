"""Noise generators used by the samplers (one place to harden and to tune)."""

from __future__ import annotations

import jax

from ._typing import Array, PRNGKey


def uniform(key: PRNGKey, shape, dtype) -> Array:
    """U[0, 1) variates."""
    return jax.random.uniform(key, shape, dtype)


def gumbel(key: PRNGKey, shape, dtype) -> Array:
    """Standard Gumbel variates."""
    return jax.random.gumbel(key, shape, dtype)


def laplace(key: PRNGKey, shape, dtype) -> Array:
    """Standard Laplace variates (scale 1)."""
    return jax.random.laplace(key, shape, dtype)


def exponential(key: PRNGKey, shape, dtype) -> Array:
    """Standard exponential variates (rate 1)."""
    return jax.random.exponential(key, shape, dtype)
