"""Makes the helpers next to these tests importable (pytest runs with --import-mode=importlib)
and lets pytest explain their failed assertions."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.register_assert_rewrite("gpu_kit")
