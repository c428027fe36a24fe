#!/bin/bash
# Regenerates crates/cupti/src/layout.rs from CUPTI's headers. Needs a C compiler and the
# PyPI wheel nvidia-cuda-cupti (its include/ holds cupti.h); cuda.h comes from
# nvidia-cuda-runtime's, and cuda.h includes crt/ headers from nvidia-cuda-crt.
# Usage: generate.sh DIR   (DIR holds cupti.h, cuda.h and crt/). check_versions.sh checks
# that other CUPTI versions put the same fields at the same offsets.
set -euo pipefail
inc=${1:?usage: generate.sh INCLUDE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../crates/cupti/src/layout.rs
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -I"$inc" -o "$tmp/gen" "$here/gen_layout.c"
"$tmp/gen" > "$out"
echo "wrote $out"
