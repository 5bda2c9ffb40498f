#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make consumer M=DIR SCRIPT=FILE [...]`: build a consumer author's
# out-of-tree module against nvrs (include/ and Module.symvers) and the test
# kernel, boot the test VM with nvrs, the emulated GPUs, an IOMMU and edu,
# run the author's script there (tests/scenarios/consumer.sh), and bring back
# its output and the console.
#
#   M=DIR            the module's directory (its Kbuild or Makefile); built
#                    with `make -C $KDIR M=DIR NVRS_INCLUDE=<nvrs>/include
#                    KBUILD_EXTRA_SYMBOLS=<nvrs>/Module.symvers modules`
#   SCRIPT=FILE      run in the VM by /bin/sh (busybox) after nvrs is loaded;
#                    exit status 0 is a pass. Several, separated by spaces.
#   TOPOLOGY=switch  GPUs and edu under one PCIe switch, or root: on the root
#                    bus, across the host bridge
#   IOMMU=on         or off
#   KERNEL=check     lockdep, kmemleak, DMA-API debugging; or sanitize: KASAN,
#                    UBSAN, SLUB debugging (clang-built; a first run builds it)
#   MODEL=GH100:1024:256  a GPU model beside the emulated GPUs (chip, MiB of
#                    VRAM, MiB of BAR1; tests/model/nvrs-gpu.c): nvrs maps its
#                    memory through BAR1 page tables, so pins return BAR1
#                    addresses; MODEL=none for the emulated GPUs only
#   NVRS_PARAMS=...  extra nvrs module parameters (modinfo nvrs.ko)
#   TIMEOUT=900      seconds before the VM counts as hung
#
# Output: the script's lines as "  SCRIPT: ..." diagnostics, one verdict line
# per check, and a last line "consumer: PASS" or "consumer: FAIL"; the whole
# console is in tests/out/consumer-console.log, the script's output in
# tests/out/consumer-output.txt. Exit status 0 on a pass.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MDIR=${M:-}
SCRIPTS=${SCRIPT:-}
TOPOLOGY=${TOPOLOGY:-switch}
IOMMU=${IOMMU:-on}
KERNEL=${KERNEL:-check}
TIMEOUT=${TIMEOUT:-900}
MODEL=${MODEL:-GH100:1024:256}
# `make consumer M=...` passes its command line on in MAKEFLAGS: the builds
# below (nvrs's own, with its own M) must not inherit it.
unset MAKEFLAGS MFLAGS MAKEOVERRIDES

usage() {
	echo "usage: make consumer M=<module dir> SCRIPT=<script> [TOPOLOGY=switch|root]" \
		"[IOMMU=on|off] [KERNEL=check|sanitize] [MODEL=CHIP:MiB:MiB|none]" \
		"[NVRS_PARAMS=...] [TIMEOUT=s]" >&2
	echo "consumer: FAIL ($1)"
	exit 2
}
[ -n "$MDIR" ] && [ -d "$MDIR" ] || usage "M is not a directory: '${MDIR}'"
[ -n "$SCRIPTS" ] || usage "no SCRIPT"
for s in $SCRIPTS; do
	[ -f "$s" ] || usage "SCRIPT is not a file: '$s'"
done
case "$TOPOLOGY" in switch | root) ;; *) usage "TOPOLOGY is switch or root" ;; esac
case "$IOMMU" in on | off) ;; *) usage "IOMMU is on or off" ;; esac
case "$KERNEL" in check | sanitize) ;; *) usage "KERNEL is check or sanitize" ;; esac
case "$MODEL" in none | [A-Z]*:[0-9]*:[0-9]*) ;; *) usage "MODEL is CHIP:VRAM_MIB:BAR1_MIB or none" ;; esac
MDIR=$(cd "$MDIR" && pwd)

nvrs_bootstrap check
model=()
if [ "$MODEL" != none ]; then
	nvrs_bootstrap qemu || {
		echo "consumer: FAIL (building the QEMU with the GPU model; MODEL=none runs without it)"
		exit 1
	}
	# The emulated GPUs stay (run.py leaves them out when it adds a model).
	model=(--gpu GH100 --gpu GA100 --model-gpu "$MODEL")
fi
# nvrs, the test tools (nvrs-tool allocates GPU memory in the scripts).
nvrs_build
NVRS_KO=$ROOT/nvrs.ko
SYMVERS=$ROOT/Module.symvers
LLVM_ARG=()
if [ "$KERNEL" = sanitize ]; then
	nvrs_build_sanitize || {
		tail -n 20 "$OUT/build-sanitize.log" 2>/dev/null
		echo "consumer: FAIL (building nvrs for the sanitizer kernel)"
		exit 1
	}
	# shellcheck disable=SC1090
	. "$SAN_ENV"
	NVRS_KO=$SAN/nvrs.ko
	SYMVERS=$SAN/Module.symvers
	[ -n "$KLLVM" ] && LLVM_ARG=(LLVM="$KLLVM")
fi

echo "== building $MDIR against nvrs and $(basename "$KDIR") =="
make -C "$KDIR" M="$MDIR" "${LLVM_ARG[@]}" NVRS_INCLUDE="$ROOT/include" \
	KBUILD_EXTRA_SYMBOLS="$SYMVERS" modules >"$OUT/consumer-build.log" 2>&1 || {
	cat "$OUT/consumer-build.log"
	echo "consumer: FAIL (building the module)"
	exit 1
}
mods=()
while IFS= read -r o; do
	mods+=(--consumer-module "$MDIR/${o%.o}.ko")
	echo "built $MDIR/${o%.o}.ko"
done <"$MDIR/modules.order"
[ ${#mods[@]} -gt 0 ] || {
	echo "consumer: FAIL (the build of $MDIR made no module)"
	exit 1
}
scripts=()
for s in $SCRIPTS; do
	scripts+=(--script "$s")
done

echo "== VM: $TOPOLOGY topology, IOMMU $IOMMU, $KERNEL kernel, GPU model: $MODEL =="
san=()
[ "$KERNEL" = sanitize ] && san=(--append "slub_debug=FZPU" --mem 2048)
set +e
python3 "$TESTS/vm/run.py" --kernel "$BZIMAGE" --module "$NVRS_KO" "${mods[@]}" \
	--bin "$OUT/nvrs-tool" --bin "$OUT/nvrs-smi" --topology "$TOPOLOGY" --iommu "$IOMMU" "${model[@]}" \
	"${scripts[@]}" --nvrs-params "${NVRS_PARAMS:-}" "${san[@]}" --timeout "$TIMEOUT" \
	--log "$OUT/consumer-console.log" | tee "$OUT/consumer-vm.txt"
rc=${PIPESTATUS[0]}
set -e
sed -n 's/^nvrs-tap: #   //p' "$OUT/consumer-console.log" >"$OUT/consumer-output.txt"
echo "console: $OUT/consumer-console.log; script output: $OUT/consumer-output.txt"
res=$(grep -E '^RESULT: ' "$OUT/consumer-vm.txt" | tail -n1)
if [ "$rc" = 0 ] && [[ "$res" == "RESULT: "*" passed, 0 failed"* ]]; then
	echo "consumer: PASS (${res#RESULT: })"
	exit 0
fi
echo "consumer: FAIL (${res:-no result}; exit status $rc)"
exit 1
