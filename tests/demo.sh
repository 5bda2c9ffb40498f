#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: boot a VM with two emulated GPUs (GH100 and GA100), load nvrs,
# show both identities and their debugfs info, unload, power off.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap
nvrs_build
exec python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario demo \
	--gpu GH100:256 --gpu GA100:256 --log "$OUT/demo-console.log"
