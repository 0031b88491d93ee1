/* SPDX-License-Identifier: MIT */
/*
 * The `sys` operations on kernel settings and devices: a value written to procfs or
 * sysfs, /dev/cpu_dma_latency held, a network namespace to remove, a network
 * interface's hardware timestamping (sys_op.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "sys_hwts.h"
#include "sys_op.h"
#include "sysfile.h"

static const char *const write_prefixes[] = { "/proc/sys/", "/proc/irq/", "/sys/", NULL };
static const char *const hold_prefixes[] = { "/dev/cpu_dma_latency", NULL };

/* ---- operations ---- */

int sys_apply_write(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path, *value, *undo = NULL;
	if (sj_str(o, "path", &path) || sj_str(o, "value", &value) ||
	    (sj_get(o, "undo") && sj_str(o, "undo", &undo)))
		return sys_ans_fail(a, EINVAL, "write needs string fields path and value (and optional undo)");
	if (!sys_path_ok(path, write_prefixes))
		return sys_ans_fail(a, EINVAL, "write: path must be under /proc/sys, /proc/irq or /sys: %s", path);
	char *old = NULL;
	int r = sf_read_text(path, &old);
	if (r)
		return sys_ans_fail(a, -r, "cannot read %s: %s", path, strerror(-r));
	sys_journal_begin(c, "write");
	jw_str(&c->jw, "path", path);
	jw_str(&c->jw, "value", value);
	if (undo)
		jw_str(&c->jw, "undo", undo);
	jw_str(&c->jw, "old", old);
	r = sys_journal_commit(c);
	if (r) {
		free(old);
		return r;
	}
	r = sf_write(path, value);
	if (r) {
		free(old);
		int jr = sys_journal_cancel(c);
		if (jr)
			return jr;
		return sys_ans_fail(a, -r, "cannot write %s: %s", path, strerror(-r));
	}
	char *now = NULL;
	jw_str(a, "old", old);
	if (sf_read_text(path, &now) == 0)
		jw_str(a, "new", now);
	else
		jw_null(a, "new");
	free(old);
	free(now);
	return sys_ans_ok(a);
}

enum rres sys_restore_write(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	const char *path, *old, *undo = NULL;
	if (sj_str(e, "path", &path) || sj_str(e, "old", &old))
		return *err = EINVAL, RS_FAILED;
	for (size_t k = 0; k < env->n_created; k++) {
		size_t l = strlen(env->created[k]);
		if (strncmp(path, env->created[k], l) == 0 && path[l] == '/')
			return RS_SKIPPED; /* inside a directory we created: removed with it */
	}
	if (sj_get(e, "undo") && sj_str(e, "undo", &undo))
		return *err = EINVAL, RS_FAILED;
	int r = sf_write(path, undo ? undo : old);
	if (r == -ENOENT)
		return RS_GONE;
	/* Writing an empty mask/list back: nothing to restore for empty files. */
	if (r && !undo && old[0] == '\0')
		return RS_SKIPPED;
	return r ? (*err = -r, RS_FAILED) : RS_OK;
}

int sys_apply_hold(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path;
	int64_t v;
	if (sj_str(o, "path", &path) || !sys_path_ok(path, hold_prefixes) || sj_int(o, "value", &v) ||
	    v < 0 || v > INT32_MAX)
		return sys_ans_fail(a, EINVAL, "hold needs path /dev/cpu_dma_latency and value 0..2147483647");
	if (c->detached)
		return sys_ans_fail(a, EINVAL, "hold needs a holding applier (not --detach)");
	if (c->n_hold >= sizeof(c->hold_fd) / sizeof(c->hold_fd[0]))
		return sys_ans_fail(a, ENOSPC, "too many holds");
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return sys_ans_fail(a, errno, "cannot open %s: %s", path, strerror(errno));
	int32_t val = (int32_t)v;
	if (write(fd, &val, sizeof(val)) != (ssize_t)sizeof(val)) {
		int e = errno ? errno : EIO;
		close(fd);
		return sys_ans_fail(a, e, "cannot write %s: %s", path, strerror(e));
	}
	c->hold_fd[c->n_hold++] = fd;
	sys_journal_begin(c, "hold");
	jw_str(&c->jw, "path", path);
	jw_int(&c->jw, "value", v);
	int r = sys_journal_commit(c);
	if (r)
		return r;
	return sys_ans_ok(a);
}

/* The value is held by the applier's open file: it ends when the applier does. */
enum rres sys_restore_hold(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	(void)e;
	(void)env;
	(void)err;
	return RS_OK;
}

int sys_apply_netns(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *name;
	if (sj_str(o, "name", &name) || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strlen(name) > 200)
		return sys_ans_fail(a, EINVAL, "netns needs a name without '/'");
	sys_journal_begin(c, "netns");
	jw_str(&c->jw, "name", name);
	int r = sys_journal_commit(c);
	return r ? r : sys_ans_ok(a);
}

enum rres sys_restore_netns(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	(void)env;
	const char *name;
	if (sj_str(e, "name", &name) || strchr(name, '/'))
		return *err = EINVAL, RS_FAILED;
	char path[300];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	if (access(path, F_OK) != 0)
		return RS_GONE;
	if (umount2(path, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
		return *err = errno, RS_FAILED;
	if (unlink(path) != 0 && errno != ENOENT)
		return *err = errno, RS_FAILED;
	return RS_OK;
}

/*
 * Hardware timestamping of a network interface: the old configuration is read
 * (SIOCGHWTSTAMP) and journaled first; a driver that cannot report it is refused,
 * because the change could not be undone. The answer says what the driver applied.
 */
int sys_apply_hwtstamp(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *ifname, *txs, *rxs;
	if (sj_str(o, "ifname", &ifname) || sj_str(o, "tx", &txs) || sj_str(o, "rx_filter", &rxs))
		return sys_ans_fail(a, EINVAL, "hwtstamp needs string fields ifname, tx and rx_filter");
	if (!hwts_ifname_ok(ifname))
		return sys_ans_fail(a, EINVAL, "hwtstamp: not an interface name: '%s'", ifname);
	int tx = hwts_tx_from_name(txs), rx = hwts_rx_from_name(rxs);
	if (tx < 0)
		return sys_ans_fail(a, EINVAL, "hwtstamp: unknown tx '%s' (off, on, onestep_sync, onestep_p2p)", txs);
	if (rx < 0)
		return sys_ans_fail(a, EINVAL, "hwtstamp: unknown rx_filter '%s' (none, all, ptp_v2_event, ... see docs/sys-protocol.md)", rxs);
	unsigned idx = if_nametoindex(ifname);
	if (!idx)
		return sys_ans_fail(a, errno, "hwtstamp: no interface %s: %s", ifname, strerror(errno));
	struct hwtstamp_config old;
	int r = hwts_get(ifname, &old);
	if (r)
		return sys_ans_fail(a, -r,
				"hwtstamp: cannot read the timestamping configuration of %s (SIOCGHWTSTAMP: %s); not changed, because it could not be restored",
				ifname, strerror(-r));
	sys_journal_begin(c, "hwtstamp");
	jw_str(&c->jw, "ifname", ifname);
	jw_uint(&c->jw, "ifindex", idx);
	jw_int(&c->jw, "old_tx", old.tx_type);
	jw_int(&c->jw, "old_rx_filter", old.rx_filter);
	jw_int(&c->jw, "tx", tx);
	jw_int(&c->jw, "rx_filter", rx);
	r = sys_journal_commit(c);
	if (r)
		return r;
	struct hwtstamp_config want = { .tx_type = tx, .rx_filter = rx };
	r = hwts_set(ifname, &want);
	if (r) {
		int jr = sys_journal_cancel(c);
		if (jr)
			return jr;
		return sys_ans_fail(a, -r, "hwtstamp: %s refused tx %s rx_filter %s (SIOCSHWTSTAMP: %s)",
				ifname, txs, rxs, strerror(-r));
	}
	const char *on = hwts_tx_name(old.tx_type), *orx = hwts_rx_name(old.rx_filter);
	const char *nt = hwts_tx_name(want.tx_type), *nrx = hwts_rx_name(want.rx_filter);
	jw_obj_begin(a, "old");
	on ? jw_str(a, "tx", on) : jw_int(a, "tx", old.tx_type);
	orx ? jw_str(a, "rx_filter", orx) : jw_int(a, "rx_filter", old.rx_filter);
	jw_obj_end(a);
	jw_obj_begin(a, "new");
	nt ? jw_str(a, "tx", nt) : jw_int(a, "tx", want.tx_type);
	nrx ? jw_str(a, "rx_filter", nrx) : jw_int(a, "rx_filter", want.rx_filter);
	jw_obj_end(a);
	return sys_ans_ok(a);
}

enum rres sys_restore_hwtstamp(const struct sj_obj *e, const struct sys_restore_env *env,
			       int *err)
{
	(void)env;
	const char *ifname;
	int64_t idx, tx, rx;
	if (sj_str(e, "ifname", &ifname) || sj_int(e, "ifindex", &idx) ||
	    sj_int(e, "old_tx", &tx) || sj_int(e, "old_rx_filter", &rx) || !hwts_ifname_ok(ifname))
		return *err = EINVAL, RS_FAILED;
	/* gone, or another interface under that name now: nothing of ours to undo */
	if ((int64_t)if_nametoindex(ifname) != idx)
		return RS_GONE;
	struct hwtstamp_config cfg = { .tx_type = (int)tx, .rx_filter = (int)rx };
	int r = hwts_set(ifname, &cfg);
	if (r == -ENODEV)
		return RS_GONE;
	return r ? (*err = -r, RS_FAILED) : RS_OK;
}
