"""Running kernels: ``@jit``, launching, arrays, devices, backend discovery, compilation."""
