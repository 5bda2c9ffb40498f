# SPDX-License-Identifier: GPL-2.0
#
# Scenario "faults": the per-GPU fault controls (debugfs <gpu>/faults,
# src/faults.rs) with the test consumer. Each control must do what it says
# (the call it names fails with the chosen errno, at the Nth call or with a
# seeded probability that replays; pins past a BAR1 budget fail with -ENOMEM;
# "revoke now" runs the free callbacks of live non-persistent pins only), a bad
# command must give -EINVAL and change nothing, each setting is logged once, the
# counters reach NVRS_IOCTL_GPU_STATS and nvrs-smi -q, and every pin still ends
# and every byte comes back.

. /scenarios/lib.sh
M=/lib/modules

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU0=$(nvrs_bound | sed -n 1p)
F=/sys/kernel/debug/nvrs/$GPU0/faults
check "GPU0 has a faults file" test -f "$F"
expect_eq "no control set at first" \
	"bar1 0 callback delay 0 callback context thread injected 0 revoked 0" \
	"$(tr '\n' ' ' <"$F" | sed 's/ $//')"

# Bad commands: -EINVAL, nothing changed, nothing logged.
echo "fail dmabuf_map EIO nth 5" >"$F"
cp "$F" /tmp/faults.before
for bad in "fail get_pages EPERM nth 1" "fail get_pages EIO nth 0" "fail nosuch EIO nth 1" \
	"fail get_pages EIO permille 1001 seed 1" "bar1 lots" "revoke later" \
	"callback delay 1000001" "callback context softirq" \
	"revoke every 0" "revoke every 60001" "remove surprise now" \
	"fail get_pages EIO nth 1 $(printf 'x%.0s' $(seq 120))"; do
	tool "'$(echo "$bad" | cut -c1-40)' refused with EINVAL" !EINVAL benchwrite "$F" "$bad"
	check "  and nothing changed" cmp -s "$F" /tmp/faults.before
done
echo "fail dmabuf_map off" >"$F"
check "the settings were logged, once each" sh -c \
	"[ \$(dmesg | grep -c 'fault control: fail dmabuf_map EIO nth 5') = 1 ] &&
	 [ \$(dmesg | grep -c 'fault control: fail dmabuf_map off') = 1 ] &&
	 ! dmesg | grep -q 'fault control: fail get_pages EPERM'"

# get_pages at the Nth call, once.
echo "fail get_pages EBUSY nth 2" >"$F"
tool "the second get_pages fails with EBUSY, the first and third work" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; !EBUSY ctl pin 1 @A 0x10000 \; \
	ctl pin 2 @A 0x10000 \; ctl put 0 \; ctl put 2 \; free A
# get_pages_persistent.
echo "fail get_pages_persistent ENODEV nth 1" >"$F"
tool "get_pages_persistent fails with ENODEV once, then works" \
	alloc A 0 2M \; !ENODEV ctl ppin 3 @A 0x10000 \; ctl ppin 3 @A 0x10000 \; \
	ctl put 3 \; free A
# dma_map_pages.
echo "fail dma_map ENOMEM nth 1" >"$F"
tool "dma_map_pages fails with ENOMEM once, then maps" \
	alloc A 0 2M \; ctl pin 0 @A 0x20000 \; !ENOMEM ctl map 0 \; ctl map 0 \; \
	ctl unmap 0 \; ctl put 0 \; free A
# dma-buf attach and map, through the kernel's RDMA core.
echo "fail dmabuf_attach EBUSY nth 1" >"$F"
tool "a dma-buf attach fails with EBUSY once, then the import works" \
	alloc A 0 2M \; export A 0 2M \; !EBUSY ctl dbget 0 %A 0 0x200000 pinned \; \
	ctl dbget 0 %A 0 0x200000 pinned \; ctl dbput 0 \; close A \; free A
echo "fail dmabuf_map EIO nth 1" >"$F"
tool "a dma-buf map fails with EIO once, then the import works" \
	alloc A 0 2M \; export A 0 2M \; !EIO ctl dbget 0 %A 0 0x200000 pinned \; \
	ctl dbget 0 %A 0 0x200000 pinned \; ctl dbput 0 \; close A \; free A

# With a probability: seeded, the same seed gives the same calls.
pattern() {
	echo "fail get_pages EIO permille 500 seed $1" >"$F"
	_p=
	for _i in $(seq 24); do
		if nvrs-tool alloc A 0 64K \; ctl pin 0 @A 0x10000 \; ctl put 0 >/dev/null 2>&1; then
			_p=${_p}0
		else
			_p=${_p}1
		fi
	done
	echo "fail get_pages off" >"$F"
	echo "$_p"
}
P1=$(pattern 7)
P2=$(pattern 7)
diag "seed 7: $P1"
expect_eq "seed 7 fails the same calls twice" "$P1" "$P2"
check "  some calls failed and some did not" sh -c "echo $P1 | grep -q 0 && echo $P1 | grep -q 1"
P3=$(pattern 8)
diag "seed 8: $P3"
check "  another seed, other calls" test "$P1" != "$P3"

# A BAR1 budget of 2 MiB: the third 1 MiB pin does not fit.
echo "bar1 0x200000" >"$F"
tool "past the BAR1 budget a pin fails with ENOMEM; within it, pins work" \
	alloc A 0 2M \; ctl pin 0 @A 0x100000 \; ctl ppin 1 @A 0x100000 \; \
	!ENOMEM ctl pin 2 @A 0x100000 \; stats 0 \; sh "nvrs-smi -q -i 0" \; \
	sh "echo bar1 0 >$F" \; ctl pin 2 @A 0x100000 \; ctl put 0 \; ctl put 1 \; ctl put 2 \; free A
check "  GPU_STATS reports the budget" grep -q "^stats faults injected [0-9]* revoked 0 bar1_budget 2097152$" /tmp/tool.out
check "  nvrs-smi -q shows it, and BAR1 total is the budget" sh -c \
	"grep -qE 'BAR1 Budget +: 2 MiB' /tmp/tool.out && grep -qE '^ +Total +: 2 MiB' /tmp/tool.out"

# revoke now: the live non-persistent pins' callbacks run, persistent pins stay.
tool "revoke now runs the callbacks of non-persistent pins only" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; ctl pin 1 @A 0x20000 \; ctl ppin 2 @A 0x10000 \; \
	sh "echo revoke now >$F" \; sh "sleep 1" \; ctl status 0 \; ctl status 1 \; ctl status 2 \; \
	ctl put 0 \; ctl put 1 \; ctl put 2 \; free A
check "  pin 0: revoked, callback once" grep -q "^slot 0 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  pin 1: revoked, callback once" grep -q "^slot 1 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  the persistent pin is still live" grep -q "^slot 2 pinned 1 mapped 0 persistent 1 callbacks 0$" /tmp/tool.out
check "  logged" sh -c "dmesg | grep -q 'fault control: revoking 2 live non-persistent pins'"

# revoke permille: at a pinning call, a random live non-persistent pin is revoked.
echo "revoke permille 1000 seed 1" >"$F"
tool "with 'revoke permille 1000', the next pin revokes the live one" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; ctl ppin 2 @A 0x10000 \; ctl pin 1 @A 0x10000 \; \
	sh "sleep 1" \; ctl status 0 \; ctl status 1 \; ctl status 2 \; \
	sh "echo revoke off >$F" \; ctl put 0 \; ctl put 1 \; ctl put 2 \; free A
check "  pin 0: revoked, callback once" grep -q "^slot 0 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  pin 1 (made after the roll): live" grep -q "^slot 1 pinned 1 mapped 0 persistent 0 callbacks 0$" /tmp/tool.out
check "  the persistent pin: live" grep -q "^slot 2 pinned 1 mapped 0 persistent 1 callbacks 0$" /tmp/tool.out

# revoke every: a timer revokes the live non-persistent pins, again and again,
# until "revoke off".
tool "with 'revoke every 200', live pins are revoked periodically; 'revoke off' stops it" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; ctl ppin 2 @A 0x10000 \; \
	sh "echo revoke every 200 >$F" \; sh "sleep 1" \; ctl status 0 \; \
	ctl pin 1 @A 0x10000 \; sh "sleep 1" \; ctl status 1 \; ctl status 2 \; \
	sh "cat $F" \; sh "echo revoke off >$F" \; ctl pin 3 @A 0x10000 \; sh "sleep 1" \; \
	ctl status 3 \; ctl put 0 \; ctl put 1 \; ctl put 2 \; ctl put 3 \; free A
check "  pin 0: revoked by a tick, callback once" grep -q "^slot 0 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  pin 1, made a second later: revoked by a later tick" grep -q "^slot 1 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  the persistent pin: live" grep -q "^slot 2 pinned 1 mapped 0 persistent 1 callbacks 0$" /tmp/tool.out
check "  the faults file shows the period" grep -qx "revoke every 200" /tmp/tool.out
check "  pin 3, made after 'revoke off': live a second later" grep -q "^slot 3 pinned 1 mapped 0 persistent 0 callbacks 0$" /tmp/tool.out
check "  'revoke off' took the period away" sh -c "! grep -q '^revoke every' $F"
check "  both settings logged" sh -c \
	"dmesg | grep -q 'fault control: revoke every 200' && dmesg | grep -q 'fault control: revoke off'"

# The callback's context and delay, for the revocations of a FREE.
tool "by default a FREE runs the callback in the freeing thread" \
	alloc A 0 2M \; ctl pin 4 @A 0x10000 \; free A \; ctl cbctx 4 \; ctl put 4
check "  not in a worker" grep -qx "cbctx exiting 0 worker 0" /tmp/tool.out
echo "callback context workqueue" >"$F"
echo "callback delay 300000" >"$F"
tool "with 'callback context workqueue' it runs in a worker, 300 ms late, and the FREE waits" \
	alloc A 0 2M \; ctl pin 4 @A 0x10000 \; free A \; ctl cbctx 4 \; \
	ctl status 4 \; ctl put 4
check "  in a worker" grep -qx "cbctx exiting 0 worker 1" /tmp/tool.out
check "  the FREE returned after the callback" grep -q "^slot 4 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
T0=$(ms)
nvrs-tool alloc A 0 2M \; ctl pin 4 @A 0x10000 \; free A \; ctl put 4 >/tmp/tool.out 2>&1
T1=$(ms)
diag "FREE with a 300 ms callback delay: about $((T1 - T0)) ms"
check "  the delay holds the FREE up (at least 300 ms, to 10 ms)" test $((T1 - T0)) -ge 290
echo "callback context thread" >"$F"
echo "callback delay 0" >"$F"

# Counters: 6 Nth failures, the probability runs' failures, one BAR1 refusal;
# revoked: two by "revoke now", one by "revoke permille", two by "revoke every".
FAILS=$(echo "$P1$P2$P3" | tr -cd 1 | wc -c)
tool "GPU_STATS counts what the controls did" stats 0
expect_eq "  injected: every failure the controls caused" \
	"stats faults injected $((6 + FAILS)) revoked 5 bar1_budget 0" \
	"$(grep '^stats faults' /tmp/tool.out)"
check "  the faults file agrees" grep -qx "injected $((6 + FAILS))" "$F"
check_all_returned

# remove surprise: GPU1 falls off the bus while a process owns all of its
# memory, a consumer holds a pin and a persistent pin on it. The pin's callback
# runs once, the function leaves the bus, and after a rescan the GPU comes back
# with none of the old owner's bytes.
GPU1=$(nvrs_bound | sed -n 2p)
F1=/sys/kernel/debug/nvrs/$GPU1/faults
FB1=$(fb_total $GPU1)
dmesg_mark
tool "GPU1 falls off the bus under an allocation, a pin and a persistent pin" \
	alloc A 1 $FB1 \; fill A 0x5ec2e7e1 \; ctl pin 0 @A 0x10000 \; ctl ppin 1 @A 0x10000 \; \
	sh "echo remove surprise >$F1" \; \
	sh "for i in \$(seq 100); do test -e /sys/bus/pci/devices/$GPU1 || break; sleep 0.1; done" \; \
	ctl status 0 \; ctl status 1 \; sh "ls /sys/bus/pci/devices" \; ctl put 0 \; ctl put 1
check "  the pin: revoked, callback once" grep -q "^slot 0 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  the function left the bus" sh -c "! grep -qx '$GPU1' /tmp/tool.out && ! test -e /sys/bus/pci/devices/$GPU1"
dmesg_new >/tmp/dmesg.new
check "  logged: the request, then the teardown of a disconnected GPU" sh -c \
	"grep -q 'fault control: surprise removal' /tmp/dmesg.new &&
	 grep -q 'fell off the bus: revoking its pins' /tmp/dmesg.new"
check "  the persistent pin was put, nothing is pinned" grep -qx "pins: 0" /sys/kernel/debug/nvrs/p2p
echo 1 >/sys/bus/pci/rescan
check "  a rescan finds it again and nvrs binds it" test -e /sys/bus/pci/drivers/nvrs/$GPU1
tool "  all of GPU1 reads zero for the next owner" alloc B 1 $FB1 \; zero B \; free B
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# refused_at_insmod DESCRIPTION PARAMETER=VALUE: insmod must fail (and if it
# does not, nvrs is unloaded again).
refused_at_insmod() {
	if insmod $M/nvrs.ko emulated=1 "$2" 2>/tmp/err.txt; then
		not_ok "$1"
		rmmod nvrs
	else
		ok "$1"
	fi
}

# The same controls as module parameters, set on every GPU at probe.
refused_at_insmod "a callback delay over 1 s is refused at insmod" fault_callback_delay_us=2000000
check "insmod nvrs with fault_bar1_mib=1 fault_callback_workqueue=1" \
	insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 fault_bar1_mib=1 fault_callback_workqueue=1
check "insmod consumer" insmod $M/nvrs_consumer.ko
for g in $(nvrs_bound); do
	check "  $g: the budget and the context are set" sh -c \
		"grep -qx 'bar1 1048576' /sys/kernel/debug/nvrs/$g/faults &&
		 grep -qx 'callback context workqueue' /sys/kernel/debug/nvrs/$g/faults"
done
check "  logged once per GPU" sh -c \
	"[ \$(dmesg | grep -c 'fault controls from the module parameters: BAR1 budget 1 MiB') = $(nvrs_bound | wc -l) ]"
tool "  a 2 MiB pin is past the budget, a 1 MiB one fits, a FREE's callback runs in a worker" \
	alloc A 0 2M \; !ENOMEM ctl pin 0 @A 0x200000 \; ctl pin 0 @A 0x100000 \; free A \; \
	ctl cbctx 0 \; ctl put 0
check "  in a worker" grep -qx "cbctx exiting 0 worker 1" /tmp/tool.out
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# fault_revoke_every_ms: the periodic revocation from probe on.
refused_at_insmod "a revocation period over 60 s is refused at insmod" fault_revoke_every_ms=60001
check "insmod nvrs with fault_revoke_every_ms=300" \
	insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 fault_revoke_every_ms=300
check "insmod consumer" insmod $M/nvrs_consumer.ko
for g in $(nvrs_bound); do
	check "  $g: the period is set" grep -qx 'revoke every 300' /sys/kernel/debug/nvrs/$g/faults
done
tool "  a pin is revoked within a second" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; sh "sleep 1" \; ctl status 0 \; ctl put 0 \; free A
check "  revoked, callback once" grep -q "^slot 0 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs (the timer stops with the GPUs)" rmmod nvrs
check "no splat" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops'"
done_testing
