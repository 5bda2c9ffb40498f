# SPDX-License-Identifier: GPL-2.0
#
# Scenario "teardown": GPU removal against what holds up its waits: releases
# blocked in consumers' free callbacks, more blocked callbacks than a work
# queue runs at once, a fault control's revocation blocking while an
# allocation is still being created, a FREE of a P2PDMA allocation racing
# removal's walk; and a forked child reaching for its parent's mapping.
#
# Each unbind runs in the background under `timeout`; the tool waits up to
# 60 s for it and releases the blocked callbacks either way, so an unbind
# that waits for ever fails its test instead of hanging the VM. Every
# removal here must give up on blocked callbacks after nvrs's bound
# (fb::REMOVAL_WAIT, 10 s), never on anything else, and nothing it gives up
# on may touch the GPU's memory or struct pages after the unbind returned
# (the sanitizer VM runs this scenario too).

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
U=/sys/bus/pci/drivers/nvrs/unbind

# load POINTS MS: nvrs with those delay points (src/testhook.rs), and the
# consumer.
load() {
	check "insmod nvrs (test_delay_points=$1 test_delay_ms=$2)" \
		insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 \
		test_delay_points=$1 test_delay_ms=$2
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	# Exported: the shell commands below run in nvrs-tool's children.
	export GPU1=$(nvrs_bound | sed -n 2p)
	expect_eq "two GPUs bound" 2 "$(nvrs_bound | wc -l)"
	rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.after
	dmesg_mark
}

# rebind_unload: GPU1 binds again and hands out memory; no pin is left; both
# modules unload.
rebind_unload() {
	check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
	expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
	tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
	check "rmmod consumer" rmmod nvrs_consumer
	check "no pins left" grep -qx "pins: 0" $D/p2p
	check "rmmod nvrs" rmmod nvrs
}

# Shell commands for nvrs-tool's "sh": wait until a pin is being revoked;
# unbind GPU1 in the background; wait up to 60 s for that unbind and keep its
# status in /tmp/unbind.early; wait for it for good, then up to 30 s for the
# released callbacks to end their pins and give their memory back, and keep
# debugfs p2p. Both are waited for: a pin leaves the registry ("pins:") a
# moment before its memory goes back ("retired:"), in the work item that
# revoked it, which nothing here joins.
REVOKING="n=0; until grep -q 'state Revoking' $D/p2p; do n=\$((n + 1)); [ \$n -gt 300 ] && break; sleep 0.1; done"
UNBIND="(timeout 120 sh -c 'echo \$GPU1 > $U'; echo \$? > /tmp/unbind.rc) &"
EARLY="n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early"
AFTER="while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; n=0; until cat $D/p2p > /tmp/p2p.after && grep -qx 'pins: 0' /tmp/p2p.after && grep -qx 'retired: 0x0' /tmp/p2p.after; do n=\$((n + 1)); [ \$n -gt 300 ] && break; sleep 0.1; done"
# delay_reached POINT MS: wait until nvrs sleeps at delay point POINT.
delay_reached() {
	echo "n=0; until dmesg | grep -q 'test delay: $2 ms at $1'; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done"
}

# after_unbind: what every block checks once the callbacks were released.
after_unbind() {
	expect_eq "  the unbind returned while the callbacks were blocked" 0 \
		"$(cat /tmp/unbind.early 2>/dev/null)"
	check "  once the callbacks returned, no pin is left" grep -qx "pins: 0" /tmp/p2p.after
	check "  and no memory is retired" grep -qx "retired: 0x0" /tmp/p2p.after
}

# --- 1. A last close blocked in a free callback ------------------------------
# Two allocations on GPU1, each pinned; the process closes /dev/nvrs, and the
# close releases them one after the other: it blocks in the first one's free
# callback. The unbind must give up on that callback after the bound (the
# second allocation is not a release in flight: it has not started), revoke
# the second one's pin itself, and return.
load 0 0
tool "a last close blocked in the first of two allocations' callbacks, GPU1 unbound" \
	alloc A 1 2M \; alloc B 1 2M \; ctl pin 0 @A 0x10000 \; ctl pin 1 @B 0x10000 \; \
	ctl cbblock \; bgclose \; sh "$REVOKING" \; sh "$UNBIND" \; sh "$EARLY" \; \
	ctl cbrelease \; join \; sh "$AFTER"
after_unbind
expect_eq "  one dmesg line says it gave up on the callbacks" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 2 free callbacks, first of pin va 0x[0-9a-f]* len 0x10000 pid [0-9]*; its memory stays retired')"
rebind_unload

# --- 1b. The same, removal reporting while a revocation starts ---------------
# Removal queues the second pin's revocation once it has given up on the
# first callback, and gives up on both. Its work item claims the pin and is
# slow to reach the callback (revoke-claimed, 4 s) while removal reports what
# it gave up on (removal-report, 2 s): a revocation between its claim and its
# callback still waits on the consumer and must be reported (it once was not:
# the line said 1, the flake of the sanitizer VM).
load 384 4000
tool "the same, removal reporting while the second revocation is claimed" \
	alloc A 1 2M \; alloc B 1 2M \; ctl pin 0 @A 0x10000 \; ctl pin 1 @B 0x10000 \; \
	ctl cbblock \; bgclose \; sh "$REVOKING" \; sh "$UNBIND" \; sh "$EARLY" \; \
	ctl cbrelease \; join \; sh "$AFTER"
after_unbind
expect_eq "  one dmesg line says it gave up on both callbacks" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 2 free callbacks')"
rebind_unload

# --- 2. More blocked callbacks than the work queue runs at once --------------
# 1100 pins of one allocation, whose callbacks all block: removal revokes them
# in work items, and a work queue runs at most 1024 at once (WQ_DFL_ACTIVE),
# so 76 wait for a worker that never comes. Those are blocked on the consumer
# too: the unbind must give up on all 1100 after the bound. Meanwhile another
# process's exit on GPU0 must not wait behind them: its memory is back when it
# has exited.
load 0 0
tool "1100 pins whose callbacks block, GPU1 unbound" \
	alloc A 1 2M \; ctl pinmany @A 0x10000 1100 \; ctl cbblock \; sh "$UNBIND" \; \
	sh "$REVOKING" \; \
	sh "nvrs-tool alloc X 0 2M > /tmp/exit.out 2>&1; echo \$? > /tmp/exit.rc" \; \
	stats 0 \; sh "$EARLY" \; ctl cbrelease \; sh "$AFTER" \; ctl putmany
after_unbind
expect_eq "  one dmesg line says it gave up on all 1100" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 1100 free callbacks, first of pin va 0x[0-9a-f]* len 0x10000 pid [0-9]*; its memory stays retired')"
expect_eq "  a process on GPU0 allocated and exited meanwhile" 0 "$(cat /tmp/exit.rc 2>/dev/null)"
check "  and its memory was back at once" grep -qE "^stats gpu 0 .* fb_used 0 " /tmp/tool.out
expect_eq "  its release after exit did not wait" 0 \
	"$(dmesg_new | grep -c 'release after exit still runs')"
check "  every callback fired, none of the pins was left to put" \
	grep -qx "putmany put 0 revoked 1100" /tmp/tool.out
rebind_unload

# --- 3. A FREE of a P2PDMA allocation racing removal's walk ------------------
# Allocation B's FREE blocks in a free callback, so removal's first wait gives
# up after the bound; removal then sleeps before its walk (delay point 8) and
# the FREE of P2PDMA allocation A starts meanwhile, sleeping (delay point 16)
# between removing A's CPU mappings and letting go of A's struct pages, and
# again (64) between putting its references on them and reading them to see
# that they are free. Removal must not give the P2PDMA pool back (after which
# the kernel frees the struct pages once no page is held) while that FREE
# still holds and then reads them.
load 88 5000
tool "a FREE of a P2PDMA allocation while GPU removal walks the allocations" \
	alloc B 1 2M \; alloc A 1 2M p2pdma \; ctl pin 0 @B 0x10000 \; ctl cbblock \; \
	bgfree B \; sh "$REVOKING" \; sh "$UNBIND" \; sh "$(delay_reached removal-walk 5000)" \; \
	free A \; sh "$EARLY" \; ctl cbrelease \; join \; sh "$AFTER"
after_unbind
check "  the FREE of the P2PDMA allocation waited for its pages, then returned" \
	grep -qx "ok free" /tmp/tool.out
rebind_unload

# --- 4. An allocation being created while a fault control's callback blocks --
# `revoke now` (a fault control) revokes a pin whose callback blocks, in a
# worker: no release waits for it. An allocation with struct pages is then
# being created, sleeping after its scrub (delay point 32, 15 s, taken by
# P2PDMA allocations only) before it takes its struct pages and becomes
# reachable, when GPU1 is unbound. The
# blocked callback is no operation of the GPU's in flight: removal must wait
# for the creation (and then release the new allocation), not give up after
# the bound while it still runs.
load 32 15000
tool "an allocation being created while a fault control's revocation blocks, GPU1 unbound" \
	alloc A 1 2M \; ctl pin 0 @A 0x10000 \; ctl cbblock \; \
	sh "echo revoke now > $D/\$GPU1/faults" \; sh "$REVOKING" \; bgalloc C 1 2M p2pdma \; \
	sh "$(delay_reached create-scrub 15000)" \; sh "$UNBIND" \; sh "$EARLY" \; join \; \
	!ENOENT free C \; ctl cbrelease \; sh "$AFTER"
after_unbind
check "  the creation finished" grep -q "^bgalloc C va 0x[0-9a-f]* size 2097152$" /tmp/tool.out
check "  and GPU removal released what it made (the FREE finds nothing)" \
	grep -qx "ok free (failed as expected)" /tmp/tool.out
rebind_unload

# --- 5. A forked child and its parent's mappings -----------------------------
# The owner maps an allocation, asks for the mapping to be inherited
# (MADV_DOFORK) and forks. The child owns no GPU memory: its read must fault.
# The kernel refuses MADV_DOFORK on VM_SPECIAL mappings (VM_DONTEXPAND, and
# VM_MIXEDMAP for a P2PDMA allocation's struct pages, VM_IO | VM_PFNMAP for
# frames), so the VMA stays VM_DONTCOPY and the child has no mapping at all.
check "insmod nvrs" insmod $M/nvrs.ko emulated=1
tool "a child forked after MADV_DOFORK reads its parent's mappings" \
	alloc A 0 2M p2pdma \; forkread A \; alloc B 0 2M \; forkread B \; free A \; free B
check "  both mappings: MADV_DOFORK refused (EINVAL), not missing (ENOSYS)" \
	test "$(grep -c '^forkread dofork -22 ' /tmp/tool.out)" -eq 2
check "  both mappings: the child's read faults" \
	test "$(grep -cE '^forkread dofork -?[0-9]+ child signal (7|11)$' /tmp/tool.out)" -eq 2
check "  no child read any data" sh -c "! grep -q 'child read' /tmp/tool.out"
check "rmmod nvrs" rmmod nvrs

done_testing
