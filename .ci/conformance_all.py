"""Run the conformance suite on every backend usable on this machine; fail if any is not
conformant.  Extra arguments are passed to `anytile conformance` (e.g. --quick).  Ctrl-C
stops the run with one line (status 130), after the running suite has written its
INTERRUPTED reports."""
import subprocess
import sys

from anytile.runtime.discovery import list_backends

#: how long an interrupted suite may take to write its reports before it is killed
REPORT_GRACE_SECONDS = 60


def certify(name: str) -> int:
    """The exit status of `anytile conformance --backend NAME`.  Ctrl-C reaches the suite
    too (one process group): it is given time to write its INTERRUPTED reports."""
    child = subprocess.Popen([sys.executable, "-m", "anytile", "conformance", "--backend", name,
                              *sys.argv[1:]])
    try:
        return child.wait()
    except KeyboardInterrupt:
        try:
            child.wait(REPORT_GRACE_SECONDS)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            child.kill()
        raise


def main() -> int:
    records = list_backends()
    usable = [r.name for r in records if r.availability.usable]
    print(f"conformance: usable backends here: {', '.join(usable) or 'none'}", flush=True)
    for r in records:
        if not r.availability.usable:
            print(f"conformance: not run on {r.name}: {r.availability.reason}", flush=True)
    failed = []
    for name in usable:
        try:
            code = certify(name)
        except KeyboardInterrupt:
            code = 130
        if code == 130:             # the suite was interrupted (and said so): stop here
            print(f"conformance: interrupted while certifying {name}", file=sys.stderr)
            return 130
        if code != 0:
            failed.append(name)
    if failed:
        print(f"conformance: NOT CONFORMANT on {', '.join(failed)}")
        return 1
    print(f"conformance: every usable backend is CONFORMANT ({', '.join(usable)})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:       # while listing the backends
        print("conformance: interrupted", file=sys.stderr)
        sys.exit(130)
