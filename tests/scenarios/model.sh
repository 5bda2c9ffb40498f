# SPDX-License-Identifier: GPL-2.0
#
# Scenario "model": the GPU model (tests/model/nvrs-gpu.c) behaves as the
# hardware it stands for, checked from the guest the way a driver reaches it
# (nvrs-model-test, through sysfs): the boot registers and sizes of its chip,
# BAR1 in physical mode, GMMU page tables in the chip's format written
# through PRAMIN (64 KiB, 4 KiB and 2 MiB pages, an unmapped address that
# reads all-ones and counts a fault), a translation that stays cached until
# the TLB is invalidated, a read-only page, and BAR1's traffic counters. The
# runner then walks the tables in each model's VRAM file with its own walker
# (tests/vm/gmmu.py). Last, nvrs binds each model as NVIDIA hardware,
# identifies it from its boot registers, and sets up BAR1 in virtual mode
# through page tables of its own (empty after its self-test, which the
# runner's walker checks); a test build that skips the TLB invalidate must
# fail that self-test and leave the GPU unbound.

. /scenarios/lib.sh
M=/lib/modules

# model DESCRIPTION ARGS...: one nvrs-model-test check; its stdout (host-check
# requests) goes to the runner, its stderr is shown as diagnostics.
model() {
	_d=$1
	shift
	if nvrs-model-test "$@" 2>/tmp/model.err; then ok "$_d"; else not_ok "$_d"; fi
	while IFS= read -r l; do diag "  $l"; done </tmp/model.err
}

set -- $NVRS_MODEL_GPUS
expect_eq "the runner described GPU models" yes "$([ $# -gt 0 ] && echo yes || echo no)"
i=0
for spec in "$@"; do
	model_fields "$spec"
	bdfs=$(pci_functions 0x10de 0x$dev)
	# Models are described in bus order; two of one chip would be ambiguous.
	expect_eq "model $i ($chip): one NVIDIA function 10de:$dev" 1 "$(echo "$bdfs" | grep -c .)"
	bdf=$(echo "$bdfs" | head -n1)
	[ -n "$bdf" ] || { i=$((i + 1)); continue; }
	expect_eq "$bdf: class 3D controller" 0x030200 "$(cat /sys/bus/pci/devices/$bdf/class)"
	check "$bdf: enable the function (memory decoding)" \
		sh -c "echo 1 >/sys/bus/pci/devices/$bdf/enable"
	model "$bdf: boot registers of $chip, $vram MiB VRAM, $bar1 MiB BAR1" \
		$bdf ident $boot0 $boot42 $vram $bar1
	model "$bdf: BAR1 in physical mode reads and writes VRAM" $bdf physical
	model "$bdf: GMMU tables through PRAMIN: 64K, 4K and 2M pages, unmapped reads ones" \
		$bdf walk $i
	model "$bdf: a remap or unmap is not seen until the TLB is invalidated" $bdf tlb
	model "$bdf: a write to a read-only page is dropped and counted" $bdf readonly
	model "$bdf: BAR1 rx/tx counters count the bytes" $bdf counters
	model "$bdf: the copy engine copies and memsets VRAM, interrupts, refuses" $bdf ce
	# The walk's tables, as the last check left them, are what the runner reads.
	model "$bdf: the walk's tables rebuilt for the runner's walker" $bdf walk $i
	check "$bdf: disable the function" sh -c "echo 0 >/sys/bus/pci/devices/$bdf/enable"
	i=$((i + 1))
done
# The runner walks those tables now: nvrs, bound below, hands the VRAM out.
sh /scenarios/hostsync.sh

# nvrs binds a model as it would the GPU it stands for, from its boot registers.
dmesg_mark
check "insmod nvrs bind_nvidia=1" insmod $M/nvrs.ko bind_nvidia=1
i=0
for spec in "$@"; do
	model_fields "$spec"
	bdf=$(pci_functions 0x10de 0x$dev | head -n1)
	if [ -z "$bdf" ]; then
		not_ok "model $i ($chip): no function 10de:$dev to bind"
		i=$((i + 1))
		continue
	fi
	check "$bdf: bound to nvrs" test -e /sys/bus/pci/drivers/nvrs/$bdf
	info=/sys/kernel/debug/nvrs/$bdf/info
	expect_eq "$bdf: identified from PMC_BOOT_0/42 as $chip" "$chip" \
		"$(sed -n 's/^chip: //p' $info 2>/dev/null)"
	check "$bdf: a hardware backend, not an emulated one" grep -q '^backend: hardware' $info
	diag "$(dmesg_new | grep "nvrs $bdf:" | sed 's/^\[[ 0-9.]*\] //' | head -n1)"
	check "$bdf: nvrs put BAR1 in virtual mode through Ver$mmu page tables" \
		grep -qx "bar1_mode: virtual, page tables MMU Ver$mmu" $info
	check "$bdf: nvrs's BAR1 self-test passed" grep -qx "bar1_selftest: passed" $info
	want="$vram MiB"
	[ $((vram % 1024)) -eq 0 ] && want="$((vram / 1024)) GiB"
	expect_eq "$bdf: VRAM size from LOCAL_MEMORY_RANGE" "$want" "$(sed -n 's/^vram: //p' $info)"
	model "$bdf: with nvrs's empty tables BAR1 reads all-ones and faults" $bdf unmapped 0x10000
	# NVRS_IOCTL_GPU_PCIE through nvrs-smi: the model counts every BAR1 byte.
	if command -v nvrs-smi >/dev/null; then
		tx0=$(nvrs-smi --json -i $bdf | sed -n 's/.*"bar1_tx": \([0-9]*\).*/\1/p' | head -n1)
		k=0
		while [ $k -lt 10 ]; do
			nvrs-model-test $bdf unmapped 0x20000 2>/dev/null
			k=$((k + 1))
		done
		tx1=$(nvrs-smi --json -i $bdf | sed -n 's/.*"bar1_tx": \([0-9]*\).*/\1/p' | head -n1)
		expect_eq "$bdf: nvrs-smi sees BAR1 tx grow by 10 reads of 4 bytes" 40 \
			"$(( ${tx1:-0} - ${tx0:-0} ))"
		check "$bdf: nvrs-smi read the counters (not empty)" test -n "$tx0"
		nvrs-smi dmon -c 1 -d 1 -s t --format csv -i $bdf >/tmp/dmon.txt 2>&1
		expect_eq "$bdf: nvrs-smi dmon -c 1 exit status" 0 $?
		expect_eq "$bdf: dmon -s t prints its two header lines" "#gpu, rxpci, txpci|#Idx, MB/s, MB/s|" \
			"$(head -n 2 /tmp/dmon.txt | tr '\n' '|')"
		expect_eq "$bdf: dmon -c 1 prints one row" 3 "$(wc -l </tmp/dmon.txt)"
		check "$bdf: dmon's row has rates, not '-'" grep -qE "^$i, [0-9.]+, [0-9.]+$" /tmp/dmon.txt
	else
		not_ok "$bdf: nvrs-smi is in the VM"
	fi
	inst=$(sed -n 's/^bar1_instance_block: //p' $info)
	# The runner's walker: the space at inst maps nothing, through a big-page
	# table per 2 MiB of BAR1.
	if [ -n "$inst" ]; then
		echo "nvrs-hostcheck: gmmu-empty $i $inst $mmu $((bar1 / 2))"
	else
		not_ok "$bdf: debugfs info names BAR1's instance block"
	fi
	i=$((i + 1))
done
sh /scenarios/hostsync.sh
# An unbound GPU leaves its index free: nvrs-smi must still read the others
# (it stopped at the first free index and exited 9).
set -- $NVRS_MODEL_GPUS
if [ $# -ge 2 ]; then
	model_fields "$1"
	bdf0=$(pci_functions 0x10de 0x$dev | head -n1)
	check "unbind $bdf0 from nvrs" sh -c "echo $bdf0 >/sys/bus/pci/drivers/nvrs/unbind"
	nvrs-smi --json >/tmp/smi-sparse.json 2>/tmp/smi-sparse.err
	expect_eq "nvrs-smi with GPU index 0 free: exit status" 0 $?
	expect_eq "nvrs-smi with GPU index 0 free: the other GPU listed" "$(($# - 1))" \
		"$(grep -c '"bus_id"' /tmp/smi-sparse.json)"
	while IFS= read -r l; do diag "  $l"; done </tmp/smi-sparse.err
fi
check "rmmod nvrs" rmmod nvrs
# Levels 0-4 (emergency to warning), from the raw log's priority prefixes.
check "the raw kernel log has nvrs's lines" sh -c 'dmesg -r | grep -q "^<[0-9]>.*nvrs"'
expect_eq "no nvrs message at warning level or above" 0 \
	"$(dmesg -r | grep -E "^<[0-4]>" | grep -v "taints kernel" | grep -c nvrs)"

# Without the invalidates the model keeps the self-test's translation: nvrs
# must see it and refuse each GPU, with one line.
dmesg_mark
check "insmod nvrs bind_nvidia=1 test_skip_tlb_invalidate=1" \
	insmod $M/nvrs.ko bind_nvidia=1 test_skip_tlb_invalidate=1
expect_eq "no model bound without TLB invalidates" 0 "$(nvrs_bound | wc -l)"
expect_eq "one stale-translation line per model" $# \
	"$(dmesg_new | grep -c 'BAR1 self-test read 0x[0-9a-f]* after the unmap and invalidate')"
check "rmmod nvrs" rmmod nvrs

done_testing
