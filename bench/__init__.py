"""aoq's speed suite: ``python -m bench`` / ``make bench`` (pytest + pytest-benchmark).

Modules: ``cases`` (what is timed), ``timing`` (device events and CUDA graphs on GPUs, the
pytest-benchmark fixture on CPUs, rotating buffers), ``baselines`` (ceilings, roofline floor,
torchao), ``rows`` (the records, schema ``aoq.testing.benchrows``), ``session`` (the run, its
budget), ``summary`` (progress and the closing table), ``conftest`` (the pytest plugin) and the
tests ``test_linear``, ``test_kernels``, ``test_training``. See the README's bench section.
"""
