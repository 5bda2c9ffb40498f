# SPDX-License-Identifier: GPL-2.0
#
# Scenario "probe": the test-bed is what it claims to be, nvrs binds and
# identifies the emulated GPUs, refuses what it must, exports its symbol to a
# C consumer, and unloads and reloads cleanly.

. /scenarios/lib.sh
M=/lib/modules

if [ "$NVRS_IOMMU" = on ]; then
	check "IOMMU is enabled (DMAR)" sh -c 'dmesg | grep -q "DMAR: IOMMU enabled"'
else
	check "no IOMMU" sh -c '! dmesg | grep -q "DMAR: IOMMU enabled"'
fi
expect_eq "edu DMA peer present (1234:11e8)" 1 "$(pci_functions 0x1234 0x11e8 | wc -l)"
expect_eq "ivshmem functions present" $((NVRS_GPUS + 2 * NVRS_BAD_GPUS)) \
	"$(pci_functions 0x1af4 0x1110 | wc -l)"

# Without emulated=1, ivshmem devices are left alone.
check "insmod nvrs (emulated=0)" insmod $M/nvrs.ko
expect_eq "no GPU bound without emulated=1" 0 "$(nvrs_bound | wc -l)"
check "rmmod nvrs" rmmod nvrs

dmesg_mark
check "insmod nvrs emulated=1" insmod $M/nvrs.ko emulated=1
expect_eq "every emulated GPU bound" "$NVRS_GPUS" "$(nvrs_bound | wc -l)"

archs=""
for bdf in $(nvrs_bound); do
	info=/sys/kernel/debug/nvrs/$bdf/info
	check "$bdf: debugfs info exists" test -r $info
	chip=$(sed -n 's/^chip: //p' $info)
	arch=$(sed -n 's/^architecture: \([A-Za-z]*\).*/\1/p' $info)
	idx=$(sed -n 's/^emulated_index: //p' $info)
	want=$(echo $NVRS_CHIPS | cut -d' ' -f$((idx + 1)))
	expect_eq "$bdf: identified as the chip the runner wrote" "$want" "$chip"
	line=$(dmesg_new | grep "nvrs $bdf: $chip (chipset 0x[0-9a-f]*), [0-9]* [MG]iB aperture" | wc -l)
	expect_eq "$bdf: one probe line in dmesg" 1 "$line"
	check "$bdf: fb starts after the identity block" grep -q '^fb: offset 0x200000,' $info
	archs="$archs $arch"
	diag "$bdf: $chip ($arch)"
done
if [ "$NVRS_GPUS" -ge 2 ]; then
	n=$(echo $archs | tr ' ' '\n' | sort -u | wc -l)
	expect_eq "the GPUs have different architectures" "$NVRS_GPUS" "$n"
fi

if [ "$NVRS_BAD_GPUS" = 1 ]; then
	for bdf in $(pci_functions 0x1af4 0x1110); do
		[ -e /sys/bus/pci/drivers/nvrs/$bdf ] && continue
		n=$(dmesg_new | grep -c "nvrs $bdf:")
		expect_eq "$bdf refused with one dmesg line" 1 "$n"
		diag "$(dmesg_new | grep "nvrs $bdf:" | sed 's/^\[[ 0-9.]*\] //')"
	done
	check "bad identity block refused" sh -c 'dmesg | grep -q "no emulated-GPU identity block"'
	check "unknown chip refused" sh -c 'dmesg | grep -q "unsupported GPU architecture 0xf"'
fi

# A C module built against include/ and Module.symvers calls the export.
check "insmod the C consumer" insmod $M/nvrs_consumer.ko
check "consumer sees the exported GPU count" \
	sh -c "dmesg | grep -q 'nvrs reports $NVRS_GPUS GPUs'"
check "rmmod the C consumer" rmmod nvrs_consumer

# Unbind and rebind one GPU through sysfs.
first=$(nvrs_bound | head -n1)
check "unbind $first" sh -c "echo $first > /sys/bus/pci/drivers/nvrs/unbind"
check "$first: debugfs directory removed on unbind" test ! -e /sys/kernel/debug/nvrs/$first
expect_eq "one GPU fewer" $((NVRS_GPUS - 1)) "$(nvrs_bound | wc -l)"
check "bind $first again" sh -c "echo $first > /sys/bus/pci/drivers/nvrs/bind"
check "$first: debugfs info back" test -r /sys/kernel/debug/nvrs/$first/info

check "rmmod nvrs" rmmod nvrs
check "debugfs directory removed" test ! -e /sys/kernel/debug/nvrs
check "ivshmem functions released" sh -c '! ls /sys/bus/pci/drivers/nvrs 2>/dev/null | grep -q 0000'
check "insmod nvrs emulated=1 again" insmod $M/nvrs.ko emulated=1
expect_eq "all GPUs bound after reload" "$NVRS_GPUS" "$(nvrs_bound | wc -l)"
check "final rmmod nvrs" rmmod nvrs
done_testing
