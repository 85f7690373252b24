"""The public API matches DESIGN.md and every public name is documented."""

import doctest
import importlib
import inspect
import types

import pytest

import jaxdp

DESIGN_NAMES = {
    "exponential",
    "exponential_log_probs",
    "report_noisy_max",
    "permute_and_flip",
    "top_k",
    "exponential_streaming",
    "exponential_piecewise",
    "private_price",
    "private_quantile",
    "laplace",
    "gaussian",
    "randomized_response",
    "private_mode",
    "select_hypothesis",
}
MODULES = ["accounting", "utility", "montecarlo"]


def test_design_names_exported():
    assert DESIGN_NAMES <= set(jaxdp.__all__)
    for name in jaxdp.__all__:
        assert hasattr(jaxdp, name), name
    for module in MODULES:
        assert isinstance(getattr(jaxdp, module), types.ModuleType)


def _public_callables():
    for name in sorted(jaxdp.__all__):
        obj = getattr(jaxdp, name)
        if isinstance(obj, types.ModuleType):
            for sub in getattr(obj, "__all__", []):
                yield f"{name}.{sub}", getattr(obj, sub)
        else:
            yield name, obj


@pytest.mark.parametrize(
    "name,obj", list(_public_callables()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_documented(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{name} has no docstring"
    if inspect.isfunction(obj) and name in DESIGN_NAMES:
        for section in ("Args:", "Returns:", "References:", "Privacy", "Raises:"):
            assert section in doc, f"{name} docstring lacks {section}"
    elif inspect.isfunction(obj) and inspect.signature(obj).parameters:
        for section in ("Args:", "Returns:"):
            assert section in doc, f"{name} docstring lacks {section}"


@pytest.mark.parametrize("name", sorted(DESIGN_NAMES))
def test_privacy_parameters_are_keyword_only_without_defaults(name):
    params = inspect.signature(getattr(jaxdp, name)).parameters
    for p in ("epsilon", "sensitivity", "delta"):
        if p in params:
            assert params[p].kind is inspect.Parameter.KEYWORD_ONLY, (name, p)
            assert params[p].default is inspect.Parameter.empty, (name, p)


@pytest.mark.parametrize(
    "module",
    [
        "_exponential",
        "_noisy_max",
        "_top_k",
        "_additive",
        "_categorical",
        "_checked",
        "_learning",
        "_streaming",
        "_continuous",
        "accounting",
        "utility",
        "montecarlo",
    ],
)
def test_docstring_examples_run(module):
    mod = importlib.import_module(f"jaxdp.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
