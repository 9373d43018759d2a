"""Stand-ins for what the bench tests cannot have on this machine."""

import time


class FakeBenchmark:
    """pytest-benchmark's pedantic(): rounds x iterations calls, raw seconds per round."""

    def __init__(self):
        self.kwargs = None

    def pedantic(self, fn, rounds, iterations, warmup_rounds):
        self.kwargs = {"rounds": rounds, "iterations": iterations, "warmup": warmup_rounds}
        data = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(iterations):
                fn()
            data.append(time.perf_counter() - t0)
        stats = type(
            "S",
            (),
            {
                "data": data,
                "min": min(data),
                "max": max(data),
                "mean": 0.0,
                "stddev": 0.0,
                "median": 0.0,
                "iqr": 0.0,
            },
        )
        self.stats = type("M", (), {"stats": stats})
