"""A plugin written for a backend API version this anytile does not support."""
from numpy_source_backend import NumpySourceBackend


class FutureBackend(NumpySourceBackend):
    name = "from-the-future"
    api_version = 99


class NotABackend:
    """An entry point that names something other than a Backend subclass."""
