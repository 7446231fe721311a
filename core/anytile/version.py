"""anytile's version (its own module, so that core's folders need not import the package)."""
__version__ = "0.1.0"
