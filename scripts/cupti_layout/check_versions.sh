#!/bin/bash
# Checks that the fields mlprof reads sit at the same offsets in every CUPTI version
# given: runs gen_layout.c against each include directory (the wheels'
# nvidia/cu13/include) and compares the offsets, leaving out struct sizes (CUPTI appends
# fields: newer records are longer, which the decoder allows). cuda.h comes from
# CUDA_INCLUDE (a CUDA 13 runtime headers directory).
# Usage: CUDA_INCLUDE=DIR check_versions.sh CUPTI_INCLUDE_DIR...
# (2026-11-26: CUPTI 12.8.90 and 12.9.79 (API 26, 28) and 13.0.85 to 13.5.25 agree;
# CUPTI 12.6 and older lack constants gen_layout.c prints, and are not read.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
first=""
for inc in "$@"; do
  cc -std=c11 -I"$inc" -I"${CUDA_INCLUDE:?set CUDA_INCLUDE}" -o "$tmp/gen" "$here/gen_layout.c"
  version=$(grep -o 'CUPTI_API_VERSION [0-9]*' "$inc/cupti_version.h" | cut -d' ' -f2)
  "$tmp/gen" | grep -v '^//!\|SIZE: usize\|CUPTI_API_VERSION\|HEADER_API_VERSION\|headers of CUPTI\|^/// `CUpti_Activity\|`sizeof' > "$tmp/$version"
  if [ -z "$first" ]; then first=$version; continue; fi
  if diff -q "$tmp/$first" "$tmp/$version" >/dev/null; then echo "CUPTI $version: same offsets as $first"; else echo "CUPTI $version differs from $first:"; diff "$tmp/$first" "$tmp/$version"; exit 1; fi
done
