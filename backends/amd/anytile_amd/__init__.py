"""anytile's AMD GPU backend: ``backend.AmdBackend`` (entry point ``amd``, devices ``hip:N``)
and the same lowering simulated on the host (``simulated``, entry points ``amdsim64`` and
``amdsim32``)."""
