"""anytile-minimal: a small anytile backend that evaluates the tile IR with NumPy, written
only against anytile's public backend contract, as an example for vendors."""
from .backend import MinimalBackend

__all__ = ["MinimalBackend"]
