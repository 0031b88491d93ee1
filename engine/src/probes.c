/* SPDX-License-Identifier: MIT */
/* The probe table: adding a probe is one file plus one line here. */
#include <string.h>

#include "probe.h"

const struct probe_ops *const probe_table[] = {
	&timer_probe,
	&noise_probe,
	&interfere_probe,
	&udp_probe,
	&event_probe,
	&switch_probe,
	&overhead_probe,
	NULL,
};

const struct probe_ops *probe_find(const char *name)
{
	for (size_t i = 0; probe_table[i]; i++)
		if (strcmp(probe_table[i]->name, name) == 0)
			return probe_table[i];
	return NULL;
}
