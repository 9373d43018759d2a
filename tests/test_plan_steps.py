"""aoq/plan_steps.py: a plan that ends in an aten product (fp8 W8A8's torch._scaled_mm, the
BLAS paths' mm / addmm) replays it on new inputs and workspace buffers with the recorded
weight tensors; anything else about such a call still refuses the recording."""

import pytest
import torch
from test_plans import _Bound, _record, _weight, fake_driver  # noqa: F401 (a fixture)

from aoq import plans

pytestmark = pytest.mark.usefixtures("fake_driver")


def _launch_then_mm(x, w, bound):
    """t = 2 x + w (a launch into a fresh buffer), then y = t @ w.T (the aten product)."""

    def body(launches):
        t = torch.empty(x.shape)
        launches.append((bound, (1, 1, 1), (x, w, t, x.numel())))
        return torch.mm(t, w.t())

    return body


def test_a_launch_then_a_product_replays_both():
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    y, launches, watch = _record(x, _weight(w), None, _launch_then_mm(x, w, bound))
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan) and plan.blas is not None and plan.workspace == 256
    x2 = torch.randn(1, 8)
    assert torch.equal(plan(x2), torch.mm(2 * x2 + w, w.t()))
    plans.release_workspaces()  # a new shared workspace: views of it are made per replay
    assert torch.equal(plan(x2), torch.mm(2 * x2 + w, w.t()))
    assert bound.calls[-1][3] == [int, int, int]  # the launch still takes addresses


def test_a_product_of_the_input_views_each_replays_input():
    x, w = torch.randn(2, 8), torch.randn(3, 8)
    bias = torch.randn(3)
    weight = _weight(w)

    def body(launches):
        return torch.addmm(bias, x[:, 2:6], w[:, :4].t())

    y, launches, watch = _record(x, weight, bias, body)
    plan = plans._build(x, weight, bias, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan) and plan.workspace == 0
    big = torch.randn(5, 8)
    x2 = big[3:5]  # an input with a storage offset
    assert torch.equal(plan(x2), torch.addmm(bias, x2[:, 2:6], w[:, :4].t()))
    w.data = torch.randn(3, 8)  # the weight's storage moved: the key is recorded again
    assert plan.moved()


@pytest.mark.parametrize(
    "why, body",
    [
        (
            "is not the call's last step",
            lambda x, w, b: lambda launches: _then_launch(launches, torch.mm(x, w.t()), w, b),
        ),
        (
            "does not make the call's result",
            lambda x, w, b: lambda launches: torch.mm(x, w.t()).t(),
        ),
        ("not the input, a fresh buffer", lambda x, w, b: lambda launches: torch.mm(x, b.t())),
    ],
)
def test_other_products_are_refused(why, body):
    x, w, foreign = torch.randn(1, 8), torch.randn(1, 8), torch.randn(1, 8)
    y, launches, watch = _record(x, _weight(w), None, body(x, w, foreign))
    reason = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(reason, str) and why in reason, reason


def test_a_product_after_buffers_past_the_cap_is_refused(monkeypatch):
    monkeypatch.setattr(plans.plan_steps, "MAX_WORKSPACE", 128)
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    y, launches, watch = _record(x, _weight(w), None, _launch_then_mm(x, w, bound))
    reason = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(reason, str) and "MAX_WORKSPACE" in reason


def _then_launch(launches, t, w, _):
    y = torch.empty(1, 8)
    launches.append((_Bound(), (1, 1, 1), (t, w, y, 1)))
    return y


def test_explain_names_the_product():
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    weight = _weight(w)
    y, launches, watch = _record(x, weight, None, _launch_then_mm(x, w, bound))
    weight.__dict__["_plans"] = {"k": plans._build(x, weight, None, y, watch, launches, (), 3)}
    assert plans.explain(weight) == {"k": "plan (1 launches, then aten.mm.default)"}
