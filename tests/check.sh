#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: every test of nvrs.
#
#   1. host: cargo test of the pure logic (tests/host);
#   2. build: nvrs.ko and the C consumer against the test kernel, warning-free;
#      and make bench's module (NVRS_BENCH=1) in a copy of the tree;
#   3. module metadata: modinfo fields and the GPL export in Module.symvers;
#      style; stack frames (tests/frames.py);
#   4. VM, PCIe-switch topology: KUnit suites + scenarios (probe, topology,
#      p2p, isolation, vaspace, dmabuf, compact, smi, removal, teardown,
#      stale, faults, storage: NVMe O_DIRECT into GPU memory), with two
#      ivshmem devices nvrs
#      must refuse;
#   5. the DKMS package built by `dkms build` (the production build: no
#      test-only code in it), then a VM with the module it built: root-bus
#      topology (devices across the host bridge), the two GPUs
#      declaring an NVLink pair, NVMe behind a root port of its own (the
#      kernel refuses storage DMA into GPU memory there);
#   6. VM, PCIe switch without an IOMMU: the p2p, dma-buf and storage
#      scenarios on bus addresses;
#   7. `make consumer` (tests/consumer-run.sh) with the worked example
#      (examples/edu-peer: its happy path and every fault control), and with
#      a script that must fail;
#   8. VM on the sanitizer kernel (KASAN, UBSAN, SLUB debugging, debug
#      objects, lockdep, kmemleak): the memory-path scenarios (teardown
#      among them; not smi or stale), plus fault injection at
#      every allocation of each path and a bounded fuzzer.
#
# Each step adds to the totals; the last line is "N passed, N failed" and the
# exit status is non-zero if anything failed or did not run.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set +e

PASSED=0
FAILED=0
SKIPPED=0
SUMMARY=()

# record STEP PASSED FAILED [SKIPPED]: a step that passed nothing counts as a
# failure. Skipped tests (KUnit SKIPs) neither pass nor fail, but are shown.
record() {
	local skipped=
	[ -n "${4:-}" ] && skipped=", $4 skipped"
	PASSED=$((PASSED + $2))
	FAILED=$((FAILED + $3))
	SKIPPED=$((SKIPPED + ${4:-0}))
	if [ "$2" -eq 0 ] && [ "$3" -eq 0 ]; then
		FAILED=$((FAILED + 1))
	fi
	if [ "$3" -eq 0 ] && [ "$2" -gt 0 ]; then
		SUMMARY+=("PASS $1: $2 passed$skipped")
	else
		SUMMARY+=("FAIL $1: $2 passed, $3 failed$skipped")
	fi
}

finish() {
	echo
	echo "==== summary ===="
	printf '%s\n' "${SUMMARY[@]}"
	echo "$SKIPPED KUnit cases skipped (neither passed nor failed)"
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
	exit $?
}

step() {
	echo
	echo "==== $* ===="
}

step "bootstrap"
if ! nvrs_bootstrap; then
	record bootstrap 0 1
	finish
fi
# The QEMU with the GPU model (tests/model/nvrs-gpu.c). Without it the model's
# VM fails, the rest runs.
if nvrs_bootstrap qemu; then
	record "bootstrap: QEMU with the GPU model" 1 0
else
	record "bootstrap: QEMU with the GPU model" 0 1
fi

step "host tests (cargo test)"
log=$OUT/host-tests.log
: >"$log"
hp=0
hf=0
# host_test NAME ARGS...: one `cargo test`, its verdict from its exit status as
# well as its counts. A crate that does not compile, or a test binary that
# crashes, prints no "test result" line of its own, and another crate's
# "test result: ok" must not stand in for it: cargo's exit status is non-zero
# then, and every test binary cargo started must have printed its result.
# --no-fail-fast: a crashed binary does not hide the results of the others.
host_test() {
	local name=$1 rc started results l=$OUT/host-$1.log
	shift
	"$@" --no-fail-fast >"$l" 2>&1
	rc=$?
	cat "$l" >>"$log"
	grep -E '^test |test result' "$l"
	hp=$((hp + $(grep -oE '[0-9]+ passed' "$l" | awk '{s += $1} END {print s + 0}')))
	hf=$((hf + $(grep -oE '[0-9]+ failed' "$l" | awk '{s += $1} END {print s + 0}')))
	started=$(grep -cE '^ +(Running|Doc-tests) ' "$l")
	results=$(grep -c '^test result: ' "$l")
	if [ "$rc" -ne 0 ]; then
		grep -E '^error|process didn.t exit successfully' "$l"
		echo "not ok - $name: cargo test exited with status $rc (log: $l)"
		hf=$((hf + 1))
	fi
	if [ "$started" -eq 0 ] || [ "$results" -ne "$started" ]; then
		echo "not ok - $name: $started test binaries started, $results reported a result"
		hf=$((hf + 1))
	fi
}
host_test host cargo test --manifest-path "$ROOT/tests/host/Cargo.toml"
# nvrs-smi: unit tests on a snapshot recorded in the VM, and its command line.
CARGO_TARGET_DIR="$OUT/smi-host-target" host_test nvrs-smi cargo test --locked \
	--manifest-path "$ROOT/tools/nvrs-smi/Cargo.toml"
record "host cargo test" "$hp" "$hf"

step "build nvrs.ko and the C consumer"
if nvrs_build; then
	record build 1 0
else
	record build 0 1
	finish
fi

# make bench's module (NVRS_BENCH=1: the in-kernel benchmarks), built in a copy
# of the tree against this kernel, so that its code keeps building between
# benchmark runs, and its stack frames are checked (below).
step "build the benchmark module (NVRS_BENCH=1)"
if nvrs_build_copy "$OUT/benchbuild" NVRS_BENCH=1 >"$OUT/build-bench.log" 2>&1; then
	record "bench build" 1 0
else
	tail -n 20 "$OUT/build-bench.log"
	record "bench build" 0 1
fi

step "module metadata"
mp=0
mf=0
meta() {
	if eval "$2"; then
		echo "ok - $1"
		mp=$((mp + 1))
	else
		echo "not ok - $1"
		mf=$((mf + 1))
	fi
}
ko=$ROOT/nvrs.ko
meta "license GPL" '[ "$(modinfo -F license "$ko")" = GPL ]'
meta "description" '[ -n "$(modinfo -F description "$ko")" ]'
meta "parameter emulated documented" 'modinfo -F parm "$ko" | grep -q "^emulated:.*(bool)"'
meta "parameter p2p_topology documented" 'modinfo -F parm "$ko" | grep -q "^p2p_topology:.*(u32)"'
meta "parameter peer_device documented" 'modinfo -F parm "$ko" | grep -q "^peer_device:.*(u32)"'
meta "parameter dmabuf_revocable_only documented" \
	'modinfo -F parm "$ko" | grep -q "^dmabuf_revocable_only:.*(bool)"'
meta "parameter compact_on_alloc documented" 'modinfo -F parm "$ko" | grep -q "^compact_on_alloc:.*(bool)"'
meta "parameter p2pdma documented" 'modinfo -F parm "$ko" | grep -q "^p2pdma:Give each GPU.*(bool)"'
for p in fault_bar1_mib:u32 fault_callback_delay_us:u32 fault_callback_workqueue:bool \
	fault_revoke_every_ms:u32; do
	meta "parameter ${p%%:*} documented" "modinfo -F parm \"\$ko\" | grep -q '^${p%%:*}:Fault control.*(${p#*:})'"
done
meta "parameter bind_nvidia documented (GPUs are bound only on request)" \
	'modinfo -F parm "$ko" | grep -q "^bind_nvidia:.*(bool)"'
meta "alias for NVIDIA 3D controllers" 'modinfo -F alias "$ko" | grep -q "^pci:v000010DEd\*.*bc03sc02i"'
meta "alias for NVIDIA VGA controllers" 'modinfo -F alias "$ko" | grep -q "^pci:v000010DEd\*.*bc03sc00i"'
meta "nvrs_gpu_count exported GPL" 'grep -qP "\tnvrs_gpu_count\t.*\tEXPORT_SYMBOL_GPL" "$ROOT/Module.symvers"'
meta "consumer links only against nvrs" '[ "$(modinfo -F depends "$ROOT/tests/consumer/nvrs_consumer.ko")" = nvrs ]'
record "module metadata" "$mp" "$mf"

step "style: rustfmt (kernel configuration) and checkpatch"
mp=0
mf=0
meta "rustfmt and clippy of nvrs-smi" \
	'(cd "$ROOT/tools/nvrs-smi" && cargo fmt --check && CARGO_TARGET_DIR="$OUT/smi-host-target" cargo clippy --locked --all-targets -- -D warnings) >/dev/null 2>&1'
meta "rustfmt --check of the module and the host crate" \
	'rustfmt --config-path "$KSRC/.rustfmt.toml" --edition 2021 --check "$ROOT/src/nvrs.rs" "$ROOT/tests/host/src/lib.rs" "$ROOT/tests/host/examples/pmm_bench.rs" "$ROOT/tests/host/build.rs"'
for f in rust/helpers.c rust/helpers.h rust/bench_buddy.c include/nvrs.h \
	include/nvrs_emu_identity.h include/uapi/nvrs.h rust/dmabuf.c \
	tests/consumer/consumer.c tests/consumer/consumer.h tests/consumer/dmabuf.c \
	examples/edu-peer/edu_peer.c rust/faults.c \
	tests/vm/tcg_profile/tb_count.c tests/vm/tcg_profile/qemu_plugin_api.h; do
	meta "checkpatch $f" 'perl "$KSRC/scripts/checkpatch.pl" --no-tree --quiet -f "$ROOT/$f" >/dev/null'
done
meta "the QEMU profiling plugin builds (tests/tcg-profile.sh)" \
	'gcc -Wall -Werror -O2 -shared -fPIC -o "$OUT/tb_count.so" "$TESTS/vm/tcg_profile/tb_count.c"'
# The exported functions are defined in Rust, so EXPORT_SYMBOL_GPL cannot follow them.
meta "checkpatch src/exports.c" \
	'perl "$KSRC/scripts/checkpatch.pl" --no-tree --quiet --ignore EXPORT_SYMBOL -f "$ROOT/src/exports.c" >/dev/null'
# NVIDIA's ABI requires its typedefs and uint*_t prototypes.
# User space reaching MMIO through a sysfs mapping has no readl(): volatile is how.
meta "checkpatch tests/tools/nvrs-model-test.c" \
	'perl "$KSRC/scripts/checkpatch.pl" --no-tree --quiet --ignore VOLATILE -f "$TESTS/tools/nvrs-model-test.c" >/dev/null'
# The GPU model is QEMU code, in QEMU's style, checked by QEMU's checkpatch.
meta "QEMU checkpatch tests/model/nvrs-gpu.c" \
	'perl "$NVRS_QEMU_SRC/scripts/checkpatch.pl" --no-tree -f "$TESTS/model/nvrs-gpu.c" >/dev/null'
meta "checkpatch include/nv-p2p.h" \
	'perl "$KSRC/scripts/checkpatch.pl" --no-tree --quiet --ignore NEW_TYPEDEFS -f "$ROOT/include/nv-p2p.h" >/dev/null'
# A kernel that dies before the VM's init printed anything (no nvrs code ran:
# an int3 of the kernel's own text patching in about 1 of 17 bench-kernel
# boots under TCG) is booted once more, said so, and a second failure fails.
meta "run.py boots once more after a kernel failure before init, and fails if it fails again" \
	'! python3 "$TESTS/vm/run.py" --kernel "$BZIMAGE" --scenario probe --append rdinit=/nonexistent \
		--timeout 120 --log "$OUT/early-boot.log" --show none >"$OUT/early-boot.out" &&
	grep -q "failed before the first scenario started .*booting once more" "$OUT/early-boot.out" &&
	[ -s "$OUT/early-boot.log.boot1" ] && grep -q "^RESULT: [0-9]* passed, [1-9][0-9]* failed" "$OUT/early-boot.out"'
# Layering: the ordered layers of tests/layering.py (core < helpers < mem < gpu
# < p2p/dmabuf < vaspace < chardev/driver), no module importing a higher one and
# no import cycle (the drawing is left in tests/out/imports.dot); and the check
# must fail on a tree with the p2p <-> vaspace cycle src/ had before src/mem/.
meta "layering of src/: ordered layers, no import cycle (layering.py --strict)" \
	'python3 "$TESTS/layering.py" --strict "$OUT/imports.dot"'
meta "layering.py --strict fails on a tree with an import cycle (tests/data/layering-cycle)" \
	'! NVRS_ROOT="$TESTS/data/layering-cycle" python3 "$TESTS/layering.py" --strict >"$OUT/layering-cycle.txt" &&
	grep -q "^not ok - import cycle: p2p -> vaspace -> p2p" "$OUT/layering-cycle.txt"'
# Stack frames (tests/frames.py): rustc does not warn of large ones as the C
# compiler does (CONFIG_FRAME_WARN), and a kernel stack is 16 KiB. The
# benchmarks run inside a debugfs read's formatting; their frames once added
# up past the stack's end (a stack guard page oops in make bench). The
# benchmark module may use a quarter of the stack per frame; the production
# build is held to the kernel's 64-bit default, 2048 bytes (below, after the
# DKMS build).
meta "stack frames of the benchmark module: none over 4096 bytes" \
	'python3 "$TESTS/frames.py" "$OUT/benchbuild/nvrs.ko" 4096 >"$OUT/frames-bench.txt"'
record style "$mp" "$mf"

# vm NAME ARGS...: one VM boot; adds its RESULT line to the totals.
vm() {
	local name=$1
	shift
	step "VM: $name"
	local log=$OUT/vm-$name.txt
	# OWN_MODULES=1: the caller passes its own --module/--bin arguments.
	local mods=("${VM_MODULES[@]}")
	[ -n "${OWN_MODULES:-}" ] && mods=()
	python3 "$TESTS/vm/run.py" "${mods[@]}" --log "$OUT/vm-$name-console.log" "$@" |
		tee "$log"
	# The runner's exit status counts as well as its RESULT line: a runner
	# that fails after printing one (or prints none) fails the step.
	local rc=${PIPESTATUS[0]} res p f s
	res=$(grep -E '^RESULT: ' "$log" | tail -n1)
	if [ -z "$res" ]; then
		echo "not ok - vm $name: no RESULT line (runner exit status $rc)"
		record "vm $name" 0 1
		return
	fi
	p=$(echo "$res" | awk '{print $2}')
	f=$(echo "$res" | awk '{print $4}')
	s=$(echo "$res" | sed -n 's/.*, \([0-9]*\) skipped$/\1/p')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - vm $name: the runner exited with status $rc"
		f=1
	fi
	record "vm $name" "$p" "$f" "${s:-0}"
	# What failed, by name, under the step's summary line (at most 10 lines).
	if [ "$f" -ne 0 ]; then
		local why
		while IFS= read -r why; do
			SUMMARY+=("     $why")
		done < <(grep -E '^(FAIL |  [a-z0-9_-]+: not ok )' "$log" | head -n 10)
	fi
}

KUNIT=(--expect-suite nvrs_ident --expect-suite nvrs_emu_identity --expect-suite nvrs_gpus
	--expect-suite nvrs_topology --expect-suite nvrs_pmm --expect-suite nvrs_task)
vm switch --topology switch --bad-gpus --nvme switch --scenario probe --scenario topology \
	--scenario p2p --scenario isolation --scenario vaspace --scenario dmabuf --scenario compact \
	--scenario smi --scenario removal --scenario teardown --scenario stale --scenario faults \
	--scenario storage --scenario console --timeout 1200 \
	--files "$OUT/files" "${KUNIT[@]}"
# The GPU model, in a VM of its own: two models (Ver3 and Ver2 page tables,
# BAR1 smaller than VRAM), checked from the guest and by the runner's walker,
# then bound and identified by nvrs, which hands their memory out through BAR1
# (pins at BAR1 addresses, DMAed by edu, BAR1 running out and recovering; CPU
# mappings, dma-bufs, compaction and NVMe P2PDMA through BAR1).
vm model --model-gpu GH100:1024:256 --model-gpu GA100:512:128 --nvme switch --scenario model \
	--scenario bar1 "${KUNIT[@]}"
# The DKMS package: `dkms build` against the test kernel tree (Debian's dkms,
# in a private tree), and the module it builds is the one the next VM loads.
step "DKMS package"
DKMS_V=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$ROOT/dkms.conf")
KREL=$(cat "$KDIR/include/config/kernel.release")
rm -rf "$OUT/dkms-root" "$OUT/dkms-tree"
mkdir -p "$OUT/dkms-tree"
DKMS_KO=$OUT/dkms-tree/nvrs/$DKMS_V/$KREL/$(uname -m)/module/nvrs.ko
if make -s -C "$ROOT" DESTDIR="$OUT/dkms-root" dkms-source >"$OUT/dkms.log" 2>&1 &&
	dkms add -m nvrs -v "$DKMS_V" --sourcetree "$OUT/dkms-root/usr/src" \
		--dkmstree "$OUT/dkms-tree" >>"$OUT/dkms.log" 2>&1 &&
	dkms build -m nvrs -v "$DKMS_V" -k "$KREL" --kernelsourcedir "$KDIR" \
		--sourcetree "$OUT/dkms-root/usr/src" --dkmstree "$OUT/dkms-tree" >>"$OUT/dkms.log" 2>&1 &&
	[ "$(modinfo -F vermagic "$DKMS_KO" | awk '{print $1}')" = "$KREL" ]; then
	echo "ok - dkms build of nvrs $DKMS_V for $KREL: $DKMS_KO"
	record "dkms build" 1 0
else
	cat "$OUT/dkms.log"
	record "dkms build" 0 1
	DKMS_KO=$ROOT/nvrs.ko
fi
# The DKMS package is the production build: none of the test-only code
# (NVRS_TESTING: fault controls, delay points, their parameters and
# rust/faults.o) is in it. Each check also needs what must be there, so that
# it cannot pass on a missing module or build tree.
mp=0
mf=0
meta "production build: modinfo has its parameters (emulated) and no test_* or fault_* one" \
	'modinfo -F parm "$DKMS_KO" | grep -q "^emulated:" && ! modinfo -F parm "$DKMS_KO" | grep -qE "^(test_|fault_)"'
# dkms cleans its build area after the build, so the module itself is read:
# rust/p2pdma.o's entry point is in it and rust/faults.o's are not.
# (grep reads all of nm's output: grep -q would stop early, nm would die of
# SIGPIPE, and pipefail would fail the check.)
meta "production build: rust/p2pdma.o linked in, rust/faults.o not" \
	'nm "$DKMS_KO" | grep " T nvrs_p2pdma_register$" >/dev/null && ! nm "$DKMS_KO" | grep -E " T (nvrs_ticker_new|nvrs_pci_surprise_remove)$" >/dev/null'
meta "production build: no stack frame over 2048 bytes (tests/frames.py)" \
	'python3 "$TESTS/frames.py" "$DKMS_KO" 2048 >"$OUT/frames-production.txt"'
meta "test build: rust/faults.o linked in" \
	'nm "$ko" | grep " T nvrs_ticker_new$" >/dev/null'
meta "test build: modinfo has the test parameters" \
	'modinfo -F parm "$ko" | grep -q "^test_delay_ms:" && modinfo -F parm "$ko" | grep -q "^fault_revoke_every_ms:"'
record "production build" "$mp" "$mf"
OWN_MODULES=1 vm rootbus-nvlink-dkms --module "$DKMS_KO" --module "$ROOT/tests/consumer/nvrs_consumer.ko" \
	--bin "$OUT/nvrs-tool" --bin "$OUT/nvrs-fuzz" \
	--topology root --nvlink --nvme rootport --scenario probe --scenario production \
	--scenario topology --scenario storage "${KUNIT[@]}"
vm switch-noiommu --topology switch --iommu off --nvme switch --scenario probe --scenario p2p \
	--scenario dmabuf --scenario storage "${KUNIT[@]}"

# The consumer test-bed, through the command a consumer author runs: the
# worked example (examples/edu-peer) must pass, its happy path (test.sh) and
# under every fault control (faults.sh) in one VM, each script by its own
# verdict; and a script that fails must make the command fail.
step "make consumer: the worked example, and a script that must fail"
cp=0
cf=0
EX=$ROOT/examples/edu-peer
if make -s -C "$ROOT" consumer M="$EX" SCRIPT="$EX/test.sh $EX/faults.sh" \
	>"$OUT/consumer-example.txt" 2>&1 &&
	grep -q '^consumer: PASS (' "$OUT/consumer-example.txt" &&
	grep -qE '^nvrs-tap: ok [0-9]+ - test.sh exited with status 0$' "$OUT/consumer-example.txt" &&
	grep -qE '^nvrs-tap: ok [0-9]+ - faults.sh exited with status 0$' "$OUT/consumer-example.txt"; then
	echo "ok - make consumer M=examples/edu-peer SCRIPT=\"test.sh faults.sh\": $(tail -n1 "$OUT/consumer-example.txt")"
	cp=$((cp + 1))
else
	tail -n 60 "$OUT/consumer-example.txt"
	echo "not ok - make consumer of the worked example"
	cf=$((cf + 1))
fi
cp "$OUT/consumer-console.log" "$OUT/consumer-example-console.log" 2>/dev/null || true
if ! make -s -C "$ROOT" consumer M="$ROOT/examples/edu-peer" \
	SCRIPT="$TESTS/data/consumer-must-fail.sh" >"$OUT/consumer-must-fail.txt" 2>&1 &&
	grep -q '^consumer: FAIL (RESULT: [0-9]* passed, 1 failed' "$OUT/consumer-must-fail.txt" &&
	grep -q 'not ok .* consumer-must-fail.sh exited with status 0' "$OUT/consumer-must-fail.txt"; then
	echo "ok - make consumer with a failing script fails: $(grep '^consumer: FAIL' "$OUT/consumer-must-fail.txt")"
	cp=$((cp + 1))
else
	tail -n 60 "$OUT/consumer-must-fail.txt"
	echo "not ok - make consumer with a failing script did not fail as it must"
	cf=$((cf + 1))
fi
record "make consumer" $cp $cf

# The sanitizer kernel (clang-built: KASAN with Rust needs it) and the module
# built against it, in a copy of the tree so the check build stays as it is.
step "sanitizer kernel and build"
if nvrs_build_sanitize; then
	record "sanitizer kernel and build" 1 0
	OWN_MODULES=1 vm sanitize --kernel "$(cat "$SAN/bzimage")" --append "slub_debug=FZPU" --mem 2048 \
		--timeout 2100 --module "$SAN/nvrs.ko" --module "$SAN/tests/consumer/nvrs_consumer.ko" \
		--bin "$OUT/nvrs-tool" --bin "$OUT/nvrs-fuzz" --bin "$OUT/nvrs-smi" --topology switch \
		--nvme switch --scenario probe --scenario topology --scenario p2p --scenario isolation \
		--scenario vaspace --scenario dmabuf --scenario compact --scenario removal --scenario teardown \
		--scenario faults --scenario storage --scenario faultinject --scenario fuzz "${KUNIT[@]}"
	# The GPU model's path (BAR1 page tables, the copy engine, P2PDMA through
	# BAR1) under the sanitizers too.
	OWN_MODULES=1 vm sanitize-model --kernel "$(cat "$SAN/bzimage")" --append "slub_debug=FZPU" \
		--mem 2048 --timeout 1200 --module "$SAN/nvrs.ko" \
		--module "$SAN/tests/consumer/nvrs_consumer.ko" --bin "$OUT/nvrs-tool" \
		--bin "$OUT/nvrs-smi" --bin "$OUT/nvrs-model-test" --model-gpu GH100:1024:256 \
		--model-gpu GA100:512:128 --nvme switch --scenario model --scenario bar1 "${KUNIT[@]}"
	log=$OUT/vm-sanitize-console.log
	SUMMARY+=("     fault injection: $(sed -n 's/.*nvrs-faultinject: points \([0-9]*\).*/\1/p' "$log" | tail -n1) injection points exercised")
	SUMMARY+=("     fuzzing: $(sed -n 's/.*nvrs-fuzz-count: \([0-9]*\).*/\1/p' "$log" | tail -n1) operations")
else
	tail -n 20 "$OUT/build-sanitize.log" 2>/dev/null
	record "sanitizer kernel and build" 0 1
fi

finish
