import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: needs --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cpu_layout_rules(monkeypatch):
    """The categorical kernel's CPU layout rules on whatever backend runs the tests.

    The rules differ by platform (on a GPU the descent takes every call up to 2**18
    draws per row, and no hybrid is used); tests that reach a layout through the
    rules, or pin what the CPU's rule picks, use the CPU's, so that every layout is
    drawn from on every backend."""
    import jax

    from jaxdp import _tuning

    kind = _tuning.kind()
    if kind == "cpu":  # the rules in force already: nothing to swap, no cache to drop
        yield
        return
    for table in (_tuning.ALIAS_DRAWS_PER_COLUMN, _tuning.ALIAS_MIN_DRAWS, _tuning.HYBRID):
        monkeypatch.setitem(table, kind, table["cpu"])
    jax.clear_caches()
    yield
    jax.clear_caches()
