"""Launch a Triton kernel with Triton's per-call binding done once.

``kernel[grid](*args, **consts)`` costs ~9 µs of host time for an empty kernel on an H200
host and ~20 µs for a decode kernel with 16 arguments and 12 constexprs (bench/host_profile.py):
Triton binds every argument, specializes it, builds a cache key from strings, checks the
globals the kernel read, and only then calls the C launcher. A decode linear that launches
two kernels spends more on that than on the GPU.

:func:`launch` keeps, per kernel, a dict from a cheap key to the compiled kernel and the
constexpr tail of its argument list, and calls the C launcher directly on a hit. The key
holds everything Triton specializes on, or more: each tensor's dtype and 16-byte alignment,
every other argument's exact value (floats: their type; Triton does not specialize them),
the constexprs, the launch options and the current device. A key can only be finer than
Triton's, so a hit runs the very kernel ``kernel[grid]`` would have run. The first launch
of each key goes through Triton (compiling, or autotuning an ``Autotuner``), and so does
every launch when:

- the kernels run under the interpreter (``TRITON_INTERPRET=1``);
- a launch hook is installed (profilers such as proton watch launches through it);
- the kernel has pre-run hooks, or an autotuner with hooks (they must run every time);
- ``AOQ_FAST_LAUNCH=0`` is set (read at import; for bisecting a suspected launch bug).

Inside :func:`recording`, each launch is also appended to a list (aoq/plans.py replays it).

Contract for callers: positional arguments are the kernel's leading parameters and every
later parameter is a keyword (a constexpr, or a default); a callable grid may read only
those arguments and the autotuned config, because it is resolved once per key.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import triton
from aoq.kernels._common import INTERPRET
from triton import knobs
from triton.runtime import _allocation, driver
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

ENABLED = os.environ.get("AOQ_FAST_LAUNCH", "1") != "0" and not INTERPRET
MAX_KEYS = 512
"""Bound launches kept per kernel: integer arguments are keyed by value (M among them), so a
server that sees many prompt lengths would grow the dict without bound; a full dict is
cleared, and each key after that binds again through Triton once."""

Grid = Sequence[int] | Callable[[dict[str, Any]], Sequence[int]]


class _Bound:
    """One compiled kernel of one key: its launcher, handles, constexpr tail and grid.

    On CUDA the C launch function is called directly when the kernel needs no scratch memory:
    Triton's ``CudaLauncher.__call__`` only adds (per call) a closure and two scratch
    allocations of size zero around it (~1 µs of host time). A kernel with global scratch
    (device-made tensor descriptors: wt_rows.py) keeps ``__call__``, which allocates it per
    launch from Triton's allocator, made sure of first (:func:`scratch_allocator`)."""

    __slots__ = ("run", "direct", "flags", "function", "metadata", "tail", "grid")

    def __init__(self, compiled: Any, tail: tuple[Any, ...], grid: tuple[int, int, int] | None):
        compiled._init_handles()
        self.run = compiled.run
        if getattr(compiled.run, "global_scratch_size", 0):
            self.run = _with_allocator(compiled.run)
        self.direct, self.flags = _direct_launch(compiled.run)
        self.function = compiled.function
        self.metadata = compiled.packed_metadata
        self.tail = tail
        self.grid = grid

    def frame(
        self, grid: tuple[int, int, int], args: Sequence[Any]
    ) -> tuple[Callable[..., None], list[Any], int]:
        """This launch as one call: (function, its whole positional argument list, where
        ``args`` begin in it), the stream (index 3) left None for the caller to fill. The one
        place that knows the launchers' argument order: :meth:`__call__` fills it per launch,
        aoq/plans.py once per plan (then only the stream and addresses per replay)."""
        if self.direct is not None:  # the C launch function
            head = (*grid, None, self.function, *self.flags, None, None, self.metadata,
                    None, None, None)  # fmt: skip
            return self.direct, [*head, *args, *self.tail], len(head)
        head = (*grid, None, self.function, self.metadata, None, None, None)
        return self.run, [*head, *args, *self.tail], len(head)

    def __call__(self, grid: tuple[int, int, int], stream: int, args: Sequence[Any]) -> None:
        """The direct launch: Triton's C launcher, no hooks (the callers checked there are none)."""
        fn, argv, _ = self.frame(grid, args)
        argv[3] = stream
        fn(*argv)


def _torch_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Global scratch from torch's caching allocator (a graph capture's pool while capturing;
    torch's blocks are 512-byte aligned, more than Triton asks)."""
    return torch.empty(size, dtype=torch.int8, device="cpu" if INTERPRET else "cuda")


def scratch_allocator() -> None:
    """Point Triton's allocator at :func:`_torch_scratch` where none is set. It is a context
    variable, so a thread that never set one (a server's worker replaying an eager plan)
    has none: every launch of a kernel with global scratch asks first."""
    if _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
        triton.set_allocator(_torch_scratch)


def _with_allocator(run: Callable[..., None]) -> Callable[..., None]:
    def launch_with_scratch(*args: Any) -> None:
        scratch_allocator()
        run(*args)

    return launch_with_scratch


def _direct_launch(run: Any) -> tuple[Callable[..., None] | None, tuple[Any, ...]]:
    """(C launch function, (cooperative grid, PDL)) of a Triton 3.6 ``CudaLauncher`` whose kernel
    uses no global or profile scratch; (None, ()) for any other launcher (HIP's takes its
    arguments in another order), so those keep ``run``."""
    if type(run).__name__ != "CudaLauncher":
        return None, ()
    try:
        if run.global_scratch_size or run.profile_scratch_size:
            return None, ()
        return run.launch, (run.launch_cooperative_grid, run.launch_pdl)
    except AttributeError:  # another Triton's launcher: keep its __call__
        return None, ()


_CACHE: dict[Any, dict[tuple[Any, ...], _Bound]] = {}
Recorded = tuple[_Bound, tuple[int, int, int], tuple[Any, ...]] | None
_RECORDING: contextvars.ContextVar[list[Recorded] | None] = contextvars.ContextVar(
    "aoq_launch_recording", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[list[Recorded]]:
    """Collect the launches made inside: (bound kernel, grid, arguments) each, or None for a
    launch that went through Triton itself (aoq/plans.py replays the list)."""
    launches: list[Recorded] = []
    token = _RECORDING.set(launches)
    try:
        yield launches
    finally:
        _RECORDING.reset(token)


def _key(device: int, args: tuple[Any, ...], consts: dict[str, Any]) -> tuple[Any, ...]:
    key: list[Any] = [device]
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append(a.dtype)
            key.append(a.data_ptr() & 15 == 0)
        elif isinstance(a, float):
            key.append(float)
        else:
            key.append(a)
    key.extend(consts.items())
    return tuple(key)


def _hooked(kernel: Any) -> bool:
    if isinstance(kernel, Autotuner):
        hooks = kernel.user_defined_pre_hook or kernel.user_defined_post_hook
        hooks = hooks or bool(kernel.reset_to_zero or kernel.restore_value)
        hooks = hooks or any(c.pre_hook is not None for c in kernel.configs)
        return hooks or _hooked(kernel.fn)
    return not isinstance(kernel, JITFunction) or bool(kernel.pre_run_hooks)


def _grid3(grid: Sequence[int]) -> tuple[int, int, int]:
    g = tuple(grid) + (1, 1)
    return g[0], g[1], g[2]


def _bind(kernel: Any, grid: Grid, args: tuple[Any, ...], consts: dict[str, Any]) -> _Bound:
    """Launch through Triton (compile or autotune) and keep what a direct launch needs."""
    compiled = kernel[grid](*args, **consts)
    if hasattr(compiled, "result"):
        compiled = compiled.result()
    params = dict(consts)
    jit = kernel
    if isinstance(kernel, Autotuner):
        params.update(kernel.best_config.all_kwargs())
        jit = kernel.fn
    names = jit.arg_names
    defaults = {p.name: p.default for p in jit.params if p.has_default}
    tail = tuple(params[n] if n in params else defaults[n] for n in names[len(args) :])
    resolved = None
    if callable(grid):
        resolved = _grid3(grid({**dict(zip(names, args, strict=False)), **params}))
    return _Bound(compiled, tail, resolved)


def _hooks_installed() -> bool:
    """A launch hook is set: a callable, or one of triton 3.6's HookChains with calls in it
    (an empty chain is always there: Triton itself calls it on every launch)."""
    runtime = knobs.runtime  # read per launch and plan replay: no tuple, no loop
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    return bool(
        (enter is not None and getattr(enter, "calls", True))
        or (leave is not None and getattr(leave, "calls", True))
    )


def _bound_launches(kernel: Any) -> dict[tuple[Any, ...], _Bound] | None:
    """The kernel's bound launches, or None where every launch must go through Triton."""
    if not ENABLED or _hooks_installed():
        return None
    got = _CACHE.get(kernel)
    if got is None and not _hooked(kernel):
        got = _CACHE[kernel] = {}
    return got


def launch(kernel: Any, grid: Grid, *args: Any, **consts: Any) -> None:
    """``kernel[grid](*args, **consts)``, through the cache of bound launches (see module)."""
    recorded = _RECORDING.get()
    bound_by_key = _bound_launches(kernel)
    if bound_by_key is None:
        kernel[grid](*args, **consts)
        if recorded is not None:
            recorded.append(None)
        return
    device = driver.active.get_current_device()
    key = _key(device, args, consts)
    bound = bound_by_key.get(key)
    if bound is None:  # Triton launches this one (compiling or autotuning first)
        if len(bound_by_key) >= MAX_KEYS:
            bound_by_key.clear()
        bound = bound_by_key[key] = _bind(kernel, grid, args, consts)
        grid3 = bound.grid or _grid3(grid)  # type: ignore[arg-type]
    else:
        grid3 = bound.grid or _grid3(grid)  # type: ignore[arg-type]
        bound(grid3, driver.active.get_current_stream(device), args)
    if recorded is not None:
        recorded.append((bound, grid3, args))
