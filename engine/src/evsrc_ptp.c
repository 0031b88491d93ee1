/* SPDX-License-Identifier: MIT */
/*
 * Event source: external timestamps of a PTP hardware clock (PTP_EXTTS on
 * /dev/ptpN, Documentation/driver-api/ptp.rst). The NIC latches its PHC when
 * the input pin fires; the capture time is in the PHC's domain. open()
 * measures PHC - CLOCK_REALTIME with phc_measure() (phc.h: PTP_SYS_OFFSET_EXTENDED,
 * each PHC read bracketed by system reads; fallback PTP_SYS_OFFSET) and keeps the
 * offset and its uncertainty (half the narrowest bracket).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "event.h"

#if defined(__has_include)
#if __has_include(<linux/ptp_clock.h>)
#include <linux/ptp_clock.h>
#endif
#endif

#ifdef PTP_EXTTS_REQUEST

static uint64_t pct_ns(const struct ptp_clock_time *t)
{
	return (uint64_t)t->sec * NS_PER_SEC + t->nsec;
}

size_t ptp_event_size(void)
{
	return sizeof(struct ptp_extts_event);
}

int ptp_decode(struct ptp_state *st, const void *buf, size_t len, struct ev_event *out,
	       size_t max)
{
	const size_t sz = sizeof(struct ptp_extts_event);
	if (len % sz)
		return -EINVAL;
	size_t n = 0;
	for (size_t i = 0; i < len / sz && n < max; i++) {
		struct ptp_extts_event e;
		memcpy(&e, (const unsigned char *)buf + i * sz, sz);
		if (e.index != st->index) {
			st->other++;
			continue;
		}
		out[n].capture_ns = pct_ns(&e.t);
		out[n].lost = 0;
		n++;
	}
	return (int)n;
}

struct ptp_priv {
	struct ptp_state st;
	struct ev_event pending[8];
	int n, next;
	unsigned index;
};

static struct ptp_priv ptp_priv_store;

static int ptp_measure(struct evsrc *s, char *err, size_t len)
{
	int e = phc_measure(s->fd, &s->phc_minus_rt_ns, &s->phc_unc_ns, &s->phc_method);
	if (e)
		snprintf(err, len, "cannot measure the PHC - system clock offset: %s", strerror(-e));
	return e;
}

static int ptp_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	s->fd = evsrc_open_device(cfg, O_RDWR, "ptp", "/dev/ptp0", "PTP hardware clock", err, len);
	if (s->fd < 0)
		return s->fd;
	s->domain = EV_PHC;
	memset(&ptp_priv_store, 0, sizeof(ptp_priv_store));
	ptp_priv_store.index = (unsigned)cfg->line;
	ptp_priv_store.st.index = (unsigned)cfg->line;
	s->priv = &ptp_priv_store;
	return ptp_measure(s, err, len);
}

static int ptp_arm(struct evsrc *s)
{
	struct ptp_priv *p = s->priv;
	struct ptp_extts_request r;
	memset(&r, 0, sizeof(r));
	r.index = p->index;
	r.flags = PTP_ENABLE_FEATURE | PTP_RISING_EDGE;
	if (ioctl(s->fd, PTP_EXTTS_REQUEST, &r) != 0)
		return -errno;
	return 0;
}

static int ptp_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	struct ptp_priv *p = s->priv;
	while (p->next >= p->n) {
		int r = evsrc_poll(s->fd, deadline);
		if (r <= 0)
			return r;
		struct ptp_extts_event raw[8];
		ssize_t got = read(s->fd, raw, sizeof(raw));
		if (got < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		int n = ptp_decode(&p->st, raw, (size_t)got, p->pending, 8);
		if (n < 0)
			return n;
		p->n = n;
		p->next = 0;
	}
	*ev = p->pending[p->next++];
	return 1;
}

static void ptp_close(struct evsrc *s)
{
	if (s->fd < 0)
		return;
	struct ptp_priv *p = s->priv;
	if (p) {
		struct ptp_extts_request r;
		memset(&r, 0, sizeof(r));
		r.index = p->index; /* flags 0: disable */
		if (ioctl(s->fd, PTP_EXTTS_REQUEST, &r) != 0) {
			/* closing releases it anyway */
		}
	}
	close(s->fd);
	s->fd = -1;
}

const struct evsrc_ops evsrc_ptp = EVSRC_OPS("ptp", ptp_open, ptp_arm, ptp_wait, ptp_close);

#else

size_t ptp_event_size(void)
{
	return 32;
}

int ptp_decode(struct ptp_state *st, const void *buf, size_t len, struct ev_event *out,
	       size_t max)
{
	(void)st, (void)buf, (void)len, (void)out, (void)max;
	return -EOPNOTSUPP;
}

const struct evsrc_ops evsrc_ptp = EVSRC_UNSUPPORTED_OPS("ptp", "PTP clock uAPI");

#endif
