/* SPDX-License-Identifier: MIT */
/*
 * Event source: a PPS device (/dev/ppsN, Documentation/driver-api/pps.rst).
 * The kernel stamps each assert edge on CLOCK_REALTIME in its interrupt
 * handler; PPS_FETCH blocks until the next one (or a timeout). The probe
 * converts with a measured CLOCK_REALTIME - CLOCK_MONOTONIC offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "event.h"

#if defined(__has_include)
#if __has_include(<linux/pps.h>)
#include <linux/pps.h>
#endif
#endif

#ifdef PPS_FETCH

size_t pps_fdata_size(void)
{
	return sizeof(struct pps_fdata);
}

int pps_decode(struct pps_state *st, const void *raw, struct ev_event *out)
{
	struct pps_fdata f;
	memcpy(&f, raw, sizeof(f));
	uint32_t seq = f.info.assert_sequence;
	if (st->have && seq == st->last_seq)
		return 0; /* no new assert edge (timeout or a clear edge) */
	out->lost = st->have && seq > st->last_seq + 1 ? seq - st->last_seq - 1 : 0;
	out->capture_ns = (uint64_t)f.info.assert_tu.sec * NS_PER_SEC + (uint32_t)f.info.assert_tu.nsec;
	st->last_seq = seq;
	st->have = true;
	return 1;
}

struct pps_priv {
	struct pps_state st;
};

static struct pps_priv pps_priv_store;

static int pps_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	s->fd = evsrc_open_device(cfg, O_RDWR, "pps", "/dev/pps0", "PPS device", err, len);
	if (s->fd < 0)
		return s->fd;
	s->domain = EV_REALTIME;
	memset(&pps_priv_store, 0, sizeof(pps_priv_store));
	s->priv = &pps_priv_store;
	return 0;
}

static int pps_arm(struct evsrc *s)
{
	/* remember the current sequence so that only edges from now on count */
	struct pps_fdata f;
	memset(&f, 0, sizeof(f));
	if (ioctl(s->fd, PPS_FETCH, &f) != 0)
		return -errno;
	struct pps_priv *p = s->priv;
	p->st.last_seq = f.info.assert_sequence;
	p->st.have = true;
	return 0;
}

static int pps_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	struct pps_priv *p = s->priv;
	for (;;) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return 0;
		struct pps_fdata f;
		memset(&f, 0, sizeof(f));
		uint64_t left = deadline - now;
		f.timeout.sec = (long long)(left / NS_PER_SEC);
		f.timeout.nsec = (int)(left % NS_PER_SEC);
		f.timeout.flags = 0; /* PPS_TIME_INVALID would mean: wait forever */
		if (ioctl(s->fd, PPS_FETCH, &f) != 0) {
			if (errno == ETIMEDOUT || errno == EINTR)
				continue;
			return -errno;
		}
		if (pps_decode(&p->st, &f, ev))
			return 1;
	}
}

const struct evsrc_ops evsrc_pps = EVSRC_OPS("pps", pps_open, pps_arm, pps_wait, evsrc_close_fd);

#else

size_t pps_fdata_size(void)
{
	return 0;
}

int pps_decode(struct pps_state *st, const void *raw, struct ev_event *out)
{
	(void)st, (void)raw, (void)out;
	return -EOPNOTSUPP;
}

const struct evsrc_ops evsrc_pps = EVSRC_UNSUPPORTED_OPS("pps", "PPS uAPI");

#endif
