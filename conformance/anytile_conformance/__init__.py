"""anytile's conformance suite and differential fuzzer.

``anytile conformance --device DEV`` (or ``python -m anytile_conformance``) runs the case
catalogue on one device and prints ``CONFORMANT`` or ``NOT CONFORMANT: N failures``;
``--fuzz N --seed S`` compares random kernels against the reference interpreter.  See
``conformance/README.md`` for vendors.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
