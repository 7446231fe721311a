"""libdevice's special functions (Bessel, error-function family, gamma) as formulas."""
from __future__ import annotations

__all__: list[str] = []
