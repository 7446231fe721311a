"""Makes ``fe_kit`` importable (pytest runs with --import-mode=importlib)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
