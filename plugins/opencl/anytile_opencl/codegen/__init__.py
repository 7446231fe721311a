"""Tile IR -> OpenCL C: ``kernel.emit_kernel`` and the parts it is made of."""
