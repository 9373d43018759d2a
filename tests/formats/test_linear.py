import torch

from aoq.formats import affine
from aoq.formats import linear as ref


def _int_acc(xq, wq, groups):
    m, k = xq.shape
    g = k // groups
    x = xq.to(torch.int64).reshape(m, groups, g)
    w = wq.to(torch.int64).reshape(-1, groups, g)
    return torch.einsum("mgk,ngk->mng", x, w)  # exact int64


def test_int_act_linear_matches_exact_integer_math():
    x = torch.randn(5, 96)
    w = torch.randn(24, 96)
    xq, xs = affine.quantize_per_token_int8(x)
    wq, ws = affine.quantize_int4_symmetric(w, 32)
    y = ref.int_act_linear(xq, xs, None, wq, ws, torch.float64)
    acc = _int_acc(xq, wq, 3).to(torch.float64)
    expect = (acc * ws.to(torch.float64).unsqueeze(0)).sum(-1) * xs.to(torch.float64)[:, None]
    torch.testing.assert_close(y, expect, rtol=1e-12, atol=0)


def test_static_bias_joins_the_largest_scale_group():
    xq = torch.randint(-127, 128, (3, 64), dtype=torch.int8)
    wq = torch.randint(-8, 8, (4, 64), dtype=torch.int8)
    ws = torch.tensor([[1.0, 2.0], [3.0, 0.5], [1.0, 1.0], [0.25, 4.0]])
    bq = torch.tensor([5, -7, 11, 0], dtype=torch.int32)
    xs = torch.tensor(0.5)
    y = ref.int_act_linear(xq, xs, None, wq, ws, torch.float64, bias_int=bq)
    acc = _int_acc(xq, wq, 2).to(torch.float64)
    gstar = torch.tensor([1, 0, 0, 1])
    acc[:, torch.arange(4), gstar] += bq.to(torch.float64)
    expect = (acc * ws.to(torch.float64)).sum(-1) * 0.5
    torch.testing.assert_close(y, expect, rtol=0, atol=0)


def test_weight_only_linear_computes_in_float32_and_casts():
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    w = torch.randn(3, 8)
    y = ref.weight_only_linear(x, w, torch.ones(3))
    assert y.dtype == torch.bfloat16
    expect = (x.float() @ w.t() + 1).to(torch.bfloat16)
    assert torch.equal(y, expect)
