"""Every kernel specialisation the quick conformance suite launches, as JSON on stdout.

Run in a fresh process (``python conformance_kernels.py``): the suite runs on the reference
interpreter, whose ``load`` sees each compiled kernel once; a process of its own, so no
earlier launch of the same kernels has them cached already.  Each entry is the kernel's
name, its device-independent IR text (``asm["ir"]``) and its compile options."""
import json
import sys

import anytile as at
from anytile.backend import CAPABILITIES
from anytile_conformance.case import CaseContext, expand_all


def kernels() -> list[dict]:
    device = at.device("interpreter")
    backend = device.backend
    seen: dict = {}
    load = backend.load

    def recording_load(kernel, dev):
        o = kernel.options
        key = (kernel.asm["ir"], o.num_warps, o.num_stages, o.debug)
        seen.setdefault(key, {"name": kernel.name, "ir": kernel.asm["ir"], "num_warps": o.num_warps,
                              "num_stages": o.num_stages, "debug": o.debug})
        return load(kernel, dev)
    backend.load = recording_load
    for case in expand_all("quick"):
        case.run(CaseContext(device, case, 1, frozenset(CAPABILITIES)))
    return list(seen.values())


if __name__ == "__main__":
    json.dump(kernels(), sys.stdout)
