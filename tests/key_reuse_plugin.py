"""pytest plugin: run every call into jaxdp under JAX's key-reuse checker.

Usage (from the repository root)::

    PYTHONPATH=tests JAX_PLATFORMS=cpu python -m pytest -p key_reuse_plugin tests

It wraps each public jaxdp function (``jaxdp.*``, ``jaxdp.audit.*``,
``jaxdp.montecarlo.*`` that take a ``key``) so that the call runs inside
``jax.debug_key_reuse(True)``. There, executing a jitted function first checks
its whole jaxpr: a key consumed twice anywhere inside jaxdp (across roles,
rows, chunks of a ``lax.map``/``scan``, or rounds) raises
:class:`jax.errors.KeyReuseError` and fails the test.

Two things are deliberately *not* reported, because they are the tests' own
doing rather than the library's: tests call a function twice with the same
key to check determinism (the wrapper passes ``jax.random.clone(key)``, so the
caller's key is not marked consumed), and tests reuse module-level keys in
their own ``jax.random`` calls (the checker is off outside jaxdp calls). Calls
made inside a test's own ``jax.jit`` are traced, not executed, under the
wrapper; ``tests/test_hardening.py`` checks those programs statically with
``jax.experimental.key_reuse``'s ``check_key_reuse``.
"""

from __future__ import annotations

import functools
import inspect

import jax


def _is_typed_key(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _clone_keys(fn):
    params = list(inspect.signature(fn).parameters)
    positional = params[:1] == ["key"]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if positional and args and _is_typed_key(args[0]):
            args = (jax.random.clone(args[0]),) + args[1:]
        if _is_typed_key(kwargs.get("key")):
            kwargs["key"] = jax.random.clone(kwargs["key"])
        with jax.debug_key_reuse(True):
            return fn(*args, **kwargs)

    return wrapper


def _wrap_module(module) -> None:
    for name in getattr(module, "__all__", []):
        fn = getattr(module, name, None)
        if not inspect.isfunction(fn):
            continue
        if "key" in inspect.signature(fn).parameters:
            setattr(module, name, _clone_keys(fn))


def pytest_configure(config):
    import jaxdp
    import jaxdp.audit

    for module in (jaxdp, jaxdp.audit, jaxdp.montecarlo):
        _wrap_module(module)
