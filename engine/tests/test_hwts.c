/* SPDX-License-Identifier: MIT */
/* Hardware timestamping names and interface-name checks of the `hwtstamp` op. */
#include <errno.h>
#include <string.h>

#include "sys_hwts.h"
#include "tap.h"

int main(void)
{
	CHECK(hwts_tx_from_name("on") == HWTSTAMP_TX_ON);
	CHECK(hwts_tx_from_name("off") == HWTSTAMP_TX_OFF);
	CHECK(hwts_tx_from_name("ON") == -1 && hwts_tx_from_name(NULL) == -1);
	CHECK(hwts_rx_from_name("all") == HWTSTAMP_FILTER_ALL);
	CHECK(hwts_rx_from_name("ptp_v2_event") == HWTSTAMP_FILTER_PTP_V2_EVENT);
	CHECK(hwts_rx_from_name("ntp_all") == HWTSTAMP_FILTER_NTP_ALL);
	CHECK(hwts_rx_from_name("everything") == -1);
	/* names round-trip; values the table does not know have no name */
	for (int v = 0; v <= HWTSTAMP_FILTER_NTP_ALL; v++) {
		const char *n = hwts_rx_name(v);
		CHECK(n != NULL && hwts_rx_from_name(n) == v);
	}
	CHECK(hwts_tx_name(1000) == NULL && hwts_rx_name(-1) == NULL);
	CHECK(strcmp(hwts_tx_name(HWTSTAMP_TX_ONESTEP_SYNC), "onestep_sync") == 0);

	CHECK(hwts_ifname_ok("eth0") && hwts_ifname_ok("enp3s0f1") && hwts_ifname_ok("veth-a.5"));
	CHECK(!hwts_ifname_ok("") && !hwts_ifname_ok(NULL) && !hwts_ifname_ok("."));
	CHECK(!hwts_ifname_ok("..") && !hwts_ifname_ok("a/b") && !hwts_ifname_ok("eth 0"));
	CHECK(!hwts_ifname_ok("eth0:1") && !hwts_ifname_ok("abcdefghijklmnop")); /* 16 > 15 */
	CHECK(hwts_ifname_ok("abcdefghijklmno"));

	struct hwtstamp_config cfg;
	CHECK(hwts_get("../x", &cfg) == -EINVAL);
	return tap_done("hwts");
}
