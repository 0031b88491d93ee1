/* SPDX-License-Identifier: MIT */
/*
 * Event source: a GPIO line's edge events through the GPIO character device
 * uAPI v2 (Documentation/userspace-api/gpio/chardev.rst). The kernel stamps
 * each edge in its interrupt handler (timestamp_ns): CLOCK_MONOTONIC by
 * default, CLOCK_REALTIME with GPIO_V2_LINE_FLAG_EVENT_CLOCK_REALTIME, or a
 * hardware timestamp engine with GPIO_V2_LINE_FLAG_EVENT_CLOCK_HTE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "event.h"

#if defined(__has_include)
#if __has_include(<linux/gpio.h>)
#include <linux/gpio.h>
#endif
#endif

#ifdef GPIO_V2_GET_LINE_IOCTL

size_t gpio_event_size(void)
{
	return sizeof(struct gpio_v2_line_event);
}

int gpio_decode(struct gpio_state *st, const void *buf, size_t len, struct ev_event *out,
		size_t max)
{
	const size_t sz = sizeof(struct gpio_v2_line_event);
	if (len % sz)
		return -EINVAL;
	size_t n = len / sz;
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++) {
		struct gpio_v2_line_event e;
		memcpy(&e, (const unsigned char *)buf + i * sz, sz);
		out[i].capture_ns = e.timestamp_ns;
		out[i].lost = 0;
		/* line_seqno counts every edge of the line: a gap means the kernel's
		 * event FIFO overflowed and events were dropped */
		if (st->last_line_seqno && e.line_seqno > st->last_line_seqno + 1)
			out[i].lost = e.line_seqno - st->last_line_seqno - 1;
		st->last_line_seqno = e.line_seqno;
	}
	return (int)n;
}

struct gpio_priv {
	struct gpio_state st;
	struct ev_event pending[16];
	int n, next;
};

static struct gpio_priv gpio_priv_store;

static int gpio_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	int chip = evsrc_open_device(cfg, O_RDONLY, "gpio", "/dev/gpiochip0", "GPIO chip", err, len);
	if (chip < 0)
		return chip;
	struct gpio_v2_line_request req;
	memset(&req, 0, sizeof(req));
	req.offsets[0] = (uint32_t)cfg->line;
	req.num_lines = 1;
	snprintf(req.consumer, sizeof(req.consumer), "rtlab-event");
	uint64_t flags = GPIO_V2_LINE_FLAG_INPUT;
	if (cfg->edge == 0 || cfg->edge == 2)
		flags |= GPIO_V2_LINE_FLAG_EDGE_RISING;
	if (cfg->edge == 1 || cfg->edge == 2)
		flags |= GPIO_V2_LINE_FLAG_EDGE_FALLING;
	s->domain = EV_MONOTONIC;
	if (cfg->gpio_clock == 1) {
		flags |= GPIO_V2_LINE_FLAG_EVENT_CLOCK_REALTIME;
		s->domain = EV_REALTIME;
	} else if (cfg->gpio_clock == 2) {
#ifdef GPIO_V2_LINE_FLAG_EVENT_CLOCK_HTE
		flags |= GPIO_V2_LINE_FLAG_EVENT_CLOCK_HTE;
		s->domain = EV_HTE;
		snprintf(s->note, sizeof(s->note),
			 "HTE timestamps are taken as CLOCK_MONOTONIC-based (the HTE provider's domain is not verified)");
#else
		close(chip);
		snprintf(err, len, "--gpio-clock hte: not supported by the kernel headers of this build");
		return -EOPNOTSUPP;
#endif
	}
	req.config.flags = flags;
	req.event_buffer_size = 64;
	if (ioctl(chip, GPIO_V2_GET_LINE_IOCTL, &req) != 0) {
		int e = errno;
		close(chip);
		snprintf(err, len, "%s line %d: GPIO_V2_GET_LINE_IOCTL: %s", cfg->device, cfg->line,
			 strerror(e));
		return -e;
	}
	close(chip);
	s->fd = req.fd;
	memset(&gpio_priv_store, 0, sizeof(gpio_priv_store));
	s->priv = &gpio_priv_store;
	return 0;
}

static int gpio_arm(struct evsrc *s)
{
	(void)s; /* edge detection runs from the line request on */
	return 0;
}

static int gpio_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	struct gpio_priv *p = s->priv;
	while (p->next >= p->n) {
		int r = evsrc_poll(s->fd, deadline);
		if (r <= 0)
			return r;
		struct gpio_v2_line_event raw[16];
		ssize_t got = read(s->fd, raw, sizeof(raw));
		if (got < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		int n = gpio_decode(&p->st, raw, (size_t)got, p->pending, 16);
		if (n < 0)
			return n;
		p->n = n;
		p->next = 0;
	}
	*ev = p->pending[p->next++];
	return 1;
}

const struct evsrc_ops evsrc_gpio = EVSRC_OPS("gpio", gpio_open, gpio_arm, gpio_wait, evsrc_close_fd);

#else /* no GPIO v2 uAPI in the headers of this build */

size_t gpio_event_size(void)
{
	return 48;
}

int gpio_decode(struct gpio_state *st, const void *buf, size_t len, struct ev_event *out,
		size_t max)
{
	(void)st, (void)buf, (void)len, (void)out, (void)max;
	return -EOPNOTSUPP;
}

const struct evsrc_ops evsrc_gpio = EVSRC_UNSUPPORTED_OPS("gpio", "GPIO v2 character device uAPI");

#endif
