/* SPDX-License-Identifier: MIT */
/* Hardware timestamping configuration of a network interface (sys_hwts.h). */
#include "sys_hwts.h"

#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

struct name_val {
	const char *name;
	int val;
};

static const struct name_val tx_names[] = {
	{ "off", HWTSTAMP_TX_OFF },
	{ "on", HWTSTAMP_TX_ON },
	{ "onestep_sync", HWTSTAMP_TX_ONESTEP_SYNC },
	{ "onestep_p2p", HWTSTAMP_TX_ONESTEP_P2P },
};

static const struct name_val rx_names[] = {
	{ "none", HWTSTAMP_FILTER_NONE },
	{ "all", HWTSTAMP_FILTER_ALL },
	{ "some", HWTSTAMP_FILTER_SOME },
	{ "ptp_v1_l4_event", HWTSTAMP_FILTER_PTP_V1_L4_EVENT },
	{ "ptp_v1_l4_sync", HWTSTAMP_FILTER_PTP_V1_L4_SYNC },
	{ "ptp_v1_l4_delay_req", HWTSTAMP_FILTER_PTP_V1_L4_DELAY_REQ },
	{ "ptp_v2_l4_event", HWTSTAMP_FILTER_PTP_V2_L4_EVENT },
	{ "ptp_v2_l4_sync", HWTSTAMP_FILTER_PTP_V2_L4_SYNC },
	{ "ptp_v2_l4_delay_req", HWTSTAMP_FILTER_PTP_V2_L4_DELAY_REQ },
	{ "ptp_v2_l2_event", HWTSTAMP_FILTER_PTP_V2_L2_EVENT },
	{ "ptp_v2_l2_sync", HWTSTAMP_FILTER_PTP_V2_L2_SYNC },
	{ "ptp_v2_l2_delay_req", HWTSTAMP_FILTER_PTP_V2_L2_DELAY_REQ },
	{ "ptp_v2_event", HWTSTAMP_FILTER_PTP_V2_EVENT },
	{ "ptp_v2_sync", HWTSTAMP_FILTER_PTP_V2_SYNC },
	{ "ptp_v2_delay_req", HWTSTAMP_FILTER_PTP_V2_DELAY_REQ },
	{ "ntp_all", HWTSTAMP_FILTER_NTP_ALL },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int from_name(const struct name_val *t, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return t[i].val;
	return -1;
}

static const char *to_name(const struct name_val *t, size_t n, int val)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].val == val)
			return t[i].name;
	return NULL;
}

int hwts_tx_from_name(const char *name)
{
	return from_name(tx_names, N_OF(tx_names), name);
}

int hwts_rx_from_name(const char *name)
{
	return from_name(rx_names, N_OF(rx_names), name);
}

const char *hwts_tx_name(int tx)
{
	return to_name(tx_names, N_OF(tx_names), tx);
}

const char *hwts_rx_name(int rx)
{
	return to_name(rx_names, N_OF(rx_names), rx);
}

bool hwts_ifname_ok(const char *ifname)
{
	size_t n = ifname ? strlen(ifname) : 0;
	if (n == 0 || n >= IFNAMSIZ || strcmp(ifname, ".") == 0 || strcmp(ifname, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (ifname[i] == '/' || ifname[i] == ':' || isspace((unsigned char)ifname[i]) ||
		    !isprint((unsigned char)ifname[i]))
			return false;
	return true;
}

static int hwts_ioctl(const char *ifname, unsigned long req, struct hwtstamp_config *cfg)
{
	if (!hwts_ifname_ok(ifname))
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, strlen(ifname));
	ifr.ifr_data = (char *)cfg;
	int r = ioctl(fd, req, &ifr) == 0 ? 0 : -errno;
	close(fd);
	return r;
}

int hwts_get(const char *ifname, struct hwtstamp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	return hwts_ioctl(ifname, SIOCGHWTSTAMP, cfg);
}

int hwts_set(const char *ifname, struct hwtstamp_config *cfg)
{
	cfg->flags = 0;
	return hwts_ioctl(ifname, SIOCSHWTSTAMP, cfg);
}
