"""anytile-opencl: anytile kernels on every OpenCL device (entry point ``opencl``)."""
