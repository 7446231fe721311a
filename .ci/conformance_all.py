"""Run the conformance suite on every backend usable on this machine; fail if any is not
conformant.  Extra arguments are passed to `anytile conformance` (e.g. --quick)."""
import subprocess
import sys

from anytile.runtime.discovery import list_backends

records = list_backends()
usable = [r.name for r in records if r.availability.usable]
print(f"conformance: usable backends here: {', '.join(usable) or 'none'}", flush=True)
for r in records:
    if not r.availability.usable:
        print(f"conformance: not run on {r.name}: {r.availability.reason}", flush=True)
failed = []
for name in usable:
    code = subprocess.call([sys.executable, "-m", "anytile", "conformance", "--backend", name,
                            *sys.argv[1:]])
    if code != 0:
        failed.append(name)
if failed:
    print(f"conformance: NOT CONFORMANT on {', '.join(failed)}")
    sys.exit(1)
print(f"conformance: every usable backend is CONFORMANT ({', '.join(usable)})")
