#!/usr/bin/env bash
# The OpenCL driver the opencl plugin's tests and conformance run on in CI: PoCL's CPU device
# from Debian (the PyPI PoCL wheel cannot compile for every CPU).  Quick when it is present.
if dpkg-query -W -f='${Status}' pocl-opencl-icd 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing pocl-opencl-icd (the OpenCL CPU driver of the opencl plugin's tests)"
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd >/dev/null; then
    exit 0
  fi
fi
echo "*** pocl-opencl-icd is not installed and could not be installed here (it needs root and"
echo "*** apt-get): the opencl backend will report no device, its device tests are skipped and"
echo "*** the conformance suite does not run on it.  Install it with: apt-get install pocl-opencl-icd"
