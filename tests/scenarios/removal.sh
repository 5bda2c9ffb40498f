# SPDX-License-Identifier: GPL-2.0
#
# Scenario "removal": GPU removal racing the users of its memory, in windows
# widened by nvrs's test delay points (src/testhook.rs: the module
# parameters test_delay_points and test_delay_ms). Each block loads nvrs
# with one set of points, unbinds GPU1 inside the window, and unloads it
# again. Every unbind runs under `timeout`, so a hung one fails its test
# instead of the VM.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
U=/sys/bus/pci/drivers/nvrs/unbind

# load POINTS MS: nvrs with those delay points, and the consumer.
load() {
	check "insmod nvrs (test_delay_points=$1 test_delay_ms=$2)" \
		insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 \
		test_delay_points=$1 test_delay_ms=$2
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	GPU1=$(nvrs_bound | sed -n 2p)
	expect_eq "two GPUs bound" 2 "$(nvrs_bound | wc -l)"
}

unload() {
	check "rmmod consumer" rmmod nvrs_consumer
	check "no pins left" grep -qx "pins: 0" $D/p2p
	check "rmmod nvrs" rmmod nvrs
}

# unbind_at POINT MS AFTER: a shell command for nvrs-tool's "sh" (run in the
# background with "&") that waits for nvrs to reach delay point POINT (its
# "test delay: MS ms at POINT" line), waits AFTER seconds more, unbinds GPU1
# with a 60 s limit and writes the exit status of that to /tmp/unbind.rc;
# one subshell, so that a trailing "&" puts all of it in the background.
unbind_at() {
	echo "(n=0; until dmesg | grep -q 'test delay: $2 ms at $1'; do" \
		"n=\$((n + 1)); [ \$n -gt 300 ] && break; sleep 0.2; done;" \
		"sleep $3; timeout 60 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc)"
}

# --- 1. No free callback before get_pages handed out the table --------------
# NVIDIA's PR #557 race. The pin sits between entering the registry and
# handing its table over (holding the allocation's lock) for 8 s. A FREE of
# the allocation comes 1.5 s in and takes it out of the VA space (the FREE
# point delays its release by as much, so GPU removal cannot wait for it on
# any version of nvrs); the unbind comes 3 s in. Removal finds the pin in the
# registry: it must not revoke it before the pin is published.
load 3 8000
rm -f /tmp/unbind.rc
tool "a pin racing a FREE and the unbind of its GPU" \
	alloc A 1 2M \; sh "$(unbind_at pin-publish 8000 3) &" \; bgfree A 1500 \; \
	ctl pin 0 @A 0x200000 \; join \; sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done" \; \
	ctl status 0 \; ctl early
expect_eq "  the unbind returned within 60 s" 0 "$(cat /tmp/unbind.rc 2>/dev/null)"
check "  the callback fired (the pin was revoked)" \
	grep -qx "slot 0 pinned 0 mapped 0 persistent 0 callbacks 1" /tmp/tool.out
check "  but not before get_pages handed out the table" grep -qx "early 0" /tmp/tool.out
unload

# --- 2. Removal waits for a FREE that has not yet entered its release -------
# The FREE took the allocation out of the VA space and sleeps 6 s before
# releasing it; the process still has the memory mapped. The unbind comes
# then: it must not return (and give up the BAR and its write-combined
# reservation) while that mapping still reaches the memory.
load 2 6000
rm -f /tmp/unbind.rc
tool "a FREE in flight, the process's mapping live, and GPU1 unbound" \
	alloc A 1 2M \; mapall A \; bgfree A \; sh "$(unbind_at free-release 6000 0)" \; \
	!EFAULT keptfault A 0 \; join
expect_eq "  the unbind returned within 60 s" 0 "$(cat /tmp/unbind.rc 2>/dev/null)"
check "  the mapping faulted once the unbind had returned" \
	grep -qx "ok keptfault (failed as expected)" /tmp/tool.out
unload

# --- 3. A consumer stuck in its free callback does not hang the unbind -----
# A FREE revokes a pin (DMA-mapped for edu) whose free callback blocks until
# the consumer is told (cbblock/cbrelease); the pin's DMA mapping is torn down
# only after the unbind returned. GPU1 is unbound meanwhile, in the background: it must
# give up on the callback after nvrs's bound (fb::REMOVAL_WAIT, 10 s), say so
# in one line naming the pin, and return with the memory retired. The tool
# waits up to 60 s for that, then releases the callback either way (so an
# unbind that waits forever fails here instead of hanging the VM); then the
# release completes and the retired memory is gone.
load 0 0
rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.stuck /tmp/p2p.after
dmesg_mark
tool "a FREE blocked in a free callback while GPU1 is unbound" \
	alloc A 1 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; ctl cbblock \; bgfree A \; \
	sh "n=0; until grep -q 'state Revoking' $D/p2p; do n=\$((n + 1)); [ \$n -gt 300 ] && break; sleep 0.1; done" \; \
	sh "(timeout 120 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc) &" \; \
	sh "n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early; cat $D/p2p > /tmp/p2p.stuck" \; \
	ctl cbrelease \; join \; \
	sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; cat $D/p2p > /tmp/p2p.after"
expect_eq "  the unbind returned while the callback was blocked" 0 "$(cat /tmp/unbind.early 2>/dev/null)"
expect_eq "  one dmesg line names the stuck pin" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 1 free callbacks, first of pin va 0x[0-9a-f]* len 0x200000 pid [0-9]*; its memory stays retired')"
check "  its memory was retired meanwhile" grep -qx "retired: 0x200000" /tmp/p2p.stuck
check "  the pin was still being revoked" grep -q "len 0x200000 .* state Revoking" /tmp/p2p.stuck
check "  once the callback returned, the pin is gone" grep -qx "pins: 0" /tmp/p2p.after
check "  and no memory is retired any more" grep -qx "retired: 0x0" /tmp/p2p.after
check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
unload

# --- 4. A dma-buf importer that never unmaps does not hang the unbind --------
# A dynamic importer (an invalidate_mappings op, so the revocation waits for
# it to unmap) whose op only counts: it unmaps when told (dbunmap). GPU1 is
# unbound in the background: the revocation must give up after
# dmabuf::REVOKE_WAIT (10 s), name the dma-buf and the importer in one line,
# and the unbind return with the memory retired. The tool waits up to 60 s,
# then unmaps either way (so a revocation that waits forever fails here
# instead of hanging the VM); the late unmap lets the retired memory go.
EDU=$(pci_functions 0x1234 0x11e8 | head -n 1)
load 0 0
rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.stuck /tmp/p2p.after
dmesg_mark
tool "a dma-buf importer that does not unmap while GPU1 is unbound" \
	alloc A 1 2M \; export A 0 2M \; ctl dbget 0 %A 0 0x200000 lazy \; \
	sh "(timeout 120 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc) &" \; \
	sh "n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early; cat $D/p2p > /tmp/p2p.stuck" \; \
	ctl dbstatus 0 \; ctl dbunmap 0 \; \
	sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; cat $D/p2p > /tmp/p2p.after" \; \
	ctl dbput 0 \; close A
expect_eq "  the unbind returned while the importer still mapped the memory" 0 \
	"$(cat /tmp/unbind.early 2>/dev/null)"
check "  the importer was told to unmap and had not" \
	grep -qE "^import 0 live 1 invalidations 1 mapped 1 " /tmp/tool.out
expect_eq "  one dmesg line names the dma-buf and the importer" 1 \
	"$(dmesg_new | grep -c "gave up after [0-9]* ms on dma-buf ino [0-9]* size 0x200000: importer $EDU still maps it (1 importers); its memory stays retired")"
expect_eq "  and no other line about it" 1 "$(dmesg_new | grep -c 'dma-buf')"
check "  its memory was retired meanwhile" grep -qx "retired: 0x200000" /tmp/p2p.stuck
check "  once the importer unmapped, no memory is retired any more" \
	grep -qx "retired: 0x0" /tmp/p2p.after
check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
check "  no dma-buf left" grep -qx "dmabufs: 0" $D/p2p
unload

# --- 5. A fence that never signals does not hang the unbind ------------------
# The consumer adds an unsignalled fence to the dma-buf's reservation object
# (dbfence) and signals it only when told (dbsignal). The revocation waits for
# every fence: it must give up after the same bound, name the dma-buf and the
# fence in one line, and keep the memory retired until the dma-buf is
# released (work behind the fence may still reach it).
load 0 0
rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.stuck /tmp/p2p.signalled /tmp/p2p.after
dmesg_mark
tool "an unsignalled fence on a dma-buf while GPU1 is unbound" \
	alloc A 1 2M \; export A 0 2M \; ctl dbfence %A \; \
	sh "(timeout 120 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc) &" \; \
	sh "n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early; cat $D/p2p > /tmp/p2p.stuck" \; \
	ctl dbsignal \; \
	sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; cat $D/p2p > /tmp/p2p.signalled" \; \
	close A \; sh "cat $D/p2p > /tmp/p2p.after"
expect_eq "  the unbind returned while the fence was unsignalled" 0 \
	"$(cat /tmp/unbind.early 2>/dev/null)"
expect_eq "  one dmesg line names the dma-buf and the fence" 1 \
	"$(dmesg_new | grep -c 'gave up after [0-9]* ms on dma-buf ino [0-9]* size 0x200000: fence nvrs_consumer:dbfence unsignalled; its memory stays retired until the dma-buf is released')"
expect_eq "  and no other line about it" 1 "$(dmesg_new | grep -c 'dma-buf')"
check "  its memory was retired meanwhile" grep -qx "retired: 0x200000" /tmp/p2p.stuck
check "  and stays retired while the dma-buf is open" grep -qx "retired: 0x200000" /tmp/p2p.signalled
check "  once it is released, no memory is retired any more" grep -qx "retired: 0x0" /tmp/p2p.after
check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
check "  no dma-buf left" grep -qx "dmabufs: 0" $D/p2p
unload

# --- 6. A free callback that blocks in the unbind's own revocation -----------
# No FREE this time: the unbind itself revokes the pin (DMA-mapped for edu),
# whose free callback blocks until the consumer is told. Removal revokes pins
# in work items, never in the unbinding thread, so the unbind gives up after
# the same bound, names the pin, and returns with the memory retired; the
# tool releases the callback after at most 60 s either way.
load 0 0
rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.stuck /tmp/p2p.after
dmesg_mark
tool "a pin whose free callback blocks, revoked by GPU1's unbind" \
	alloc A 1 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; ctl cbblock \; \
	sh "(timeout 120 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc) &" \; \
	sh "n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early; cat $D/p2p > /tmp/p2p.stuck" \; \
	ctl cbrelease \; \
	sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; cat $D/p2p > /tmp/p2p.after" \; \
	ctl status 0
expect_eq "  the unbind returned while the callback was blocked" 0 "$(cat /tmp/unbind.early 2>/dev/null)"
expect_eq "  one dmesg line names the stuck pin" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 1 free callbacks, first of pin va 0x[0-9a-f]* len 0x200000 pid [0-9]*; its memory stays retired')"
check "  its memory was retired meanwhile" grep -qx "retired: 0x200000" /tmp/p2p.stuck
check "  the pin was still being revoked" grep -q "len 0x200000 .* state Revoking" /tmp/p2p.stuck
check "  the callback fired once" grep -qE "^slot 0 pinned 0 mapped [01] persistent 0 callbacks 1$" /tmp/tool.out
check "  once the callback returned, the pin is gone" grep -qx "pins: 0" /tmp/p2p.after
check "  and no memory is retired any more" grep -qx "retired: 0x0" /tmp/p2p.after
check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
unload

# --- 7. An exited owner's teardown blocked in a free callback -----------------
# The owner of a pinned allocation exits while a child keeps its file open,
# so the teardown runs in nvrs's work queue (VaSpace::exit_work) and blocks
# there in the free callback. Unbinding GPU1 then must not wait for the work
# queue without bound: it gives up after the same bound and names the pin.
load 0 0
rm -f /tmp/unbind.rc /tmp/unbind.early /tmp/p2p.stuck /tmp/p2p.after /tmp/forkhold.pid
dmesg_mark
tool "an owner exits with a pin whose free callback blocks" \
	alloc A 1 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; ctl cbblock \; forkhold 120000
tool "GPU1 unbound while that owner's teardown is blocked" \
	sh "n=0; until grep -q 'state Revoking' $D/p2p; do n=\$((n + 1)); [ \$n -gt 300 ] && break; sleep 0.1; done" \; \
	sh "(timeout 120 sh -c 'echo $GPU1 > $U'; echo \$? > /tmp/unbind.rc) &" \; \
	sh "n=0; until [ -e /tmp/unbind.rc ]; do n=\$((n + 1)); [ \$n -gt 600 ] && break; sleep 0.1; done; cat /tmp/unbind.rc > /tmp/unbind.early; cat $D/p2p > /tmp/p2p.stuck" \; \
	ctl cbrelease \; \
	sh "while [ ! -e /tmp/unbind.rc ]; do sleep 0.2; done; cat $D/p2p > /tmp/p2p.after"
kill "$(cat /tmp/forkhold.pid 2>/dev/null)" 2>/dev/null
expect_eq "  the unbind returned while the teardown was blocked" 0 "$(cat /tmp/unbind.early 2>/dev/null)"
expect_eq "  one dmesg line names the stuck pin" 1 \
	"$(dmesg_new | grep -c 'gave up after 10000 ms on 1 free callbacks, first of pin va 0x[0-9a-f]* len 0x200000 pid [0-9]*; its memory stays retired')"
check "  its memory was retired meanwhile" grep -qx "retired: 0x200000" /tmp/p2p.stuck
check "  once the callback returned, the pin is gone" grep -qx "pins: 0" /tmp/p2p.after
check "  and no memory is retired any more" grep -qx "retired: 0x0" /tmp/p2p.after
check "  GPU1 binds again" sh -c "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
expect_eq "  two GPUs bound" 2 "$(nvrs_bound | wc -l)"
tool "  and hands out its memory (nothing retired blocks it)" alloc B 1 2M \; free B
unload

done_testing
