// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel side of two fault controls (src/faults.rs): a timer that revokes
 * a GPU's pins periodically, and a surprise removal of the GPU.
 *
 * The ticker is a delayed work item that re-arms itself. The 7.3 kernel
 * crate's DelayedWork has no cancel, and a pending timer must be cancelled
 * (and a running one waited for) before the GPU it refers to goes away, so
 * it lives here.
 */

#include <linux/jiffies.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "helpers.h"

/**
 * struct nvrs_ticker - a periodic call of nvrs_ticker_fire_rs()
 * @work: the delayed work that calls it and re-arms itself
 * @lock: guards @period_ms and @dead against the work's re-arming
 * @owner: passed to nvrs_ticker_fire_rs()
 * @period_ms: milliseconds between calls; 0 once stopped
 * @dead: stopped for good; nothing arms the work any more
 */
struct nvrs_ticker {
	struct delayed_work work;
	struct mutex lock;
	void *owner;
	u32 period_ms;
	bool dead;
};

static void nvrs_ticker_work(struct work_struct *work)
{
	struct nvrs_ticker *t = container_of(to_delayed_work(work),
					     struct nvrs_ticker, work);

	nvrs_ticker_fire_rs(t->owner);
	mutex_lock(&t->lock);
	if (t->period_ms && !t->dead)
		queue_delayed_work(nvrs_wq_get(), &t->work,
				   msecs_to_jiffies(t->period_ms));
	mutex_unlock(&t->lock);
}

/**
 * nvrs_ticker_new() - a stopped ticker
 * @owner: what nvrs_ticker_fire_rs() is called with; must outlive the ticker
 *
 * Return: the ticker, or NULL without memory.
 */
struct nvrs_ticker *nvrs_ticker_new(void *owner)
{
	struct nvrs_ticker *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	INIT_DELAYED_WORK(&t->work, nvrs_ticker_work);
	mutex_init(&t->lock);
	t->owner = owner;
	return t;
}

/**
 * nvrs_ticker_set() - call the owner every @period_ms milliseconds, or stop
 * @t: the ticker
 * @period_ms: the period, the first call one period from now; 0 stops it
 *
 * A call already running finishes; it does not re-arm a stopped ticker.
 * Does nothing once the ticker is stopped.
 */
void nvrs_ticker_set(struct nvrs_ticker *t, u32 period_ms)
{
	mutex_lock(&t->lock);
	if (!t->dead) {
		t->period_ms = period_ms;
		if (period_ms)
			mod_delayed_work(nvrs_wq_get(), &t->work,
					 msecs_to_jiffies(period_ms));
		else
			cancel_delayed_work(&t->work);
	}
	mutex_unlock(&t->lock);
}

/**
 * nvrs_ticker_stop() - stop the ticker for good and wait for a running call
 * @t: the ticker
 *
 * Afterwards nvrs_ticker_set() does nothing and the owner is not called again.
 */
void nvrs_ticker_stop(struct nvrs_ticker *t)
{
	mutex_lock(&t->lock);
	t->dead = true;
	t->period_ms = 0;
	mutex_unlock(&t->lock);
	cancel_delayed_work_sync(&t->work);
}

/**
 * nvrs_ticker_free() - stop the ticker and free it
 * @t: the ticker, or NULL
 */
void nvrs_ticker_free(struct nvrs_ticker *t)
{
	if (!t)
		return;
	nvrs_ticker_stop(t);
	mutex_destroy(&t->lock);
	kfree(t);
}

struct nvrs_surprise {
	struct work_struct work;
	struct pci_dev *pdev;
};

static void nvrs_surprise_work(struct work_struct *work)
{
	struct nvrs_surprise *s = container_of(work, struct nvrs_surprise,
					       work);

	pci_stop_and_remove_bus_device_locked(s->pdev);
	pci_dev_put(s->pdev);
	kfree(s);
}

/**
 * nvrs_pci_surprise_remove() - take a function off the bus, as if it fell off
 * @pdev: the function (bound to nvrs)
 *
 * What the PCI core does when a slot loses its link without warning: the
 * function is marked disconnected (pci_dev_is_disconnected(), so config and
 * MMIO accessors give up on it), then pciehp stops and removes it, and the
 * driver's remove runs with the device already gone. The removal runs in a
 * work item on nvrs's queue: the caller may be a file of the device's own
 * debugfs directory, which the removal takes away. Module exit drains the
 * queue, so the work never outlives the module.
 *
 * Return: 0, or -ENOMEM (then nothing changed).
 */
int nvrs_pci_surprise_remove(struct pci_dev *pdev)
{
	struct nvrs_surprise *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return -ENOMEM;
	INIT_WORK(&s->work, nvrs_surprise_work);
	s->pdev = pci_dev_get(pdev);
	/* As pci_dev_set_disconnected(), which drivers cannot call. */
	xchg(&pdev->error_state, pci_channel_io_perm_failure);
	queue_work(nvrs_wq_get(), &s->work);
	return 0;
}
