#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make soak`: the 60-second race (tests/scenarios/soak.sh) in one VM on the
# check kernel (lockdep, kmemleak). Not part of `make check`. Its last line is
# "N passed, N failed, N skipped" (KUnit SKIPs of the module load).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap check
nvrs_build
python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario soak --timeout 900 \
	--log "$OUT/vm-soak-console.log" | tee "$OUT/vm-soak.txt"
res=$(grep -E '^RESULT: ' "$OUT/vm-soak.txt" | tail -n1)
echo "${res#RESULT: }"
case "$res" in
"RESULT: "*" passed, 0 failed, "*" skipped") exit 0 ;;
*) exit 1 ;;
esac
