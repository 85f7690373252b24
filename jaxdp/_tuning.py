"""Every tuning constant of the kernels, and the rules that use them, in one place.

Each number was measured with ``python -m benchmarks`` (the ``crossover`` and
``kernels`` rows) on the machine named in the committed results; the rules are
static (shapes only), so a call compiles one kernel.
"""

from __future__ import annotations

from . import _alias

#: The alias table is built when a row gets at least ``columns / ALIAS_DRAWS_PER_COLUMN``
#: draws: building costs about 0.4 us per column on 2-core CPU (sort-free, two
#: scans and two binary searches), a draw about 10 ns against 1-2 us down the
#: descent, so the table pays once draws reach about a quarter of its columns.
ALIAS_DRAWS_PER_COLUMN = 4

#: Fewest draws per row for which the alias table is considered at all.
ALIAS_MIN_DRAWS = 8


def use_alias(n: int, num_draws: int) -> bool:
    """Alias table (rather than the descent) for ``num_draws`` draws per row of ``n``."""
    b = _alias.log2_columns(n)
    if b > _alias.MAX_LOG2_COLUMNS:
        return False
    return num_draws >= max(ALIAS_MIN_DRAWS, 2**b // ALIAS_DRAWS_PER_COLUMN)
