/* SPDX-License-Identifier: MIT */
/*
 * Hardware timestamping configuration of a network interface (SIOCGHWTSTAMP /
 * SIOCSHWTSTAMP, struct hwtstamp_config of <linux/net_tstamp.h>) for the journaled
 * `hwtstamp` operation of `rtlab-probe sys apply` (docs/sys-protocol.md).
 */
#ifndef RTLAB_SYS_HWTS_H
#define RTLAB_SYS_HWTS_H

#include <stdbool.h>

#include <linux/net_tstamp.h>

/* Names used on the wire: tx "off", "on", "onestep_sync", "onestep_p2p"; rx "none",
 * "all", "some", "ptp_v1_l4_event", ..., "ptp_v2_event", "ptp_v2_sync", ... "ntp_all". */
int hwts_tx_from_name(const char *name);	/* -1: unknown */
int hwts_rx_from_name(const char *name);	/* -1: unknown */
const char *hwts_tx_name(int tx);		/* "tx_<n>" style is not used: NULL if unknown */
const char *hwts_rx_name(int rx);

/* A plausible interface name: 1..IFNAMSIZ-1 bytes, no '/', ':' or whitespace. */
bool hwts_ifname_ok(const char *ifname);

/* Read / set the interface's configuration; 0 or -errno. hwts_set writes back what the
 * driver actually applied (drivers may widen rx_filter). */
int hwts_get(const char *ifname, struct hwtstamp_config *cfg);
int hwts_set(const char *ifname, struct hwtstamp_config *cfg);

#endif
