# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_model" (make bench, not make check): what BAR1 and the copy
# engine cost on the GPU model, against what nvrs does on a flat aperture.
#
#  - p2p_pin_bar1_*: nvidia_p2p_get_pages + put_pages on the model (each pin
#    reserves a BAR1 run, writes its entries through PRAMIN and invalidates the
#    TLB; the put clears them and invalidates again) against the same calls on
#    an emulated GPU of the same chip with a flat aperture (no BAR1 work), in
#    alternated rounds in one process.
#  - compact_model_16m: a compaction that moves 16 MiB of CPU-mapped 64 KiB
#    allocations on the model (the copy engine copies, nvrs points the moved
#    pages' BAR1 entries at the copies, the engine scrubs the old chunks)
#    against the same compaction on the emulated GPU (the CPU copies and
#    scrubs through the flat aperture: the only other way nvrs moves memory),
#    in alternated rounds.
#  - scrub_model_*: the free of an allocation written through a CPU mapping
#    (so that it is scrubbed as it goes back), scrubbed by the model's copy engine
#    against the CPU writing zeros through BAR1's scrub slot (nvrs loaded with
#    test_no_copy_engine=1), alternated by reloading nvrs each round.
#
# Under TCG every BAR0 and BAR1 access is a call into the model: the CPU side
# of both comparisons pays what an MMIO access costs there, and the copy
# engine's work is a host memset. Prints "bench:" lines; asserts nothing about
# time.

. /scenarios/lib.sh
. /scenarios/benchlib.sh
M=/lib/modules

set -- $NVRS_MODEL_GPUS
model_fields "$1"
mbdf=$(pci_functions 0x10de 0x$dev | head -n1)

# load [PARAMS]: nvrs on the emulated GPUs and the model, and the consumer;
# sets MODEL to the model's GPU index and FLAT to an emulated GPU's of the
# same chip.
load() {
	check "insmod nvrs emulated=1 bind_nvidia=1 $*" \
		insmod $M/nvrs.ko emulated=1 bind_nvidia=1 peer_device=0x123411e8 $*
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	FLAT= MODEL=
	for g in 0 1 2 3; do
		set -- $(nvrs-tool info $g 2>/dev/null | sed -n 's/^gpu [0-9]* \([^ ]*\) \([^ ]*\) .*/\1 \2/p')
		if [ "$1" = "$mbdf" ]; then
			MODEL=$g
		elif [ "$2" = "$chip" ] && [ -z "$FLAT" ]; then
			FLAT=$g
		fi
	done
	expect_eq "an emulated $chip and the model bound" yes \
		"$([ -n "$FLAT" ] && [ -n "$MODEL" ] && echo yes || echo no)"
}

unload() {
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
}

load
# pin_bar1 NAME LEN N: ROUNDS alternated rounds of N pins of LEN on each GPU.
pin_bar1() {
	nvrs-tool alloc A $MODEL 64M \; alloc F $FLAT 64M \
		$(rounds "ctl benchpin @A $2 $3" "ctl benchpin @F $2 $3") >/tmp/b.txt 2>&1
	# benchpin replies in the order run: the model first in odd rounds.
	awk '/^benchpin len/ { c++; r = int((c + 1) / 2); first = c % 2 == 1
		print ((first == (r % 2 == 1)) ? "m" : "f"), $5 }' /tmp/b.txt >/tmp/b.sides
	awk '$1 == "m" { print $2 }' /tmp/b.sides >/tmp/b.nvrs
	awk '$1 == "f" { print $2 }' /tmp/b.sides >/tmp/b.anchor
	n=$(spread </tmp/b.nvrs)
	a=$(spread </tmp/b.anchor)
	pp=$(paired /tmp/b.nvrs /tmp/b.anchor)
	check "p2p pin through BAR1 $1 measured" test -n "$n" -a -n "$a" -a -n "$pp" \
		-a "$(wc -l </tmp/b.nvrs)" = "$ROUNDS" -a "$(wc -l </tmp/b.anchor)" = "$ROUNDS" \
		-a "$(grep -c '^FAIL' /tmp/b.txt)" = 0
	[ -n "$n" ] && [ -n "$a" ] && set -- "$1" $n $a "$pp" &&
		line "p2p_pin_bar1_$1" "$2" "$5" "rounds=$ROUNDS $8 $(minmax nvrs $3 $4) $(minmax anchor $6 $7) anchor_is=flat_aperture"
}
pin_bar1 64k 0x10000 200
pin_bar1 2m 0x200000 100

# compact_once GPU: 1024 CPU-mapped 64 KiB allocations on GPU (32 roots),
# every other one freed, then a compaction until all roots but 16 are free:
# the nanoseconds it took and the bytes it moved (nvrs-tool benchcompact).
compact_once() {
	set -- $1 $(nvrs-tool info $1 2>/dev/null | sed -n 's/^gpu [0-9]* \([^ ]*\) .*/\1/p')
	goal=$(($(fb_total $2) / 2097152 - 16))
	nvrs-tool frag $1 1024 \; benchcompact /sys/kernel/debug/nvrs/$2/compact $goal $1 2>/dev/null |
		sed -n 's/^benchcompact bytes \([0-9]*\) ns \([0-9]*\) .*/\2 \1/p'
}
: >/tmp/c.model
: >/tmp/c.flat
r=1
while [ $r -le $ROUNDS ]; do
	for side in $([ $((r % 2)) = 1 ] && echo "model flat" || echo "flat model"); do
		if [ $side = model ]; then compact_once $MODEL; else compact_once $FLAT; fi >>/tmp/c.$side
	done
	r=$((r + 1))
done
cut -d' ' -f1 /tmp/c.model >/tmp/c.nvrs
cut -d' ' -f1 /tmp/c.flat >/tmp/c.anchor
n=$(spread </tmp/c.nvrs)
a=$(spread </tmp/c.anchor)
pp=$(paired /tmp/c.nvrs /tmp/c.anchor)
moved=$(cut -d' ' -f2 /tmp/c.model /tmp/c.flat | sort -u)
check "compaction on the model measured, both sides moving 16 MiB every round" \
	test -n "$n" -a -n "$a" -a -n "$pp" -a "$moved" = 16777216 \
	-a "$(wc -l </tmp/c.nvrs)" = "$ROUNDS" -a "$(wc -l </tmp/c.anchor)" = "$ROUNDS"
if [ -n "$n" ] && [ -n "$a" ]; then
	set -- $n $a
	line "compact_model_16m" "$1" "$4" "rounds=$ROUNDS $pp $(minmax nvrs $2 $3) $(minmax anchor $5 $6) nvrs_is=copy_engine anchor_is=cpu_flat_aperture"
fi
unload

# scrub_once: the free of 16 MiB written through a CPU mapping on the model
# (the scrub), best of 2 (nvrs-tool benchscrub).
scrub_once() {
	nvrs-tool benchscrub $MODEL 16M 2 2>/dev/null |
		sed -n 's/^benchscrub size [0-9]* free_ns \([0-9]*\) .*/\1/p'
}
: >/tmp/s.ce
: >/tmp/s.cpu
r=1
while [ $r -le $ROUNDS ]; do
	for side in $([ $((r % 2)) = 1 ] && echo "ce cpu" || echo "cpu ce"); do
		if [ $side = ce ]; then load; else load test_no_copy_engine=1; fi
		want=model
		[ $side = cpu ] && want=none
		expect_eq "the $side side scrubs with: $want" $want \
			"$(sed -n 's/^copy_engine: \([a-z]*\).*/\1/p' /sys/kernel/debug/nvrs/$mbdf/info)"
		scrub_once >>/tmp/s.$side
		unload
	done
	r=$((r + 1))
done
n=$(spread </tmp/s.ce)
a=$(spread </tmp/s.cpu)
pp=$(paired /tmp/s.ce /tmp/s.cpu)
check "scrub on the model measured" test -n "$n" -a -n "$a" -a -n "$pp" \
	-a "$(wc -l </tmp/s.ce)" = "$ROUNDS" -a "$(wc -l </tmp/s.cpu)" = "$ROUNDS"
if [ -n "$n" ] && [ -n "$a" ]; then
	set -- $n $a
	line "scrub_model_free_16m" "$1" "$4" "rounds=$ROUNDS $pp $(minmax nvrs $2 $3) $(minmax anchor $5 $6) nvrs_is=copy_engine anchor_is=cpu_through_bar1"
fi

done_testing
