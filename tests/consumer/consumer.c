// SPDX-License-Identifier: GPL-2.0
/*
 * nvrs_consumer: a test module that uses nvrs the way an in-kernel RDMA NIC
 * driver does, through include/nv-p2p.h and nvrs's Module.symvers only.
 *
 * It binds QEMU's edu device (1234:11e8), which stands in for the NIC: edu
 * can DMA up to 4096 bytes per command between its internal buffer and any
 * bus address. A test writes commands to debugfs nvrs_consumer/ctl; each
 * runs in the writer's process context (as an RDMA driver's ioctl would), so
 * nvidia_p2p_get_pages() finds that process's GPU allocations. The write
 * returns the command's errno; reading ctl gives the last command's reply.
 *
 *   pin S VA LEN           nvidia_p2p_get_pages() into slot S (0..15)
 *   ppin S VA LEN [FLAGS]  nvidia_p2p_get_pages_persistent()
 *   map S [PEER]           nvidia_p2p_dma_map_pages() for edu, or for the
 *                          PCI function named PEER (e.g. 0000:04:00.0)
 *   unmap S                nvidia_p2p_dma_unmap_pages()
 *   put S                  put_pages / put_pages_persistent
 *   dma S OFF PATTERN      edu writes 2 KiB of PATTERN into the pinned GPU
 *                          memory at OFF through the DMA mapping, reads it
 *                          back by DMA and through a CPU mapping of the
 *                          page's physical address, and compares
 *   status S               slot state and how often its callback fired
 *   slowpin S VA LEN MS    pin whose free callback sleeps MS ms (as a NIC
 *                          driver quiescing its queues would)
 *   nvpin S VA LEN         pin as NVIDIA's own consumers do: the free
 *                          callback frees the table
 *                          (nvidia_p2p_free_page_table) and the consumer
 *                          never puts it. The other pins' callbacks leave
 *                          the table to a later put (putold, stalekeep)
 *   pinmany VA LEN N       N more pins of [VA, VA + LEN) outside the slots
 *                          (at most 2048 in all), each with a callback that
 *                          counts and blocks as the slots' do (cbblock)
 *   putmany                put the pins of pinmany that were not revoked;
 *                          "putmany put P revoked R"
 *   incb S                 whether S's free callback is running right now
 *   cbctx S                where S's last free callback ran: in an exiting
 *                          task (its mm's teardown, the MMU notifier's SRCU
 *                          read section when nvrs runs it from there) and/or
 *                          in a workqueue worker
 *   cbblock                free callbacks from now on block until cbrelease
 *                          (a consumer stuck in its callback)
 *   cbrelease              lets blocked free callbacks return, and later
 *                          ones run unblocked
 *   cpumap S               map the pinned first page for the CPU through its
 *                          physical address, as gdrdrv does for user space
 *   keep S                 remember S's table and mapping pointers (the
 *                          stale-pointer tests replay them later)
 *   putold S               put_pages / put_pages_persistent of the kept table
 *   unmapold S             dma_unmap_pages of the kept mapping, for edu
 *   unmapwith S PEER       dma_unmap_pages of S's mapping naming PEER (a PCI
 *                          function other than the one it was mapped for)
 *   stalekeep S            move S's table into the stale pool: S's pin must
 *                          have been revoked (its free callback returned)
 *                          and not put; the pool holds 64, the oldest is
 *                          put (the consumer's late put) to make room
 *   stalecheck [VA LEN N]  with VA LEN N: pin and put [VA, VA + LEN) N
 *                          times first, the last pin live during the check;
 *                          then dma_map_pages through every kept table must
 *                          fail and no live pin of the consumer may have a
 *                          kept table's address
 *   staledrop              put every kept table (put_pages through it must
 *                          return 0 and end no live pin) and empty the pool
 *   stalestat              the pool's counts; every table that pin, ppin,
 *                          slowpin, soakpin, stalewrap and stalecheck get
 *                          is compared with the kept ones ("named")
 *   stalereplay VA LEN N   N x: pin [VA, VA + LEN), map it for edu, replay
 *                          every stale table and mapping pointer of earlier
 *                          rounds against put_pages / dma_unmap_pages, and
 *                          count the live pins that were hit (runs without
 *                          the ctl lock, so several can run at once)
 *   rsync                  the rsync registration matrix
 *   soakpin S VA LEN       pin like a gdrdrv region: its free callback takes
 *                          the slot's own lock, and soakput takes that lock
 *                          only around its bookkeeping, never across
 *                          nvidia_p2p_put_pages() (which waits for a running
 *                          callback)
 *   soakmap S / soakunmap S / soakput S
 *                          map, unmap, put such a pin (each may find it
 *                          revoked meanwhile)
 *   callbacks              free callbacks fired since load, in all
 *   early                  free callbacks that fired before get_pages had
 *                          handed their pin's table to the consumer (NVIDIA's
 *                          PR #557 race: there must never be one)
 *   rawput VA PTR P        put_pages (P = 0) or put_pages_persistent (P = 1)
 *                          of table pointer PTR: a raw value, or for PTR < 16
 *                          slot PTR's (possibly stale) table (fuzzing)
 *   rawmap PTR             dma_map_pages of table pointer PTR for edu (as
 *                          above); unmapped again if it succeeds
 *   rawunmap PTR MAP       dma_unmap_pages of table PTR and mapping MAP for
 *                          edu (MAP < 16: slot MAP's, possibly stale, mapping)
 *   benchpin VA LEN N [SPAN]
 *                          N x (get_pages + put_pages) of [VA, VA + LEN), or
 *                          with SPAN of the LEN pieces of [VA, VA + SPAN) in
 *                          turn; and the table's entries and contiguous runs
 *   benchgup UVA LEN N [SPAN]
 *                          the same with pin_user_pages + unpin of user
 *                          memory: the anchor for benchpin
 *   benchmap S N WHAT      N x a DMA mapping of slot S's table for edu and
 *                          its unmapping, made by nvrs (WHAT "nvrs": dma_map
 *                          / dma_unmap_pages) or with one dma_map_resource
 *                          per physically contiguous run ("runs") or per
 *                          64 KiB entry ("pages"); and the table's entries
 *                          and contiguous runs
 *   badinput VA LEN        the bad-input matrix (needs a live pin of
 *                          [VA, VA + LEN) in slot 15)
 *
 * The free callback only records that it fired and drops the slot's view of
 * the table: it takes no lock that the ctl path holds while calling into
 * nvrs, so revocation can never deadlock against a concurrent command.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/iopoll.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <nv-p2p.h>
#include <nvrs.h>

#include "consumer.h"

#define EDU_VENDOR		0x1234
#define EDU_DEVICE		0x11e8
#define EDU_DMA_SRC		0x80
#define EDU_DMA_DST		0x88
#define EDU_DMA_COUNT		0x90
#define EDU_DMA_CMD		0x98
#define EDU_DMA_RUN		BIT(0)
#define EDU_DMA_TO_RAM		BIT(1)
#define NSLOTS			16
#define REPLY_SIZE		2048

struct slot {
	/* As returned by nvrs; kept after a put or revocation (stale-pointer tests). */
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;
	struct pci_dev *peer;
	u64 va, len;
	bool persistent;
	bool live;			/* pinned and not revoked or put */
	bool nv_protocol;		/* nvpin: the callback frees the table */
	bool put_done;			/* put by the consumer since the last pin */
	atomic_t callbacks;
	atomic_t in_callback;
	atomic_t cb_exiting, cb_worker;	/* context of the last callback */
	unsigned int cb_delay_ms;
	/* get_pages's out parameter: NULL until nvrs hands the table over */
	struct nvidia_p2p_page_table *new_pt;
	/*
	 * Held by a pin command from get_pages until it has read the table;
	 * the free callback waits for it, as a real driver's callback waits for
	 * the setup it races with (the table is invalid once the callback
	 * returns).
	 */
	struct mutex pinning;
	void __iomem *cpu;		/* cpumap */
	/* keep: pointers remembered for the stale-pointer tests */
	struct nvidia_p2p_page_table *old_pt;
	struct nvidia_p2p_dma_mapping *old_map;
	u64 old_va;
	bool old_persistent;
	/* soak: a gdrdrv-style region lock, taken by the free callback */
	struct mutex region;
	bool soak_live;
	struct nvidia_p2p_page_table *soak_pt;
	struct nvidia_p2p_dma_mapping *soak_map;
	u64 soak_va;
};

static atomic64_t total_callbacks = ATOMIC64_INIT(0);
static atomic64_t early_callbacks = ATOMIC64_INIT(0);
/* cbblock: free callbacks wait for cb_release (completed by cbrelease). */
static atomic_t cb_block = ATOMIC_INIT(0);
static DECLARE_COMPLETION(cb_release);

struct consumer {
	struct pci_dev *edu;
	void __iomem *regs;
	void *buf;
	dma_addr_t buf_dma;
	struct mutex lock;		/* slots, reply, edu commands */
	struct slot slots[NSLOTS];
	char reply[REPLY_SIZE];
	size_t reply_len;
	struct dentry *dir;
};

static struct consumer *con;

struct pci_dev *consumer_edu(void)
{
	return con->edu;
}

void reply(const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	con->reply_len += vscnprintf(con->reply + con->reply_len,
				     REPLY_SIZE - con->reply_len, fmt, args);
	va_end(args);
}

static void free_callback(void *data)
{
	struct slot *s = data;

	/* Before get_pages returned the table: the consumer cannot know what is revoked. */
	if (!READ_ONCE(s->new_pt)) {
		pr_err("free callback before get_pages handed out the table\n");
		atomic64_inc(&early_callbacks);
	}
	/* Checked first: an early callback must not be hidden by the wait. */
	mutex_lock(&s->pinning);
	mutex_unlock(&s->pinning);
	atomic_set(&s->in_callback, 1);
	atomic_set(&s->cb_exiting, !!(current->flags & PF_EXITING));
	atomic_set(&s->cb_worker, !!(current->flags & PF_WQ_WORKER));
	/* A driver quiescing its queues; nvrs must not unmap under it. */
	if (s->cb_delay_ms)
		msleep(s->cb_delay_ms);
	if (atomic_read(&cb_block))
		wait_for_completion(&cb_release);
	atomic_set(&s->in_callback, 0);
	/* nvrs frees the table and its DMA mappings once we return. */
	atomic_inc(&s->callbacks);
	atomic64_inc(&total_callbacks);
	WRITE_ONCE(s->live, false);
	/* NVIDIA's protocol: the table is the callback's to free, and never put. */
	if (s->nv_protocol)
		nvidia_p2p_free_page_table(READ_ONCE(s->pt));
}

/*
 * pinmany: many pins of one range, for the removal tests (more blocked
 * callbacks than a work queue runs at once).
 */
#define MANY_MAX		2048

static struct {
	struct nvidia_p2p_page_table *pt[MANY_MAX];
	u64 va;
	unsigned int n;
	atomic_t revoked[MANY_MAX];
} many;

static void many_callback(void *data)
{
	unsigned int i = (uintptr_t)data;

	if (atomic_read(&cb_block))
		wait_for_completion(&cb_release);
	atomic_set(&many.revoked[i], 1);
	atomic64_inc(&total_callbacks);
}

static int cmd_pinmany(u64 va, u64 len, u64 n)
{
	unsigned int i;
	int ret;

	if (!n || n > MANY_MAX - many.n || (many.n && va != many.va))
		return -EINVAL;
	many.va = va;
	for (i = 0; i < n; i++) {
		unsigned int k = many.n;

		atomic_set(&many.revoked[k], 0);
		ret = nvidia_p2p_get_pages(0, 0, va, len, &many.pt[k],
					   many_callback, (void *)(uintptr_t)k);
		if (ret)
			return ret;
		many.n++;
	}
	reply("pinmany %u\n", many.n);
	return 0;
}

static int cmd_putmany(void)
{
	unsigned int i, put = 0, revoked = 0;

	for (i = 0; i < many.n; i++) {
		if (atomic_read(&many.revoked[i])) {
			revoked++;
			continue;
		}
		/* A revocation in flight is waited for; the put then returns 0. */
		if (!nvidia_p2p_put_pages(0, 0, many.va, many.pt[i]))
			put++;
	}
	reply("putmany put %u revoked %u\n", put, revoked);
	many.n = 0;
	return 0;
}

/* One edu DMA of @count bytes (at most EDU_BUF_SIZE); @to_ram: edu -> bus. */
int edu_dma(u64 src, u64 dst, u32 count, bool to_ram)
{
	u32 cmd;

	if (!count || count > EDU_BUF_SIZE)
		return -EINVAL;
	writeq(src, con->regs + EDU_DMA_SRC);
	writeq(dst, con->regs + EDU_DMA_DST);
	writeq(count, con->regs + EDU_DMA_COUNT);
	writeq(EDU_DMA_RUN | (to_ram ? EDU_DMA_TO_RAM : 0),
	       con->regs + EDU_DMA_CMD);
	/* edu completes a transfer 100 ms of virtual time after the command. */
	return readl_poll_timeout(con->regs + EDU_DMA_CMD, cmd,
				  !(cmd & EDU_DMA_RUN), 1000, 5 * USEC_PER_SEC);
}

static struct slot *get_slot(unsigned int i)
{
	return i < NSLOTS ? &con->slots[i] : NULL;
}

/*
 * The stale pool: tables of revoked pins that the consumer keeps and puts
 * late, as a driver whose teardown lags behind the free callback does. nvrs
 * must keep each such address from naming any newer pin until it is put,
 * however many pins end meanwhile (the quarantine ring holds 8192). Entries
 * change under con->lock and stale.lock; stale_new_pin() reads them under
 * stale.lock alone (the soak pins run without con->lock), the ctl commands
 * under con->lock alone. stale.lock is a leaf: no nvrs call runs under it.
 */
#define STALE_POOL		64

struct stale_table {
	struct nvidia_p2p_page_table *pt;
	u64 va;
};

static struct {
	struct mutex lock;
	struct stale_table kept[STALE_POOL];	/* oldest first */
	unsigned int count;
	/* Since load. Violations: named, mapped, put_failed, ended. */
	atomic64_t kept_total, checks, pins, named, mapped, put_failed, ended;
} stale;

static bool stale_is_kept(const struct nvidia_p2p_page_table *pt)
{
	unsigned int i;

	for (i = 0; i < stale.count; i++)
		if (stale.kept[i].pt == pt)
			return true;
	return false;
}

/* Every table nvrs hands the consumer: a kept address must not come back. */
static void stale_new_pin(const struct nvidia_p2p_page_table *pt)
{
	bool named;

	mutex_lock(&stale.lock);
	named = stale_is_kept(pt);
	mutex_unlock(&stale.lock);
	atomic64_inc(&stale.pins);
	if (named) {
		atomic64_inc(&stale.named);
		pr_err("stale: a new pin got the kept table %p\n", pt);
	}
}

static int cmd_pin_locked(struct slot *s, u64 va, u64 len, bool persistent,
			  u32 flags)
{
	struct nvidia_p2p_page_table *pt = NULL;
	int ret;

	if (READ_ONCE(s->live))
		return -EBUSY;
	s->map = NULL;
	s->put_done = false;
	atomic_set(&s->callbacks, 0);
	WRITE_ONCE(s->new_pt, NULL);
	if (persistent) {
		ret = nvidia_p2p_get_pages_persistent(va, len, &pt, flags);
	} else {
		ret = nvidia_p2p_get_pages(0, 0, va, len, &s->new_pt,
					   free_callback, s);
		pt = READ_ONCE(s->new_pt);
	}
	if (ret)
		return ret;
	if (!NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(pt) ||
	    pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB) {
		reply("incompatible page table version 0x%x size %u\n",
		      pt->version, pt->page_size);
		if (persistent)
			nvidia_p2p_put_pages_persistent(va, pt, 0);
		else
			nvidia_p2p_put_pages(0, 0, va, pt);
		return -EFAULT;
	}
	stale_new_pin(pt);
	s->va = va;
	s->len = len;
	s->persistent = persistent;
	WRITE_ONCE(s->pt, pt);
	WRITE_ONCE(s->live, true);
	reply("pinned va 0x%llx len 0x%llx entries %u version 0x%x phys0 0x%llx uuid %16phN\n",
	      va, len, pt->entries, pt->version, pt->pages[0]->physical_address,
	      pt->gpu_uuid);
	return 0;
}

/* A pin command: the slot's free callback waits until it has read the table. */
static int cmd_pin(struct slot *s, u64 va, u64 len, bool persistent, u32 flags)
{
	int ret;

	mutex_lock(&s->pinning);
	ret = cmd_pin_locked(s, va, len, persistent, flags);
	mutex_unlock(&s->pinning);
	return ret;
}

static struct pci_dev *find_peer(const char *name)
{
	unsigned int domain, bus, dev, fn;

	if (!name || !strcmp(name, "edu"))
		return pci_dev_get(con->edu);
	if (sscanf(name, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
		return NULL;
	return pci_get_domain_bus_and_slot(domain, bus, PCI_DEVFN(dev, fn));
}

static int cmd_map(struct slot *s, const char *peer_name)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	struct nvidia_p2p_dma_mapping *map = NULL;
	struct pci_dev *peer;
	u32 i, runs = 1;
	int ret;

	if (!READ_ONCE(s->live))
		return -ENOENT;
	if (s->map)
		return -EBUSY;
	peer = find_peer(peer_name);
	if (!peer)
		return -ENODEV;
	ret = nvidia_p2p_dma_map_pages(peer, pt, &map);
	if (ret) {
		pci_dev_put(peer);
		return ret;
	}
	if (!NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(map) ||
	    map->entries != pt->entries || map->pci_dev != peer) {
		nvidia_p2p_dma_unmap_pages(peer, pt, map);
		pci_dev_put(peer);
		return -EFAULT;
	}
	for (i = 1; i < map->entries; i++)
		if (map->dma_addresses[i] != map->dma_addresses[i - 1] + GPU_PAGE)
			runs++;
	s->map = map;
	s->peer = peer;
	reply("mapped for %s entries %u dma0 0x%llx runs %u\n", pci_name(peer),
	      map->entries, map->dma_addresses[0], runs);
	return 0;
}

static int cmd_unmap(struct slot *s)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	int ret = 0;

	if (!s->peer)
		return -ENOENT;
	/* After a revocation nvrs has unmapped already and returns 0. */
	ret = nvidia_p2p_dma_unmap_pages(s->peer, pt, s->map);
	s->map = NULL;
	pci_dev_put(s->peer);
	s->peer = NULL;
	return ret;
}

static int cmd_put(struct slot *s)
{
	/*
	 * The table pointer may be stale after a revocation or an earlier put
	 * (a double put): nvrs returns 0.
	 */
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	int ret;

	if (s->peer)
		cmd_unmap(s);
	if (s->cpu) {
		iounmap(s->cpu);
		s->cpu = NULL;
	}
	if (s->persistent)
		ret = nvidia_p2p_put_pages_persistent(s->va, pt, 0);
	else
		ret = nvidia_p2p_put_pages(0, 0, s->va, pt);
	WRITE_ONCE(s->live, false);
	s->put_done = true;
	return ret;
}

/*
 * edu writes 2 KiB of @pattern to @iova, reads it back by DMA, and the CPU
 * reads it at @phys through the aperture; the kernel log line lets
 * tests/vm/run.py find the bytes in the GPU's backing file.
 */
int edu_roundtrip(u64 iova, u64 phys, u32 pattern)
{
	u32 *words = con->buf, i;
	void __iomem *cpu;
	int ret;

	for (i = 0; i < EDU_BUF_SIZE / 4; i++)
		words[i] = pattern + i;
	ret = edu_dma(con->buf_dma, EDU_BUF, EDU_BUF_SIZE, false);
	if (!ret)
		ret = edu_dma(EDU_BUF, iova, EDU_BUF_SIZE, true);
	if (ret)
		return ret;
	memset(words, 0, EDU_BUF_SIZE);
	ret = edu_dma(iova, EDU_BUF, EDU_BUF_SIZE, false);
	if (!ret)
		ret = edu_dma(EDU_BUF, con->buf_dma, EDU_BUF_SIZE, true);
	if (ret)
		return ret;
	for (i = 0; i < EDU_BUF_SIZE / 4; i++)
		if (words[i] != pattern + i) {
			reply("dma readback mismatch at word %u: 0x%x\n", i, words[i]);
			return -EIO;
		}
	/* The guest CPU sees the same bytes through the aperture. */
	cpu = ioremap_wc(phys, EDU_BUF_SIZE);
	if (!cpu)
		return -ENOMEM;
	for (i = 0; i < EDU_BUF_SIZE / 4; i++)
		if (readl(cpu + 4 * i) != pattern + i)
			break;
	iounmap(cpu);
	if (i != EDU_BUF_SIZE / 4) {
		reply("cpu readback mismatch at word %u\n", i);
		return -EIO;
	}
	pr_info("wrote pattern 0x%08x at phys 0x%llx via iova 0x%llx\n",
		pattern, phys, iova);
	return 0;
}

static int cmd_dma(struct slot *s, u64 off, u32 pattern)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	u64 iova, phys;
	u32 entry;
	int ret;

	if (!READ_ONCE(s->live) || !s->map)
		return -ENOENT;
	if (off % EDU_BUF_SIZE || off >= s->len)
		return -EINVAL;
	entry = off / GPU_PAGE;
	iova = s->map->dma_addresses[entry] + off % GPU_PAGE;
	phys = pt->pages[entry]->physical_address + off % GPU_PAGE;
	ret = edu_roundtrip(iova, phys, pattern);
	if (!ret)
		reply("dma ok phys 0x%llx iova 0x%llx\n", phys, iova);
	return ret;
}

/* expect(): one line of the bad-input matrix. */
static int bad_fail;

static void expect(const char *what, int got, int want)
{
	if (got != want)
		bad_fail++;
	reply("%s %s: got %d, want %d\n", got == want ? "ok" : "FAIL", what,
	      got, want);
}

static void dummy_cb(void *data)
{
}

static int cmd_cpumap(struct slot *s)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);

	if (!READ_ONCE(s->live) || s->cpu)
		return -ENOENT;
	s->cpu = ioremap_wc(pt->pages[0]->physical_address, GPU_PAGE);
	if (!s->cpu)
		return -ENOMEM;
	reply("cpumap phys 0x%llx word0 0x%08x\n",
	      pt->pages[0]->physical_address, readl(s->cpu));
	return 0;
}

static int cmd_keep(struct slot *s)
{
	s->old_pt = READ_ONCE(s->pt);
	s->old_map = s->map;
	s->old_va = s->va;
	s->old_persistent = s->persistent;
	reply("kept table %p mapping %p\n", s->old_pt, s->old_map);
	return 0;
}

static int cmd_putold(struct slot *s)
{
	if (s->old_pt == READ_ONCE(s->pt))
		s->put_done = true;
	if (s->old_persistent)
		return nvidia_p2p_put_pages_persistent(s->old_va, s->old_pt, 0);
	return nvidia_p2p_put_pages(0, 0, s->old_va, s->old_pt);
}

static int cmd_unmapwith(struct slot *s, const char *peer_name)
{
	struct pci_dev *peer = find_peer(peer_name);
	int ret;

	if (!peer || !s->peer)
		return -ENOENT;
	/* nvrs unmaps for the device the mapping was made for, as NVIDIA does. */
	ret = nvidia_p2p_dma_unmap_pages(peer, READ_ONCE(s->pt), s->map);
	pci_dev_put(peer);
	if (!ret) {
		s->map = NULL;
		pci_dev_put(s->peer);
		s->peer = NULL;
	}
	return ret;
}

static int cmd_unmapold(struct slot *s)
{
	return nvidia_p2p_dma_unmap_pages(con->edu, s->old_pt, s->old_map);
}

/*
 * stalereplay: each round pins the range, maps it for edu, then replays the
 * (table, mapping) pointers of every earlier round, all stale by then: none
 * may end the live pin or unmap its live mapping. A victim shows as a pin
 * whose mapping can no longer be found, or which can no longer be mapped.
 */
#define STALE_KEEP 64

static int cmd_stalereplay(u64 va, u64 len, u64 n)
{
	struct nvidia_p2p_page_table **old_pt;
	struct nvidia_p2p_dma_mapping **old_map;
	u64 i, victims = 0, stale = 0, rounds = 0;
	unsigned int kept = 0, k;
	int ret = 0;

	old_pt = kcalloc(STALE_KEEP, sizeof(*old_pt), GFP_KERNEL);
	old_map = kcalloc(STALE_KEEP, sizeof(*old_map), GFP_KERNEL);
	if (!old_pt || !old_map) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct nvidia_p2p_page_table *pt = NULL;
		struct nvidia_p2p_dma_mapping *map = NULL, *probe = NULL;

		ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, dummy_cb, NULL);
		if (ret)
			break;
		ret = nvidia_p2p_dma_map_pages(con->edu, pt, &map);
		if (ret) {
			nvidia_p2p_put_pages(0, 0, va, pt);
			break;
		}
		for (k = 0; k < kept; k++) {
			nvidia_p2p_dma_unmap_pages(con->edu, old_pt[k], old_map[k]);
			nvidia_p2p_put_pages(0, 0, va, old_pt[k]);
			stale += 2;
		}
		/* Still live: a second mapping of the table must succeed... */
		if (nvidia_p2p_dma_map_pages(con->edu, pt, &probe)) {
			victims++;
		} else {
			nvidia_p2p_dma_unmap_pages(con->edu, pt, probe);
			/* ...and the first must still be intact. */
			if (!NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(map) ||
			    !map->entries || !map->dma_addresses)
				victims++;
		}
		nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
		nvidia_p2p_put_pages(0, 0, va, pt);
		old_pt[kept % STALE_KEEP] = pt;
		old_map[kept % STALE_KEEP] = map;
		kept = min_t(unsigned int, kept + 1, STALE_KEEP);
		rounds++;
		cond_resched();
	}
	mutex_lock(&con->lock);
	con->reply_len = 0;
	reply("stalereplay rounds %llu stale %llu victims %llu\n", rounds,
	      stale, victims);
	mutex_unlock(&con->lock);
	if (!ret && victims)
		ret = -EIO;
out:
	kfree(old_pt);
	kfree(old_map);
	return ret;
}

/*
 * Pins and puts [va, va + len) up to @n times, stopping early at a pin whose
 * table is @stop; the last pin stays live in *@newest. Every new table goes
 * through stale_new_pin(). Returns the number of pins made or an errno (then
 * no pin is left).
 */
static atomic_t churn_cbs = ATOMIC_INIT(0);

static void churn_cb(void *data)
{
	atomic_inc(&churn_cbs);
}

static s64 stale_churn(u64 va, u64 len, u64 n,
		       const struct nvidia_p2p_page_table *stop,
		       struct nvidia_p2p_page_table **newest)
{
	struct nvidia_p2p_page_table *pt = NULL;
	u64 i;
	int ret;

	for (i = 0; i < n; i++) {
		if (pt)
			nvidia_p2p_put_pages(0, 0, va, pt);
		pt = NULL;
		ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, churn_cb, NULL);
		if (ret)
			return ret;
		stale_new_pin(pt);
		if (pt == stop) {
			i++;
			break;
		}
		cond_resched();
	}
	*newest = pt;
	return i;
}

/*
 * stalewrap SLOT VA LEN N: the slot's kept (table, VA) belong to a pin that
 * was revoked (free callback fired); VA has been allocated again. Pin and put
 * VA up to N times, until a new pin's table has the kept table's address.
 * Then, with the newest pin live and mapped for edu, the stale calls a
 * consumer makes after a revocation must not reach it: dma_map of the kept
 * table is refused (-EINVAL), put of the kept (VA, table) returns 0 and the
 * newest pin stays live (it can be mapped again) with no callback fired.
 */
static int cmd_stalewrap(struct slot *s, u64 va, u64 len, u64 n)
{
	struct nvidia_p2p_page_table *old = s->old_pt, *pt = NULL;
	struct nvidia_p2p_dma_mapping *map = NULL, *old_map = NULL, *probe = NULL;
	int ret, map_ret, put_ret, probe_ret;
	s64 pins;

	if (!old || s->old_persistent || !atomic_read(&s->callbacks))
		return -ENOENT;
	if (va != s->old_va)
		return -EXDEV;
	if (!n)
		return -EINVAL;
	atomic_set(&churn_cbs, 0);
	pins = stale_churn(va, len, n, old, &pt);
	if (pins < 0)
		return pins;
	ret = nvidia_p2p_dma_map_pages(con->edu, pt, &map);
	if (ret) {
		nvidia_p2p_put_pages(0, 0, va, pt);
		return ret;
	}
	map_ret = nvidia_p2p_dma_map_pages(con->edu, old, &old_map);
	if (!map_ret)
		nvidia_p2p_dma_unmap_pages(con->edu, old, old_map);
	put_ret = nvidia_p2p_put_pages(0, 0, s->old_va, old);
	probe_ret = nvidia_p2p_dma_map_pages(con->edu, pt, &probe);
	if (!probe_ret)
		nvidia_p2p_dma_unmap_pages(con->edu, pt, probe);
	reply("stalewrap pins %lld same_table %d stale_map %d stale_put %d newest_map %d callbacks %d\n",
	      pins, pt == old, map_ret, put_ret, probe_ret,
	      atomic_read(&churn_cbs));
	nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
	nvidia_p2p_put_pages(0, 0, va, pt);
	/* The scenario judges the reply line (a failed write shows no reply). */
	return 0;
}

/* stalekeep: the slot's revoked table goes to the pool, which now owns it. */
static void stale_drop(unsigned int i);

static int cmd_stalekeep(struct slot *s)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);

	/* Revoked: the callback has returned, and nobody has put the table. */
	if (!pt || s->persistent || s->put_done || READ_ONCE(s->live) ||
	    !atomic_read(&s->callbacks) || atomic_read(&s->in_callback))
		return -ENOENT;
	if (stale_is_kept(pt))
		return -EEXIST;
	if (stale.count == STALE_POOL)
		stale_drop(0);
	mutex_lock(&stale.lock);
	stale.kept[stale.count++] = (struct stale_table){ .pt = pt, .va = s->va };
	mutex_unlock(&stale.lock);
	/* No other command of the slot may put it now (a put ends its reservation). */
	WRITE_ONCE(s->pt, NULL);
	if (s->old_pt == pt)
		s->old_pt = NULL;
	atomic64_inc(&stale.kept_total);
	reply("stalekeep %u of %d\n", stale.count, STALE_POOL);
	return 0;
}

/* Whether a live pin of a ctl slot has the table @pt. */
static bool stale_names_live(const struct nvidia_p2p_page_table *pt)
{
	unsigned int i;

	for (i = 0; i < NSLOTS; i++)
		if (READ_ONCE(con->slots[i].live) && READ_ONCE(con->slots[i].pt) == pt)
			return true;
	return false;
}

/* The ctl slots whose live pin edu can map right now, as a mask. */
static u32 stale_mappable(void)
{
	u32 mask = 0;
	unsigned int i;

	for (i = 0; i < NSLOTS; i++) {
		struct nvidia_p2p_page_table *pt = READ_ONCE(con->slots[i].pt);
		struct nvidia_p2p_dma_mapping *map = NULL;

		if (!READ_ONCE(con->slots[i].live) || !pt ||
		    nvidia_p2p_dma_map_pages(con->edu, pt, &map))
			continue;
		nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
		mask |= BIT(i);
	}
	return mask;
}

/*
 * The consumer's one put of kept entry @i, which leaves the pool: 0, and no
 * live pin of the consumer that could be mapped before can no longer be.
 */
static void stale_drop(unsigned int i)
{
	struct stale_table t = stale.kept[i];
	u32 before, lost;

	mutex_lock(&stale.lock);
	stale.count--;
	memmove(&stale.kept[i], &stale.kept[i + 1],
		(stale.count - i) * sizeof(stale.kept[0]));
	mutex_unlock(&stale.lock);
	before = stale_mappable();
	if (nvidia_p2p_put_pages(0, 0, t.va, t.pt)) {
		atomic64_inc(&stale.put_failed);
		pr_err("stale: put of kept table %p failed\n", t.pt);
	}
	lost = before & ~stale_mappable();
	if (lost) {
		atomic64_add(hweight32(lost), &stale.ended);
		pr_err("stale: put of kept table %p ended live pins 0x%x\n", t.pt, lost);
	}
}

static int cmd_stalecheck(unsigned int argc, u64 va, u64 len, u64 n)
{
	struct nvidia_p2p_page_table *newest = NULL;
	unsigned int i;
	s64 pins = 0;

	if (argc != 1 && (argc != 4 || !n))
		return -EINVAL;
	if (argc == 4) {
		pins = stale_churn(va, len, n, NULL, &newest);
		if (pins < 0)
			return pins;
	}
	for (i = 0; i < stale.count; i++) {
		struct nvidia_p2p_page_table *pt = stale.kept[i].pt;
		struct nvidia_p2p_dma_mapping *map = NULL;

		atomic64_inc(&stale.checks);
		/* Pins made since were compared already; this covers the others. */
		if (stale_names_live(pt)) {
			atomic64_inc(&stale.named);
			pr_err("stale: kept table %p names a live pin\n", pt);
		}
		if (!nvidia_p2p_dma_map_pages(con->edu, pt, &map)) {
			atomic64_inc(&stale.mapped);
			pr_err("stale: kept table %p was mapped\n", pt);
			nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
		}
	}
	if (newest)
		nvidia_p2p_put_pages(0, 0, va, newest);
	reply("stalecheck pins %lld kept %u\n", pins, stale.count);
	return 0;
}

static int cmd_staledrop(void)
{
	unsigned int n = stale.count;

	while (stale.count)
		stale_drop(0);
	reply("staledrop %u\n", n);
	return 0;
}

static int cmd_stalestat(void)
{
	reply("stalestat kept %u kept_total %lld checks %lld pins %lld named %lld mapped %lld put_failed %lld ended %lld\n",
	      stale.count, atomic64_read(&stale.kept_total),
	      atomic64_read(&stale.checks), atomic64_read(&stale.pins),
	      atomic64_read(&stale.named), atomic64_read(&stale.mapped),
	      atomic64_read(&stale.put_failed), atomic64_read(&stale.ended));
	return 0;
}

/*
 * mapmany SLOT N: maps the slot's table N more times for edu, checks every
 * mapping has the same entries as the table, and unmaps them all.
 */
static int cmd_mapmany(struct slot *s, u64 n)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	struct nvidia_p2p_dma_mapping **maps;
	u64 i, done = 0;
	int ret = 0;

	if (!READ_ONCE(s->live) || !n || n > 64)
		return -EINVAL;
	maps = kcalloc(n, sizeof(*maps), GFP_KERNEL);
	if (!maps)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		ret = nvidia_p2p_dma_map_pages(con->edu, pt, &maps[i]);
		if (!ret && maps[i]->entries != pt->entries)
			ret = -EFAULT;
		if (!ret)
			done++;
	}
	reply("mapmany %llu of %llu\n", done, n);
	for (i = 0; i < n; i++)
		if (maps[i])
			nvidia_p2p_dma_unmap_pages(con->edu, pt, maps[i]);
	kfree(maps);
	return ret;
}

/*
 * Soak: what gdrdrv does. The callback takes the region lock, marks the
 * region gone and frees the (no-op) table; the user paths take the region
 * lock for their bookkeeping and drop it before calling into nvrs, which may
 * wait for a running callback.
 */
static void soak_callback(void *data)
{
	struct slot *s = data;

	mutex_lock(&s->region);
	s->soak_live = false;
	s->soak_map = NULL;
	nvidia_p2p_free_page_table(s->soak_pt);
	mutex_unlock(&s->region);
	atomic64_inc(&total_callbacks);
}

static int cmd_soakpin(struct slot *s, u64 va, u64 len)
{
	struct nvidia_p2p_page_table *pt = NULL;
	int ret;

	mutex_lock(&s->region);
	if (s->soak_live) {
		mutex_unlock(&s->region);
		return -EBUSY;
	}
	/* The callback may fire as soon as get_pages returns: publish under the lock. */
	ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, soak_callback, s);
	if (!ret) {
		stale_new_pin(pt);
		s->soak_pt = pt;
		s->soak_va = va;
		s->soak_map = NULL;
		s->soak_live = true;
	}
	mutex_unlock(&s->region);
	return ret;
}

static int cmd_soakmap(struct slot *s)
{
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map = NULL;
	int ret;

	mutex_lock(&s->region);
	pt = s->soak_live && !s->soak_map ? s->soak_pt : NULL;
	mutex_unlock(&s->region);
	if (!pt)
		return -ENOENT;
	/* Stale if the callback fired meanwhile: nvrs returns -EINVAL. */
	ret = nvidia_p2p_dma_map_pages(con->edu, pt, &map);
	if (ret)
		return ret;
	mutex_lock(&s->region);
	if (s->soak_live && s->soak_pt == pt && !s->soak_map) {
		s->soak_map = map;
		map = NULL;
	}
	mutex_unlock(&s->region);
	/* Revoked meanwhile: nvrs unmapped it already, and this returns 0. */
	if (map)
		nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
	return 0;
}

static int cmd_soakunmap(struct slot *s)
{
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;

	mutex_lock(&s->region);
	pt = s->soak_pt;
	map = s->soak_map;
	s->soak_map = NULL;
	mutex_unlock(&s->region);
	return map ? nvidia_p2p_dma_unmap_pages(con->edu, pt, map) : -ENOENT;
}

static int cmd_soakput(struct slot *s)
{
	struct nvidia_p2p_page_table *pt;
	u64 va;

	mutex_lock(&s->region);
	pt = s->soak_live ? s->soak_pt : NULL;
	va = s->soak_va;
	s->soak_live = false;
	s->soak_map = NULL;
	mutex_unlock(&s->region);
	/* Unlocked: put waits for a callback in flight, which takes the lock. */
	return pt ? nvidia_p2p_put_pages(0, 0, va, pt) : -ENOENT;
}

/* Fuzzing: pointers that are raw values, or a slot's possibly stale ones. */
static void *fuzz_table(u64 v)
{
	return v < NSLOTS ? (void *)READ_ONCE(con->slots[v].pt) : (void *)(uintptr_t)v;
}

static int cmd_rawput(u64 va, u64 ptr, u64 persistent)
{
	if (ptr < NSLOTS)
		con->slots[ptr].put_done = true;
	if (persistent)
		return nvidia_p2p_put_pages_persistent(va, fuzz_table(ptr), 0);
	return nvidia_p2p_put_pages(0, 0, va, fuzz_table(ptr));
}

static int cmd_rawmap(u64 ptr)
{
	struct nvidia_p2p_page_table *pt = fuzz_table(ptr);
	struct nvidia_p2p_dma_mapping *map = NULL;
	int ret;

	ret = nvidia_p2p_dma_map_pages(con->edu, pt, &map);
	if (!ret)
		ret = nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
	return ret;
}

static int cmd_rawunmap(u64 ptr, u64 map)
{
	void *m = map < NSLOTS ? (void *)con->slots[map].map : (void *)(uintptr_t)map;

	return nvidia_p2p_dma_unmap_pages(con->edu, fuzz_table(ptr), m);
}

static int rsync_get(int *mode, void *data)
{
	return 0;
}

static void rsync_put(int mode, void *data)
{
}

static void rsync_wait(struct pci_dev *gpu, void *data)
{
}

static int cmd_rsync(void)
{
	nvidia_p2p_rsync_driver_t a = {
		.version = NVIDIA_P2P_RSYNC_DRIVER_VERSION,
		.get_relaxed_ordering_mode = rsync_get,
		.put_relaxed_ordering_mode = rsync_put,
		.wait_for_rsync = rsync_wait,
	}, b = a;

	bad_fail = 0;
	expect("register", nvidia_p2p_register_rsync_driver(&a, NULL), 0);
	expect("register a second", nvidia_p2p_register_rsync_driver(&b, NULL), -EBUSY);
	/* Unregistering a driver that never registered must not clear the registered one. */
	nvidia_p2p_unregister_rsync_driver(&b, NULL);
	expect("still registered", nvidia_p2p_register_rsync_driver(&b, NULL), -EBUSY);
	nvidia_p2p_unregister_rsync_driver(&a, NULL);
	expect("register after unregister", nvidia_p2p_register_rsync_driver(&b, NULL), 0);
	nvidia_p2p_unregister_rsync_driver(&b, NULL);
	return bad_fail ? -EIO : 0;
}

/* Physically contiguous runs of 64 KiB pages in @pt. */
static u32 table_runs(const struct nvidia_p2p_page_table *pt)
{
	u32 e, runs = 0;

	for (e = 0; e < pt->entries; e++)
		if (!e || pt->pages[e]->physical_address !=
			  pt->pages[e - 1]->physical_address + GPU_PAGE)
			runs++;
	return runs;
}

/*
 * The VA of the @i-th pin of a benchmark: @va itself when @span is 0, else
 * the @len-sized pieces of [@va, @va + @span) in turn.
 */
static u64 bench_va(u64 va, u64 len, u64 span, u64 i)
{
	return span ? va + (i * len) % span : va;
}

static int cmd_benchpin(u64 va, u64 len, u64 n, u64 span)
{
	struct nvidia_p2p_page_table *pt;
	u32 entries = 0, runs = 0;
	u64 i, v, t0, t;
	int ret;

	if (!n || !len || span % len)
		return -EINVAL;
	t0 = ktime_get_ns();
	for (i = 0; i < n; i++) {
		v = bench_va(va, len, span, i);
		ret = nvidia_p2p_get_pages(0, 0, v, len, &pt, dummy_cb, NULL);
		if (ret)
			return ret;
		ret = nvidia_p2p_put_pages(0, 0, v, pt);
		if (ret)
			return ret;
	}
	t = (ktime_get_ns() - t0) / n;
	/* The table's shape, from one more pin, outside the timing. */
	ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, dummy_cb, NULL);
	if (ret)
		return ret;
	entries = pt->entries;
	runs = table_runs(pt);
	ret = nvidia_p2p_put_pages(0, 0, va, pt);
	if (ret)
		return ret;
	reply("benchpin len %llu ns_per_op %llu entries %u runs %u\n", len, t,
	      entries, runs);
	return 0;
}

static int cmd_benchgup(u64 uva, u64 len, u64 n, u64 span)
{
	u64 npages = len >> PAGE_SHIFT, i, t0;
	struct page **pages;
	long got;
	int ret = 0;

	if (!n || !npages || npages > INT_MAX || span % len)
		return -EINVAL;
	pages = kvmalloc_array(npages, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	t0 = ktime_get_ns();
	for (i = 0; i < n && !ret; i++) {
		got = pin_user_pages_fast(bench_va(uva, len, span, i), npages,
					  FOLL_WRITE | FOLL_LONGTERM, pages);
		if (got > 0)
			unpin_user_pages(pages, got);
		if (got != npages)
			ret = got < 0 ? got : -EFAULT;
	}
	if (!ret)
		reply("benchgup len %llu ns_per_op %llu pages %llu\n", len,
		      (ktime_get_ns() - t0) / n, npages);
	kvfree(pages);
	return ret;
}

/* One DMA mapping made by a benchmark anchor: @len bytes at @dma. */
struct bench_run {
	dma_addr_t dma;
	u64 len;
};

/*
 * The same mapping as nvidia_p2p_dma_map_pages() makes of @pt for edu (one
 * DMA address per 64 KiB entry, in @addrs) with the DMA API directly: one
 * dma_map_resource() per physically contiguous run of entries if @per_run,
 * else one per entry. Then unmaps it again.
 */
static int bench_map_anchor(const struct nvidia_p2p_page_table *pt,
			    dma_addr_t *addrs, struct bench_run *runs,
			    bool per_run)
{
	struct device *dev = &con->edu->dev;
	u32 e = 0, first, k, nruns = 0;
	u64 phys, len;
	int ret = 0;

	while (e < pt->entries) {
		first = e;
		phys = pt->pages[e]->physical_address;
		len = GPU_PAGE;
		while (per_run && ++e < pt->entries &&
		       pt->pages[e]->physical_address == phys + len)
			len += GPU_PAGE;
		if (!per_run)
			e++;
		runs[nruns].dma = dma_map_resource(dev, phys, len,
						   DMA_BIDIRECTIONAL, 0);
		if (dma_mapping_error(dev, runs[nruns].dma)) {
			ret = -EIO;
			break;
		}
		runs[nruns].len = len;
		for (k = first; k < e; k++)
			addrs[k] = runs[nruns].dma + (u64)(k - first) * GPU_PAGE;
		nruns++;
	}
	for (k = 0; k < nruns; k++)
		dma_unmap_resource(dev, runs[k].dma, runs[k].len,
				   DMA_BIDIRECTIONAL, 0);
	return ret;
}

/*
 * benchmap S N WHAT: N x one way of DMA-mapping slot S's table for edu and
 * unmapping it again. WHAT is "nvrs" (nvidia_p2p_dma_map_pages() and
 * dma_unmap_pages()), "runs" (one dma_map_resource() per physically
 * contiguous run of the table) or "pages" (one dma_map_resource() per 64 KiB
 * entry). The anchors' address arrays are allocated once, outside the
 * timing: they measure the DMA API alone.
 */
static int cmd_benchmap(struct slot *s, u64 n, const char *what)
{
	struct nvidia_p2p_page_table *pt = READ_ONCE(s->pt);
	struct nvidia_p2p_dma_mapping *map;
	struct bench_run *runs = NULL;
	dma_addr_t *addrs = NULL;
	bool nvrs = !strcmp(what, "nvrs"), per_run = !strcmp(what, "runs");
	u64 i, t0, t;
	int ret = 0;

	if (!READ_ONCE(s->live) || !n)
		return -ENOENT;
	if (!nvrs && !per_run && strcmp(what, "pages"))
		return -EINVAL;
	if (!nvrs) {
		addrs = kvmalloc_array(pt->entries, sizeof(*addrs), GFP_KERNEL);
		runs = kvmalloc_array(pt->entries, sizeof(*runs), GFP_KERNEL);
		if (!addrs || !runs) {
			ret = -ENOMEM;
			goto out;
		}
	}
	t0 = ktime_get_ns();
	for (i = 0; i < n; i++) {
		if (nvrs) {
			ret = nvidia_p2p_dma_map_pages(con->edu, pt, &map);
			if (ret)
				goto out;
			nvidia_p2p_dma_unmap_pages(con->edu, pt, map);
		} else {
			ret = bench_map_anchor(pt, addrs, runs, per_run);
			if (ret)
				goto out;
		}
	}
	t = (ktime_get_ns() - t0) / n;
	reply("benchmap len %llu what %s ns_per_op %llu entries %u runs %u\n",
	      (u64)pt->entries * GPU_PAGE, what, t, pt->entries, table_runs(pt));
out:
	kvfree(runs);
	kvfree(addrs);
	return ret;
}

static int cmd_badinput(u64 va, u64 len)
{
	struct nvidia_p2p_page_table *pt = NULL;
	struct nvidia_p2p_dma_mapping *map = NULL;
	struct slot *s = &con->slots[NSLOTS - 1];

	bad_fail = 0;
	expect("unaligned va", nvidia_p2p_get_pages(0, 0, va + 4096, len, &pt, dummy_cb, NULL), -EINVAL);
	expect("unaligned length", nvidia_p2p_get_pages(0, 0, va, len - 4096, &pt, dummy_cb, NULL), -EINVAL);
	expect("zero length", nvidia_p2p_get_pages(0, 0, va, 0, &pt, dummy_cb, NULL), -EINVAL);
	expect("overflow", nvidia_p2p_get_pages(0, 0, ~0ULL - 0xffff, 2 * GPU_PAGE, &pt, dummy_cb, NULL), -EINVAL);
	expect("NULL callback", nvidia_p2p_get_pages(0, 0, va, len, &pt, NULL, NULL), -EINVAL);
	expect("NULL table pointer", nvidia_p2p_get_pages(0, 0, va, len, NULL, dummy_cb, NULL), -EINVAL);
	expect("unknown va", nvidia_p2p_get_pages(0, 0, 0x100000, GPU_PAGE, &pt, dummy_cb, NULL), -EINVAL);
	expect("range past the allocation", nvidia_p2p_get_pages(0, 0, va, len + 1024 * GPU_PAGE, &pt, dummy_cb, NULL), -EINVAL);
	expect("persistent NULL table pointer", nvidia_p2p_get_pages_persistent(va, len, NULL, 0), -EINVAL);
	expect("persistent bad flags", nvidia_p2p_get_pages_persistent(va, len, &pt, 0x80), -EINVAL);
	expect("persistent FORCE_BAR1 on PCIe", nvidia_p2p_get_pages_persistent(va, len, &pt,
	       NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING), -ENOTSUPP);
	expect("pt untouched on error", pt != NULL, 0);
	expect("put NULL table", nvidia_p2p_put_pages(0, 0, va, NULL), 0);
	expect("put_persistent NULL table", nvidia_p2p_put_pages_persistent(va, NULL, 0), 0);
	expect("put never-issued table", nvidia_p2p_put_pages(0, 0, va, (void *)con->buf), 0);
	/* A persistent pin is never revoked: naming none is a consumer bug. */
	expect("put_persistent never-issued table", nvidia_p2p_put_pages_persistent(va, (void *)con->buf, 0), -EINVAL);
	expect("put persistent-kind mismatch", nvidia_p2p_put_pages_persistent(s->va, s->pt, 0), -EINVAL);
	/* A (va, table) pair that names no pin is "not found": 0, and the pin stays. */
	expect("put wrong va", nvidia_p2p_put_pages(0, 0, s->va + GPU_PAGE, s->pt), 0);
	expect("pin still live", READ_ONCE(s->live), 1);
	expect("map NULL peer", nvidia_p2p_dma_map_pages(NULL, s->pt, &map), -EINVAL);
	expect("map NULL table", nvidia_p2p_dma_map_pages(con->edu, NULL, &map), -EINVAL);
	expect("map NULL out", nvidia_p2p_dma_map_pages(con->edu, s->pt, NULL), -EINVAL);
	expect("map unknown table", nvidia_p2p_dma_map_pages(con->edu, (void *)con->buf, &map), -EINVAL);
	expect("unmap NULL args", nvidia_p2p_dma_unmap_pages(NULL, NULL, NULL), -EINVAL);
	expect("unmap unknown mapping", nvidia_p2p_dma_unmap_pages(con->edu, s->pt, (void *)con->buf), 0);
	expect("free_page_table no-op", nvidia_p2p_free_page_table(NULL), 0);
	expect("free_dma_mapping no-op", nvidia_p2p_free_dma_mapping(NULL), 0);
	expect("init_mapping unsupported", nvidia_p2p_init_mapping(0, NULL, NULL, NULL), -ENOTSUPP);
	expect("destroy_mapping unsupported", nvidia_p2p_destroy_mapping(0), -ENOTSUPP);
	expect("capability persistent", nvidia_p2p_cap_persistent_pages, 1);
	return bad_fail ? -EIO : 0;
}

static int run_cmd(char *line)
{
	char *argv[6] = {};
	unsigned int argc = 0, idx;
	u64 a = 0, b = 0, c = 0;
	struct slot *s;
	char *p = strim(line), *tok;

	while ((tok = strsep(&p, " ")) && argc < ARRAY_SIZE(argv))
		if (*tok)
			argv[argc++] = tok;
	if (!argc)
		return -EINVAL;
	if (argc > 1 && kstrtou64(argv[1], 0, &a))
		a = 0;
	if (argc > 2 && kstrtou64(argv[2], 0, &b))
		b = 0;	/* not a number: "map S PEER" */
	if (argc > 3 && kstrtou64(argv[3], 0, &c))
		c = 0;
	if (!strncmp(argv[0], "db", 2))
		return dmabuf_cmd(argc, argv);
	if (!strcmp(argv[0], "badinput"))
		return cmd_badinput(a, b);
	if (!strcmp(argv[0], "rsync"))
		return cmd_rsync();
	if (!strcmp(argv[0], "callbacks")) {
		reply("callbacks %lld\n", atomic64_read(&total_callbacks));
		return 0;
	}
	if (!strcmp(argv[0], "cbblock")) {
		reinit_completion(&cb_release);
		atomic_set(&cb_block, 1);
		return 0;
	}
	if (!strcmp(argv[0], "cbrelease")) {
		atomic_set(&cb_block, 0);
		complete_all(&cb_release);
		return 0;
	}
	if (!strcmp(argv[0], "pinmany") && argc == 4)
		return cmd_pinmany(a, b, c);
	if (!strcmp(argv[0], "putmany") && argc == 1)
		return cmd_putmany();
	if (!strcmp(argv[0], "early")) {
		reply("early %lld\n", atomic64_read(&early_callbacks));
		return 0;
	}
	if (!strcmp(argv[0], "stalecheck"))
		return cmd_stalecheck(argc, a, b, c);
	if (!strcmp(argv[0], "staledrop") && argc == 1)
		return cmd_staledrop();
	if (!strcmp(argv[0], "stalestat") && argc == 1)
		return cmd_stalestat();
	if (!strcmp(argv[0], "rawput") && argc == 4)
		return cmd_rawput(a, b, c);
	if (!strcmp(argv[0], "rawmap") && argc == 2)
		return cmd_rawmap(a);
	if (!strcmp(argv[0], "rawunmap") && argc == 3)
		return cmd_rawunmap(a, b);
	if (!strcmp(argv[0], "benchpin") || !strcmp(argv[0], "benchgup")) {
		u64 span = 0;

		if (argc > 5 || (argc == 5 && kstrtou64(argv[4], 0, &span)))
			return -EINVAL;
		if (!strcmp(argv[0], "benchpin"))
			return cmd_benchpin(a, b, c, span);
		return cmd_benchgup(a, b, c, span);
	}
	idx = a;
	s = get_slot(idx);
	if (!s || argc < 2)
		return -EINVAL;
	if (!strcmp(argv[0], "pin") && argc == 4 && b && c) {
		s->cb_delay_ms = 0;
		s->nv_protocol = false;
		return cmd_pin(s, b, c, false, 0);
	}
	if (!strcmp(argv[0], "nvpin") && argc == 4 && b && c) {
		s->cb_delay_ms = 0;
		s->nv_protocol = true;
		return cmd_pin(s, b, c, false, 0);
	}
	if (!strcmp(argv[0], "slowpin") && argc == 5 && b && c) {
		u64 ms;

		if (kstrtou64(argv[4], 0, &ms) || ms > 10000)
			return -EINVAL;
		s->cb_delay_ms = ms;
		s->nv_protocol = false;
		return cmd_pin(s, b, c, false, 0);
	}
	if (!strcmp(argv[0], "incb")) {
		reply("incb %d\n", atomic_read(&s->in_callback));
		return 0;
	}
	if (!strcmp(argv[0], "cbctx")) {
		reply("cbctx exiting %d worker %d\n", atomic_read(&s->cb_exiting),
		      atomic_read(&s->cb_worker));
		return 0;
	}
	if (!strcmp(argv[0], "cpumap"))
		return cmd_cpumap(s);
	if (!strcmp(argv[0], "keep"))
		return cmd_keep(s);
	if (!strcmp(argv[0], "stalekeep") && argc == 2)
		return cmd_stalekeep(s);
	if (!strcmp(argv[0], "putold"))
		return cmd_putold(s);
	if (!strcmp(argv[0], "unmapold"))
		return cmd_unmapold(s);
	if (!strcmp(argv[0], "unmapwith") && argc == 3)
		return cmd_unmapwith(s, argv[2]);
	if (!strcmp(argv[0], "stalewrap") && argc == 5) {
		u64 n;

		if (kstrtou64(argv[4], 0, &n))
			return -EINVAL;
		return cmd_stalewrap(s, b, c, n);
	}
	if (!strcmp(argv[0], "mapmany") && argc == 3)
		return cmd_mapmany(s, b);
	if (!strcmp(argv[0], "soakpin") && argc == 4)
		return cmd_soakpin(s, b, c);
	if (!strcmp(argv[0], "soakmap"))
		return cmd_soakmap(s);
	if (!strcmp(argv[0], "soakunmap"))
		return cmd_soakunmap(s);
	if (!strcmp(argv[0], "soakput"))
		return cmd_soakput(s);
	if (!strcmp(argv[0], "ppin") && argc >= 4) {
		u64 flags = 0;

		if (argc == 5 && kstrtou64(argv[4], 0, &flags))
			return -EINVAL;
		return cmd_pin(s, b, c, true, flags);
	}
	if (!strcmp(argv[0], "map"))
		return cmd_map(s, argc > 2 ? argv[2] : NULL);
	if (!strcmp(argv[0], "unmap"))
		return cmd_unmap(s);
	if (!strcmp(argv[0], "put"))
		return cmd_put(s);
	if (!strcmp(argv[0], "dma") && argc == 4)
		return cmd_dma(s, b, c);
	if (!strcmp(argv[0], "benchmap") && argc == 4)
		return cmd_benchmap(s, b, argv[3]);
	if (!strcmp(argv[0], "status")) {
		reply("slot %u pinned %d mapped %d persistent %d callbacks %d\n",
		      idx, READ_ONCE(s->live), s->peer != NULL,
		      s->persistent, atomic_read(&s->callbacks));
		return 0;
	}
	return -EINVAL;
}

static ssize_t ctl_write(struct file *file, const char __user *ubuf,
			 size_t count, loff_t *ppos)
{
	char line[128];
	int ret;

	if (count >= sizeof(line))
		return -EINVAL;
	if (copy_from_user(line, ubuf, count))
		return -EFAULT;
	line[count] = 0;
	/* The soak commands use their slot's region lock only, so they race. */
	if (!strncmp(line, "soak", 4)) {
		ret = run_cmd(line);
		return ret ? ret : count;
	}
	/* Runs unlocked (it uses no slot), so several can race each other. */
	if (!strncmp(line, "stalereplay ", 12)) {
		u64 va, len, n;

		if (sscanf(line + 12, "%llx %llx %llu", &va, &len, &n) != 3)
			return -EINVAL;
		ret = cmd_stalereplay(va, len, n);
		return ret ? ret : count;
	}
	mutex_lock(&con->lock);
	con->reply_len = 0;
	ret = run_cmd(line);
	if (ret)
		reply("error %d\n", ret);
	mutex_unlock(&con->lock);
	return ret ? ret : count;
}

static ssize_t ctl_read(struct file *file, char __user *ubuf, size_t count,
			loff_t *ppos)
{
	ssize_t ret;

	mutex_lock(&con->lock);
	ret = simple_read_from_buffer(ubuf, count, ppos, con->reply,
				      con->reply_len);
	mutex_unlock(&con->lock);
	return ret;
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.write = ctl_write,
	.read = ctl_read,
	.llseek = default_llseek,
};

static int edu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	con->regs = pcim_iomap_region(pdev, 0, KBUILD_MODNAME);
	if (IS_ERR(con->regs))
		return PTR_ERR(con->regs);
	con->buf = dmam_alloc_coherent(&pdev->dev, EDU_BUF_SIZE, &con->buf_dma,
				       GFP_KERNEL);
	if (!con->buf)
		return -ENOMEM;
	con->edu = pdev;
	ret = dmabuf_init(pdev);
	if (ret)
		return ret;
	con->dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("ctl", 0600, con->dir, NULL, &ctl_fops);
	pci_info(pdev, "edu bound as the RDMA peer; nvrs reports %u GPUs\n",
		 nvrs_gpu_count());
	return 0;
}

static void edu_remove(struct pci_dev *pdev)
{
	unsigned int i;

	debugfs_remove_recursive(con->dir);
	mutex_lock(&con->lock);
	for (i = 0; i < NSLOTS; i++)
		if (READ_ONCE(con->slots[i].live) || con->slots[i].peer)
			cmd_put(&con->slots[i]);
	cmd_staledrop();
	cmd_putmany();
	mutex_unlock(&con->lock);
	for (i = 0; i < NSLOTS; i++)
		cmd_soakput(&con->slots[i]);
	dmabuf_fini();
	con->edu = NULL;
}

static const struct pci_device_id edu_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR, EDU_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, edu_ids);

static struct pci_driver edu_driver = {
	.name = KBUILD_MODNAME,
	.id_table = edu_ids,
	.probe = edu_probe,
	.remove = edu_remove,
};

static int __init nvrs_consumer_init(void)
{
	int ret, i;

	con = kzalloc_obj(*con, GFP_KERNEL);
	if (!con)
		return -ENOMEM;
	mutex_init(&con->lock);
	mutex_init(&stale.lock);
	for (i = 0; i < NSLOTS; i++) {
		mutex_init(&con->slots[i].region);
		mutex_init(&con->slots[i].pinning);
	}
	ret = pci_register_driver(&edu_driver);
	if (ret)
		kfree(con);
	return ret;
}
module_init(nvrs_consumer_init);

static void __exit nvrs_consumer_exit(void)
{
	atomic_set(&cb_block, 0);
	complete_all(&cb_release);
	pci_unregister_driver(&edu_driver);
	mutex_destroy(&con->lock);
	kfree(con);
}
module_exit(nvrs_consumer_exit);

MODULE_DESCRIPTION("nvrs test consumer: an RDMA-driver stand-in on QEMU edu");
MODULE_LICENSE("GPL");
