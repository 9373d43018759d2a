"""For tests that run Triton's interpreter in a subprocess: skip, saying why, where this
machine's numpy is too new for triton 3.6's interpreter (aoq.kernels._common raises then, and
aoq's kernel records carry that reason); any other failure stays a failure."""

import pytest

NUMPY_TOO_NEW = "numpy >= 2.4"
"""The phrase of aoq.kernels._common._check_interpreter_numpy's error."""


def skip_if_numpy_too_new(text: str | None) -> None:
    if text and NUMPY_TOO_NEW in text:
        pytest.skip("this machine's numpy is too new for triton 3.6's interpreter (#9171)")
