"""Running kernels: ``@jit``, launching, arrays, devices, backend discovery, compilation.

``kernel[grid](*args)`` meets the modules in this order (each imports only modules below it):

* ``jit``           ``JITFunction``: ``kernel[grid]`` calls its generated launcher;
* ``fast_launch``   that launcher (and all Python the runtime writes at run time): a repeated
                    launch goes straight to the backend's raw launcher, any other to
* ``launch``        the general path: bind, pick the device, import arrays, specialise,
                    plan (compile and load, cached), launch, copy back;
* ``compile``       frontend -> passes -> the backend's stages, through ``cache`` (the disk)
                    and ``dependencies`` (what the code depends on besides the arguments);
* ``specialize``    how each argument specialises the compiled code;
* ``host_descriptors``, ``arrays``, ``descriptor``   what kernels take;
* ``devices``, ``discovery``                        which backends and devices there are;
* ``hooks``         launch and compile hooks (``anytile.knobs``).

``autotune`` and ``bench`` sit above ``jit``: they launch kernels through it.  Errors reach
the user through ``anytile.errors.for_the_user`` (``user_facing`` for entry points)."""
