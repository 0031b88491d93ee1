/* SPDX-License-Identifier: MIT */
/*
 * The `event` probe's sources and clock domains.
 *
 * An event source delivers events with the time they were captured (by
 * hardware, or by the kernel at interrupt time) in the source's own clock
 * domain. The probe converts a capture time into CLOCK_MONOTONIC with a
 * measured offset (and its uncertainty) and records
 * latency = handling time - capture time.
 *
 * One small interface per source (evsrc_*.c): open -> arm -> wait* -> close.
 * The decoding and clock arithmetic are pure functions, declared here, that
 * the unit tests drive with recorded/synthetic binary event streams.
 */
#ifndef RTLAB_EVENT_H
#define RTLAB_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common.h"
#include "phc.h" /* clock offsets: clk_*, ptp_offset_from_*, phc_measure */

enum ev_domain { EV_MONOTONIC, EV_REALTIME, EV_PHC, EV_HTE, EV_DOMAIN_COUNT };
extern const char *const ev_domain_names[]; /* "monotonic", "realtime", "phc", "hte" */

struct ev_event {
	uint64_t capture_ns;	/* in the source's domain */
	uint64_t lost;		/* events the source says were lost before this one */
};

/* Everything a source may need; each uses its part. */
struct evsrc_cfg {
	const char *device;	/* gpio: /dev/gpiochipN, ptp: /dev/ptpN, pps: /dev/ppsN */
	int line;		/* gpio line offset, ptp extts channel */
	int edge;		/* 0 rising, 1 falling, 2 both */
	int gpio_clock;		/* 0 monotonic, 1 realtime, 2 hte */
	const char *bind;	/* net: ADDR:PORT */
	uint64_t interval_ns;	/* soft: generator period */
	int gen_cpu;		/* soft: generator CPU, -1: unpinned */
	int gen_policy, gen_priority; /* soft: generator scheduling (enum rt_policy) */
};

struct evsrc;

struct evsrc_ops {
	const char *name;
	const char *missing_uapi;	/* NULL, or the kernel uAPI this build lacks for it */
	/* Open the device/socket; err gets a one-line reason. 0 or -errno
	 * (-ENOENT/-ENODEV/-EOPNOTSUPP: the hardware or feature is missing). */
	int (*open)(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len);
	/* Start delivering events (from now on). */
	int (*arm)(struct evsrc *s);
	/* Wait for one event until deadline (CLOCK_MONOTONIC ns): 1 event,
	 * 0 deadline, -errno. Called only by the measuring thread. */
	int (*wait)(struct evsrc *s, uint64_t deadline, struct ev_event *ev);
	void (*close)(struct evsrc *s);
};

struct evsrc {
	const struct evsrc_ops *ops;
	enum ev_domain domain;	/* set by open */
	int fd;
	void *priv;
	/* PHC sources: the PHC <-> CLOCK_REALTIME offset, measured by open */
	int64_t phc_minus_rt_ns;
	uint64_t phc_unc_ns;
	const char *phc_method;	/* "PTP_SYS_OFFSET_EXTENDED" | "PTP_SYS_OFFSET" */
	char note[160];		/* anything the header should say */
};

extern const struct evsrc_ops evsrc_soft, evsrc_net, evsrc_gpio, evsrc_ptp, evsrc_pps;

/*
 * Wait until fd is readable or CLOCK_MONOTONIC reaches deadline (ns), through signals:
 * 1 readable, 0 deadline passed, -errno (evsrc.c).
 */
int evsrc_poll(int fd, uint64_t deadline);

/* A source's operations table. */
#define EVSRC_OPS(name_, open_, arm_, wait_, close_)                                 \
	{ .name = (name_), .open = (open_), .arm = (arm_), .wait = (wait_), .close = (close_) }

/* The close of a source that holds only its descriptor: closed once, fd -1 (evsrc.c). */
void evsrc_close_fd(struct evsrc *s);

/*
 * Open cfg->device (flags | O_CLOEXEC) for --source `source`: the descriptor, or -errno
 * with a line in err that names `example` when --device is missing and says "no <what>
 * here" when it cannot be opened (evsrc.c).
 */
int evsrc_open_device(const struct evsrc_cfg *cfg, int flags, const char *source,
		      const char *example, const char *what, char *err, size_t len);

/*
 * A source whose kernel uAPI this build's headers lack (evsrc.c): its open
 * says so ("this build's kernel headers have no <ops->missing_uapi>") and fails with
 * -EOPNOTSUPP (the probe is skipped); arm and wait answer -EOPNOTSUPP, close does nothing.
 */
int evsrc_unsupported_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len);
int evsrc_unsupported_arm(struct evsrc *s);
int evsrc_unsupported_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev);
void evsrc_unsupported_close(struct evsrc *s);
#define EVSRC_UNSUPPORTED_OPS(name_, uapi)                                           \
	{ .name = (name_), .missing_uapi = (uapi), .open = evsrc_unsupported_open,     \
	  .arm = evsrc_unsupported_arm, .wait = evsrc_unsupported_wait,               \
	  .close = evsrc_unsupported_close }

/* ---- decoders (pure) -------------------------------------------------- */

/* GPIO v2: n whole struct gpio_v2_line_event in buf; tracks line_seqno gaps. */
struct gpio_state {
	uint32_t last_line_seqno; /* 0: none yet */
};
/* Decode up to max events from len bytes; returns events decoded, or
 * -EINVAL if len is not a multiple of the event size. */
int gpio_decode(struct gpio_state *st, const void *buf, size_t len, struct ev_event *out,
		size_t max);
size_t gpio_event_size(void);

/* PTP EXTTS: struct ptp_extts_event records; only those of channel index. */
struct ptp_state {
	unsigned index;
	uint64_t other;	/* events of other channels, ignored */
};
int ptp_decode(struct ptp_state *st, const void *buf, size_t len, struct ev_event *out,
	       size_t max);
size_t ptp_event_size(void);

/* PPS: a PPS_FETCH result (struct pps_fdata); 1 new assert event, 0 none. */
struct pps_state {
	uint32_t last_seq;
	bool have;
};
int pps_decode(struct pps_state *st, const void *fdata, struct ev_event *out);
size_t pps_fdata_size(void);

#endif
