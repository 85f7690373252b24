"""``jaxdp.checked``: run a function under ``checkify`` and raise on a failed check.

Inside ``jax.jit`` or ``jax.vmap`` an argument is a tracer, so jaxdp cannot
raise at call time when a traced ε is negative, a traced value is NaN or a
traced category is out of range. The jitted layer then records the problem
as a ``checkify`` user check (jaxdp's own ``debug_check``: reported exactly as
:func:`jax.experimental.checkify.debug_check` is, and free under plain ``jit``)
and returns a sentinel: index ``-1`` for a selection, NaN for additive noise
and continuous ranges. :func:`checked` turns those reports into exceptions,
so a caller of ``jit`` need not know the sentinels.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
from jax.experimental import checkify

__all__ = ["checked"]

_F = TypeVar("_F", bound=Callable[..., Any])


def checked(fn: _F, *, errors: frozenset | None = None) -> _F:
    """Wraps ``fn`` so that a failed jaxdp check on a traced value raises.

    ``checked(fn)(*args, **kwargs)`` runs :func:`jax.experimental.checkify.checkify`
    of ``fn`` with ``errors`` (by default :data:`checkify.user_checks
    <jax.experimental.checkify.user_checks>`: jaxdp's own checks and any
    :func:`checkify.check <jax.experimental.checkify.check>` of the caller),
    calls ``.throw()`` on the error it returns and, when nothing failed,
    returns ``fn``'s output unchanged: the same values, from the same keys, as
    ``fn`` unwrapped.

    Where to put it. ``checked`` must be the outermost transformation,
    because the error it raises is only known once the computation has run:

    * ``jaxdp.checked(jax.jit(f))`` (checkify of jit, JAX's supported
      composition) and ``jaxdp.checked(jax.vmap(f))``, or a plain
      ``jaxdp.checked(f)`` around code that calls ``jit`` itself: supported.
      ``jax.jit(checkify.checkify(f))`` is what to write by hand when the
      error should be returned rather than raised.
    * ``jax.jit(jaxdp.checked(f))`` or ``jax.vmap(jaxdp.checked(f))``: the
      error would be a tracer, which cannot raise; this raises ``TypeError``
      saying so.

    Concrete arguments are checked by jaxdp at call time as always, so under
    ``checked`` they still raise jaxdp's own ``ValueError`` directly.

    **Privacy.** ``checked`` adds no randomness and changes no output; it only
    turns into an exception a check that jaxdp already makes. These are the
    checks a concrete call makes at call time (ε, Δ, δ, bounds, NaN or +inf
    values, out-of-range categories, a row with nothing selectable), so a
    traced call raises where the same call on concrete values would have
    raised ``ValueError``; valid data inside the declared domain never fails
    one. A ``checkify.check`` of the caller's own on the data is the caller's
    release to account for.

    Args:
      fn: the function to run, e.g. ``jax.jit(f)``; any signature.
      errors: keyword-only, the checkify error set to report; ``None`` (the
        default) means ``checkify.user_checks``. Adding, say,
        ``checkify.nan_checks`` also reports every NaN produced inside
        ``fn``, including the internal NaNs that jaxdp's kernels mask on
        purpose, so it can raise on valid input.

    Returns:
      A function with ``fn``'s signature (and ``functools.wraps`` metadata)
      that returns ``fn``'s output or raises.

    Raises:
      TypeError: ``fn`` is not callable; or (when the returned function is
        called) it runs under a JAX transformation, such as
        ``jax.jit(jaxdp.checked(f))``.
      jax.experimental.checkify.JaxRuntimeError: (when the returned function
        is called) a check failed; its message is jaxdp's, e.g.
        ``"exponential: epsilon must be finite and > 0, got -1.0"``.
        ``JaxRuntimeError`` is a subclass of ``ValueError``, so ``except
        ValueError`` catches a traced failure and a concrete one alike.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> key = jax.random.key(0)
      >>> draw = jax.jit(lambda e: jaxdp.exponential(key, jnp.arange(3.0),
      ...                                            epsilon=e, sensitivity=1.0))
      >>> int(draw(-1.0))  # unchecked: the sentinel
      -1
      >>> try:
      ...     jaxdp.checked(draw)(-1.0)
      ... except ValueError as err:
      ...     print(str(err).split(" (")[0])
      exponential: epsilon must be finite and > 0, got -1.0

    References:
      JAX documentation, `The checkify transformation
      <https://docs.jax.dev/en/latest/debugging/checkify_guide.html>`_.
    """
    if not callable(fn):
        raise TypeError(f"checked: fn must be callable, got {fn!r}")
    error_set = checkify.user_checks if errors is None else errors
    checkified = checkify.checkify(fn, errors=error_set)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        err, out = checkified(*args, **kwargs)
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(err)):
            raise TypeError(
                "checked: the wrapped function ran under a JAX transformation "
                "(jax.jit, jax.vmap, ...), where a failed check cannot raise; put "
                "jaxdp.checked outside it, e.g. jaxdp.checked(jax.jit(f)), or use "
                "jax.jit(checkify.checkify(f, errors=checkify.user_checks)) and "
                "inspect the returned error"
            )
        err.throw()
        return out

    return wrapper  # type: ignore[return-value]
