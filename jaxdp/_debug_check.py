"""``debug_check``: :func:`jax.experimental.checkify.debug_check`, without the effect.

Why jaxdp has its own. ``checkify.debug_check`` is dropped at lowering under plain
``jit``, but it leaves an ``ErrorEffect`` in the jaxpr of every program that
calls it, and JAX dispatches a compiled program with an effect through its
Python path: ``jit`` never installs its C++ fast path for it. On a 2-core CPU,
``jax.jit(lambda x: x * 2)`` took 3.3 µs a call and 35.5 µs with one such check,
and a jitted ``exponential`` on ten scores 113-121 µs (8-9 µs without the
effect): more than a small draw computes. The benchmark row
``c4_one_small_call_*`` (``python -m benchmarks --quick --only c4``) keeps
watch.

What this module does instead. :func:`debug_check` binds ``jaxdp_debug_check``,
a primitive with no outputs and no effects:

* **plain jit / vmap / grad**: it lowers to nothing, so the compiled program
  has no effect and keeps the fast path;
* **under ``checkify.checkify``**: a rule registered in checkify's table turns
  it into exactly the ``FailedCheckError`` that ``checkify.debug_check`` would
  have added (same message, same formatted values, reported for
  ``checkify.user_checks``), through ``jit``, ``vmap``, ``scan``, ``cond``,
  ``while_loop`` and ``grad``;
* **dead-code elimination** keeps it (as it keeps an effectful equation), so
  ``checkify(grad(f))`` still sees the checks of ``f``.

The checkify rule needs ``jax._src.checkify`` (checkify has no public way to
register a rule for a primitive). It uses as little of it as it can: the error
it adds is the one ``checkify.debug_check`` stages (traced and replayed), handed
to the rule of checkify's own check primitive with whatever leading arguments
checkify's interpreter passes (their number changed in jax 0.11). If that
module's names are missing, or the rule fails a first traced check under
``checkify`` (a JAX that changed them again), :func:`debug_check` falls back to
``checkify.debug_check``: the checks are still reported, and only the fast path
is lost. The tests pin both halves: jaxdp's jitted programs have no effects, and
every check is reported under ``checkify``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import tree_util
from jax.experimental import checkify

from ._typing import Array


def _build_primitive():
    """The primitive and its rules, or ``None`` if this JAX lacks a name we need."""
    try:
        from jax._src import checkify as checkify_internals
        from jax.extend.core import Literal, Primitive
        from jax.interpreters import ad, batching, mlir
        from jax.interpreters import partial_eval as pe

        error_checks = checkify_internals.error_checks
        stock_check_p = checkify_internals.check_p
        bdim_at_front = batching.bdim_at_front
    except (ImportError, AttributeError):  # pragma: no cover - depends on the JAX release
        return None

    check_p = Primitive("jaxdp_debug_check")
    check_p.multiple_results = True  # zero results
    check_p.def_impl(lambda *args, **params: [])
    check_p.def_abstract_eval(lambda *args, **params: [])
    mlir.register_lowering(check_p, lambda ctx, *args, **params: [])

    def jvp(primals, tangents, **params):
        del tangents  # a check has no derivative; it checks the primal values
        return check_p.bind(*primals, **params), []

    ad.primitive_jvps[check_p] = jvp

    def batch(args, dims, **params):
        # Reduce the batch at once, as checkify's own check does: the check passes
        # when every member passes, and reports the first member that fails.
        size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
        pred, *fmt = (bdim_at_front(a, d, size) for a, d in zip(args, dims, strict=True))
        first_failure = jnp.argmin(pred)
        return check_p.bind(jnp.all(pred), *(f[first_failure] for f in fmt), **params), []

    batching.primitive_batchers[check_p] = batch

    def keep(used_outputs, eqn):
        del used_outputs  # a check has no outputs but must survive to checkify
        return [True] * len(eqn.invars), eqn

    pe.dce_rules[check_p] = keep

    def checkify_rule(*args, msg, fmt_tree):
        # The leading arguments are the checkify interpreter's own (the error and
        # the enabled errors in jax 0.10; a context before them in jax 0.11); the
        # last ones are this primitive's operands, the predicate and the values.
        split = len(args) - 1 - fmt_tree.num_leaves
        lead, operands = args[:split], args[split:]

        def stock(pred, *fmt_flat):
            fmt_args, fmt_kwargs = tree_util.tree_unflatten(fmt_tree, fmt_flat)
            checkify.debug_check(pred, msg, *fmt_args, **fmt_kwargs)

        # The error is the one checkify.debug_check itself stages (no private
        # constructor of checkify's errors, whose signatures change between
        # releases): its program is replayed here, and its check equation goes,
        # with the interpreter's leading arguments untouched, to the rule of
        # checkify's own check primitive. It is traced from the operands
        # themselves, whose types carry what the context adds (shard_map's
        # varying axes), so that the replay type-checks there.
        closed = jax.make_jaxpr(stock)(*operands)
        env = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(closed.jaxpr.invars, operands, strict=True))
        for eqn in closed.jaxpr.eqns:
            values = [v.val if isinstance(v, Literal) else env[v] for v in eqn.invars]
            if eqn.primitive is stock_check_p:
                return error_checks[stock_check_p](*lead, *values, **eqn.params)
            # (subfuns, params) in older releases, the params alone in newer ones
            bind = eqn.primitive.get_bind_params(eqn.params)
            subfuns, params = bind if isinstance(bind, tuple) else ((), bind)
            out = eqn.primitive.bind(*subfuns, *values, **params)
            outs = out if eqn.primitive.multiple_results else [out]
            env.update(zip(eqn.outvars, outs, strict=True))
        raise AssertionError(f"checkify.debug_check staged no check: {closed}")

    error_checks[check_p] = checkify_rule
    return check_p


def _works(check_p) -> bool:
    """Whether ``check_p`` is reported under ``checkify`` in this JAX, plain and
    under ``jit`` (traced only, nothing compiled): the rule relies on checkify's
    internals, so a release that changed them falls back instead of failing."""

    def f(x):
        tree = tree_util.tree_structure(((x,), {}))
        check_p.bind(x > 0, x, msg="got {}", fmt_tree=tree)
        return x

    try:
        for g in (f, jax.jit(f)):
            jax.make_jaxpr(checkify.checkify(g, errors=checkify.user_checks))(1.0)
    except Exception:  # pragma: no cover - depends on the JAX release
        return False
    return True


_PRIMITIVE = _build_primitive()


@functools.cache
def _check_primitive():
    """jaxdp's primitive where this JAX reports it under ``checkify``, else None
    (decided once, at the first check: a few milliseconds of tracing)."""
    return _PRIMITIVE if _PRIMITIVE is not None and _works(_PRIMITIVE) else None


def debug_check(pred: Array | bool, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """Like :func:`jax.experimental.checkify.debug_check`, but free under plain ``jit``.

    Args:
      pred: a scalar bool; the check fails where it is False.
      msg: the error message, formatted with ``fmt_args`` and ``fmt_kwargs``
        (``"{}"`` placeholders) when the check fails.
      *fmt_args: arrays whose values the message shows.
      **fmt_kwargs: named arrays whose values the message shows.
    """
    check_p = _check_primitive()
    if check_p is None:  # pragma: no cover - depends on the JAX release
        checkify.debug_check(pred, msg, *fmt_args, **fmt_kwargs)
        return
    pred = jnp.asarray(pred)
    if pred.shape != () or pred.dtype != jnp.bool_:
        raise TypeError(f"debug_check takes a scalar bool predicate, got {pred}")
    flat, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    check_p.bind(pred, *map(jnp.asarray, flat), msg=msg, fmt_tree=tree)
