"""The bound-launch cache (kernels/_launch.py): its key can only be finer than Triton's
specialization, hooked kernels always go through Triton, and on a GPU a cached launch
computes what ``kernel[grid]`` computes (new alignments bind again, float arguments stay
run-time values, autotuned configs and callable grids are kept per key)."""

import pytest
import torch
import triton
import triton.language as tl
from aoq.kernels import _launch
from aoq.kernels._launch import _hooked, _key, launch


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, SHIFT: tl.constexpr = 0.0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * alpha + SHIFT).to(y_ptr.dtype.element_ty), mask=mask)


_axpy_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"]
)(_axpy_kernel)


def test_key_separates_dtype_alignment_and_ints_but_not_float_values():
    buf = torch.zeros(64, dtype=torch.bfloat16)
    aligned, shifted = buf[:8], buf[1:9]  # 2 bytes apart: one of them is not 16-byte aligned
    base = _key(0, (aligned, 8, 0.5), {"BLOCK": 64})
    assert _key(0, (aligned, 8, 2.0), {"BLOCK": 64}) == base
    assert _key(0, (shifted, 8, 0.5), {"BLOCK": 64}) != base
    assert _key(0, (aligned.float(), 8, 0.5), {"BLOCK": 64}) != base
    assert _key(0, (aligned, 9, 0.5), {"BLOCK": 64}) != base
    assert _key(0, (aligned, 8, 0.5), {"BLOCK": 128}) != base
    assert _key(1, (aligned, 8, 0.5), {"BLOCK": 64}) != base
    assert _key(0, (None, 8, 0.5), {"BLOCK": 64}) != base


def test_hooked_kernels_are_never_cached():
    assert not _hooked(_axpy_kernel)
    assert not _hooked(_axpy_tuned)
    zeroing = triton.autotune(
        configs=[triton.Config({"BLOCK": 64})], key=["n"], reset_to_zero=["y_ptr"]
    )(_axpy_kernel)
    assert _hooked(zeroing)
    assert _hooked(lambda *a: None)


def test_only_a_set_launch_hook_counts_as_installed(monkeypatch):
    from triton.knobs import HookChain

    chain = HookChain()
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", chain)
    monkeypatch.setattr(triton.knobs.runtime, "launch_exit_hook", None)
    assert not _launch._hooks_installed()  # triton 3.6 always has an (empty) chain
    chain.add(print)
    assert _launch._hooks_installed()
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", print)
    assert _launch._hooks_installed()


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _expect(x, alpha, shift=0.0):
    return (x.float() * alpha + shift).to(x.dtype)


class _Calls:
    def __init__(self):
        self.seen = []

    def __call__(self, *argv):
        self.seen.append(argv)


@pytest.mark.parametrize("direct", [True, False], ids=["c-launch", "launcher-call"])
def test_a_frame_is_the_call_the_bound_launch_makes(direct):
    """A plan replays ``frame``'s argument list with the stream and arguments filled in: the
    very positional arguments ``__call__`` passes to the C launch or the launcher."""
    bound = _launch._Bound.__new__(_launch._Bound)
    calls = _Calls()
    bound.function, bound.metadata, bound.tail, bound.grid = 11, (4, 1, 0), ("T1", "T2"), None
    bound.direct, bound.flags, bound.run = (calls, (0, 1), None) if direct else (None, (), calls)
    bound((3, 2, 1), 99, (7, 8, 9))
    fn, argv, at = bound.frame((3, 2, 1), (None, 8, None))
    assert fn is calls and argv[3] is None
    argv[3], argv[at], argv[at + 2] = 99, 7, 9
    fn(*argv)
    assert calls.seen[0] == calls.seen[1]
    assert calls.seen[0][at : at + 3] == (7, 8, 9) and calls.seen[0][-2:] == ("T1", "T2")
    # Triton 3.6's orders: the C launch function's, and CudaLauncher.__call__'s / HIP's run
    flags = (
        (0, 1, None, None, (4, 1, 0), None, None, None) if direct else ((4, 1, 0), None, None, None)
    )
    assert calls.seen[0] == (3, 2, 1, 99, 11, *flags, 7, 8, 9, "T1", "T2")


@gpu
def test_cached_launch_matches_triton_and_rebinds_on_alignment(monkeypatch):
    monkeypatch.setattr(_launch, "ENABLED", True)
    kernel = triton.jit(_axpy_kernel.fn)  # a private JITFunction: a clean cache entry
    buf = torch.randn(1001, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(buf)
    for alpha in (0.5, 3.0):  # the first launch binds, the second is a cache hit
        y.zero_()
        launch(kernel, (triton.cdiv(1000, 128),), buf, y, 1000, alpha, BLOCK=128, SHIFT=1.0)
        assert torch.equal(y[:1000], _expect(buf[:1000], alpha, 1.0))
    assert len(_launch._CACHE[kernel]) == 1
    xs, ys = buf[1:], y[1:]  # 2 bytes off: Triton would compile another specialization
    launch(kernel, (triton.cdiv(1000, 128),), xs, ys, 1000, 2.0, BLOCK=128)
    assert torch.equal(ys, _expect(xs, 2.0))
    assert len(_launch._CACHE[kernel]) == 2


@gpu
def test_autotuned_launch_keeps_its_config_and_grid(monkeypatch):
    monkeypatch.setattr(_launch, "ENABLED", True)
    tuned = triton.autotune(
        configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"]
    )(triton.jit(_axpy_kernel.fn))
    x = torch.randn(5000, device="cuda")
    for alpha in (1.5, -2.0, 0.25):
        y = torch.zeros_like(x)
        launch(tuned, lambda meta: (triton.cdiv(5000, meta["BLOCK"]),), x, y, 5000, alpha)
        assert torch.equal(y, _expect(x, alpha))
    (bound,) = _launch._CACHE[tuned].values()
    assert bound.grid == (triton.cdiv(5000, tuned.best_config.kwargs["BLOCK"]), 1, 1)


@gpu
def test_launch_hook_sends_every_launch_through_triton(monkeypatch):
    monkeypatch.setattr(_launch, "ENABLED", True)
    kernel = triton.jit(_axpy_kernel.fn)
    seen = []
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", lambda meta: seen.append(1))
    x = torch.randn(100, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        launch(kernel, (1,), x, y, 100, 1.0, BLOCK=128)
    assert len(seen) == 3 and kernel not in _launch._CACHE
    assert torch.equal(y, x)


def test_a_kernel_with_scratch_finds_an_allocator_in_any_thread():
    """Triton's allocator is a context variable: a thread that never set one has none. A
    bound launch of a kernel with global scratch (wt_rows' device-made descriptors) sets
    torch's first, and keeps one the thread set itself."""
    import threading

    from triton.runtime import _allocation

    seen = []

    def run(*args):
        seen.append(_allocation._allocator.get())

    wrapped = _launch._with_allocator(run)
    thread = threading.Thread(target=wrapped, args=(1, 2))
    thread.start()
    thread.join()

    def own(size, alignment, stream):
        return torch.empty(size, dtype=torch.int8)

    def with_own():
        triton.set_allocator(own)
        wrapped(3)

    thread = threading.Thread(target=with_own)
    thread.start()
    thread.join()
    assert seen == [_launch._torch_scratch, own]
