# SPDX-License-Identifier: GPL-2.0
#
# Scenario "vaspace": what a process leaves behind cannot take the GPU VA
# space (shared by all processes) from others. The VA space is shrunk to
# 16 MiB (va_space_mib), eight 2 MiB allocations.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs (16 MiB VA space)" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 va_space_mib=16
check "insmod consumer" insmod $M/nvrs_consumer.ko

# --- A CPU mapping left after FREE keeps no VAs -----------------------------
# 40 x (ALLOC 2 MiB, mmap, FREE) without munmap: at fe5c205 each VMA kept its
# allocation, VAs included, and the ninth ALLOC failed (ENOMEM).
tool "40 x (ALLOC 2 MiB, mmap, FREE without munmap) in a VA space that holds 8; each mapping faults; a new allocation at an old mapping's VAs is never reached through it" \
	mapleak 0 2M 40
check "  the VA allocator wrapped around" grep -qE "^va_ranges: [0-9]+ wraps [1-9]" $D/p2p
check "  no VA range is left (va_ranges: 0)" grep -qE "^va_ranges: 0 " $D/p2p

check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
check "rmmod nvrs" rmmod nvrs
done_testing
