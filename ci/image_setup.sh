#!/bin/sh
# Everything Dockerfile.cuda / Dockerfile.rocm add to their base, in ONE layer: run as root
# from the copied project (WORKDIR /home/aoq/aoq). One RUN matters on the vfs storage driver,
# where every layer is a full copy of the image (a layer per step cost ~2.4 GB each).
#   env: TORCH_SPEC (requirements, space-separated, installed when the base has no torch, e.g.
#        "torch==2.13.0 triton==3.6.0"), AOQ_UID (user aoq's uid)
#   .aoq-build/ca.crt     optional CA bundle pip trusts (TLS-intercepting proxies); build only
#   .aoq-build/wheels/    optional wheels pip may use offline (e.g. a CPU torch); build only
set -eu
build="$PWD/.aoq-build"
if [ -s "$build/ca.crt" ]; then export PIP_CERT="$build/ca.crt"; fi
mkdir -p "$build/wheels"

# A venv over the base's site-packages: the vendor images' torch/triton stay as shipped.
python3 -m venv --system-site-packages /opt/aoq
pip_install() {
  /opt/aoq/bin/python -m pip install -q --no-cache-dir --find-links "$build/wheels" "$@"
}
if ! /opt/aoq/bin/python -c "import torch" 2>/dev/null; then
  if [ -z "${TORCH_SPEC:-}" ]; then
    echo "the base image has no torch: pass --build-arg TORCH_SPEC='torch==X triton==Y'" >&2
    exit 1
  fi
  # shellcheck disable=SC2086  # one word per requirement
  pip_install $TORCH_SPEC
fi
pip_install -r requirements-image.txt
pip_install --no-deps --no-build-isolation -e .

# make runs the suite; torch.compile's CPU backend (inductor) compiles C++ with g++ against
# Python.h. The vendor images have all three; a locally made Debian base gets them here
# (versions follow the base's distribution, so they are not pinned).
missing=""
command -v make >/dev/null || missing="$missing make"
command -v g++ >/dev/null || missing="$missing g++"
/opt/aoq/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || missing="$missing python3-dev"
if [ -n "$missing" ]; then
  apt-get update -q
  # shellcheck disable=SC2086  # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
  rm -rf /var/lib/apt/lists/*
fi

# Non-root user. -o: Ubuntu 24.04 bases (rocm/pytorch) already give uid 1000 to `ubuntu`.
useradd --create-home --non-unique --uid "${AOQ_UID:-1000}" aoq
rm -rf "$build" reports/runs reports/site reports/results.sqlite* /root/.cache
find . -name __pycache__ -prune -exec rm -rf {} +
mkdir -p reports/runs
chown -R aoq:aoq /home/aoq
