"""jaxdp's benchmark suite: ``python -m benchmarks``.

Throughput (draws/s and candidates scored/s) of the finite-range samplers,
against every peer in the same run, with compile time, peak memory and the
distance to the hardware's limits. Subcommands::

    python -m benchmarks [--quick] [--backend cpu|gpu|all] [--out DIR]
    python -m benchmarks crossover [--quick]      # gumbel vs inverse_cdf: the `auto` rule
    python -m benchmarks tuning [--quick]         # the measurements behind jaxdp._tuning
    python -m benchmarks pricing [...]            # benchmarks/pricing.py (continuous ranges)
    python -m benchmarks study <name> [...]       # benchmarks/studies.py (accuracy studies)

Workloads (names like ``exponential_inverse_cdf_n1e3_s1e6_f32``: ``n`` candidates,
``s`` i.i.d. draws per row, ``b`` rows, dtype):

* **W1**: one score vector, many draws.
* **W2**: one draw for each of B distinct rows (Monte Carlo over datasets).
* **W3**: report-noisy-max with Laplace noise on the W1 and W2 shapes.
* **W4**: continuous pricing, exact (``private_price``), against a discretised grid.
* **C1-C6**: call shapes of issue 11, each timed against its fast twin (``_shapes.py``).
"""
