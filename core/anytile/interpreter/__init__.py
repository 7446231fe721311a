"""The reference interpreter: runs anytile's tile IR with NumPy, a whole tile at a time.

It is the executable definition of the IR's meaning (the docstrings of ``anytile.ir.ops``)
and the oracle of the conformance suite.  Published as the ``interpreter`` backend.
"""
from .backend import InterpreterBackend

__all__ = ["InterpreterBackend"]
