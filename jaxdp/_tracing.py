"""What kernels need to stay correct under transformations that run after them.

* Float64 blocks inside float32 programs: :func:`x64_for` re-enters
  ``jax.enable_x64`` in Python that JAX runs after the caller's context has closed
  (a ``custom_vmap`` rule).
* Loops under :func:`jax.shard_map`: :func:`varying_like` and :func:`carry_for`
  give a loop's initial carry the varying mesh axes its body's carry will have,
  which shard_map's varying-axes check requires; both are no-ops outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def x64_for(*arrays: Any) -> contextlib.AbstractContextManager:
    """``jax.enable_x64(True)`` where some of ``arrays`` are 64-bit and x64 is off, else
    a no-op: for Python code that JAX runs after the caller's context has closed
    (a ``custom_vmap`` rule runs when the ``vmap`` reaches it), so that it builds
    its constants in its operands' dtypes, as when it was first traced (a kernel
    run in float64 inside ``jax.enable_x64``, as :func:`jaxdp.private_quantiles`
    does, is otherwise rebuilt with float32 constants)."""
    wide = any(np.dtype(jnp.result_type(a)).itemsize == 8 for a in arrays)
    if wide and not jax.config.jax_enable_x64:
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def varying_like(init: Any, *refs: Any) -> Any:
    """``init`` (a pytree of arrays) marked as varying over every manual mesh axis over
    which some leaf of ``refs`` varies (inside :func:`jax.shard_map`), else unchanged.

    A loop (``lax.scan``, ``fori_loop``, ``while_loop``) whose carry starts as a
    constant and is updated from a per-device key or data has a body whose output
    carry varies over the mesh axis while its input does not, which shard_map's
    varying-axes check rejects; the loops cast their initial carries with this
    first. Outside shard_map no array varies and nothing changes."""
    if not _manual_axes():
        return init
    axes: set = set()
    for ref in jax.tree.leaves(refs):
        axes |= _varying_axes(ref)
    if not axes:
        return init

    def cast(x: Any) -> Any:
        missing = tuple(sorted(axes - _varying_axes(x)))
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree.map(cast, init)


def carry_for(step: Callable[[Any], Any], init: Any) -> Any:
    """``init`` made varying like the carry ``step(init)`` of a loop's body (see
    :func:`varying_like`), for bodies that read per-device values through a
    closure (a user's ``score_fn`` or ``candidate_fn``): the body is traced once
    abstractly, only inside :func:`jax.shard_map`."""
    if not _manual_axes():
        return init
    for _ in range(len(jax.tree.leaves(init)) + 1):  # until no leaf's axes grow
        out = jax.eval_shape(step, init)
        new = jax.tree.map(lambda x, o: varying_like(x, o), init, out)
        if all(
            _varying_axes(a) == _varying_axes(b)
            for a, b in zip(jax.tree.leaves(init), jax.tree.leaves(new), strict=True)
        ):
            return new
        init = new
    return init


def _manual_axes() -> tuple:
    """The manual mesh axes of the current trace (inside :func:`jax.shard_map`)."""
    get = getattr(jax.sharding, "get_abstract_mesh", None)  # JAX versions without it:
    return tuple(getattr(get(), "manual_axes", None) or ()) if get else ()  # no check


def _varying_axes(x: Any) -> set:
    """The manual mesh axes over which ``x`` varies (``aval.vma`` in some JAX
    versions, ``aval.manual_axis_type.varying`` in others; empty outside shard_map
    and for non-arrays)."""
    try:
        aval = jax.typeof(x)
    except TypeError:
        return set()
    vma = getattr(aval, "vma", None)
    if vma is None:
        vma = getattr(getattr(aval, "manual_axis_type", None), "varying", None)
    return set(vma or ())
