"""Whole kernels on every usable device.  The kernels themselves (vector add, fused and
persistent softmax, matmul with a fused epilogue, layer norm, transpose, histogram) have one
source, the conformance catalogue (``anytile_conformance.catalogue.kernels``); here they run in
the suite's full mode (every dtype and shape), where ``make test``'s conformance run takes the
quick subset.  Also: how a launch treats NumPy arrays."""
import numpy as np
import pytest
from anytile_conformance.case import expand_all
from anytile_conformance.cli import DEFAULT_SEED
from anytile_conformance.catalogue.kernels import vector_add_kernel
from anytile_conformance.runner import FAILED, SKIPPED, device_capabilities, run_case

_KERNELS = [case for case in expand_all("full") if case.area == "kernels"]


@pytest.mark.parametrize("case", _KERNELS, ids=[case.id for case in _KERNELS])
def test_whole_kernel(device, case):
    result = run_case(case, device, DEFAULT_SEED, device_capabilities(device))
    if result.status == SKIPPED:
        pytest.skip(result.message)
    assert result.status != FAILED, result.message


def test_numpy_arrays_are_written_in_place(rng, poison):
    xh = rng.standard_normal(300).astype(np.float32)
    out = poison(300, np.float32)
    vector_add_kernel[(2,)](xh, xh, out, 300, BLOCK=256)
    np.testing.assert_array_equal(out, xh + xh)

