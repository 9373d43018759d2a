"""The speed goals a GPU bench run is held to (README, "Speed goals"), as data: which metric of
which config at which M and K x N, and its target. reports.goals checks a run against them
(speed.html); the bench plans the torch.compile cells behind the torchao goals first
(bench.baselines.goal_compile)."""

from __future__ import annotations

import dataclasses

LARGE_KN = ("K8192-N8192", "K4096-N14336", "K14336-N4096")
"""The goals' K x N: the issue's 8192^2 and 4096 x 14336, and the bench's 14336 x 4096."""


@dataclasses.dataclass(frozen=True)
class Goal:
    """``metric`` of ``config`` (an aoq config id, or a kernel such as act_quant.int8_row) at
    M ``m`` over ``shapes`` (K x N ids, or whole shape ids where ``m`` is None), at least
    ``target`` (at most, for ``at_most``)."""

    name: str
    config: str
    m: int | None
    metric: str
    target: float
    shapes: tuple[str, ...] = LARGE_KN
    at_most: bool = False

    def meets(self, value: float) -> bool:
        return value <= self.target if self.at_most else value >= self.target


def _decode(name: str, config: str, m1: float, peer: bool) -> list[Goal]:
    """M1 at ``m1`` x bf16 (and 1.3x torchao where ``peer``), M16 within 15 % of it."""
    out = [
        Goal(f"{name} decode M1 vs bf16", config, 1, "speedup_vs_bf16", m1),
        Goal(f"{name} decode M16 vs bf16", config, 16, "speedup_vs_bf16", round(m1 * 0.85, 3)),
    ]
    if peer:
        out.insert(1, Goal(f"{name} decode M1 vs torchao", config, 1, "speedup_vs_peer", 1.3))
    return out


GOALS: tuple[Goal, ...] = (
    *_decode("int4 weight-only", "int4wo-g128", 3.0, True),
    *_decode("int8 weight-only", "int8wo", 1.8, True),
    *_decode("fp8 weight-only", "fp8wo", 1.8, True),
    *_decode("W4A8", "w4a8-g32", 2.5, False),
    *(
        Goal(f"{name} prefill M4096 vs bf16", config, 4096, "speedup_vs_bf16", 0.9)
        for name, config in (
            ("int4 weight-only", "int4wo-g128"),
            ("int8 weight-only", "int8wo"),
            ("fp8 weight-only", "fp8wo"),
        )
    ),
    Goal("fp8 W8A8 row prefill M4096 vs bf16", "fp8-row", 4096, "speedup_vs_bf16", 1.5),
    Goal("int8 W8A8 prefill M4096 vs bf16", "w8a8", 4096, "speedup_vs_bf16", 1.2),
    *(
        Goal(
            f"activation quantization {kind}, share of copy bandwidth",
            f"act_quant.{kind}",
            None,
            "roofline",
            0.8,
            ("M8192-K8192",),
        )  # fmt: skip
        for kind in ("int8_row", "fp8_row")
    ),
)
HOST_GOAL = Goal("eager host time over bf16 F.linear, µs", "", 1, "over_bf16_us", 10.0, (), True)


def peer_cells() -> frozenset[tuple[str, str]]:
    """(config, shape id) of every cell a goal compares with torchao."""
    return frozenset(
        (g.config, f"M{g.m}-{kn}")
        for g in GOALS
        if g.metric == "speedup_vs_peer"
        for kn in g.shapes
    )
