"""Makes the helpers next to these tests, and the IR tests' ``ir_text_kit``, importable
(pytest runs with --import-mode=importlib) and lets pytest explain their failed assertions."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "ir"))
pytest.register_assert_rewrite("gpu_kit", "ir_text_kit")
