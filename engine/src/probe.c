/* SPDX-License-Identifier: MIT */
/* The probe table, expanded from probes.def. */
#include "probe.h"

#include <string.h>

const struct probe_ops *const probe_table[] = {
#define PROBE(name) &name##_probe,
#include "probes.def"
#undef PROBE
	NULL,
};

const struct probe_ops *probe_find(const char *name)
{
	for (size_t i = 0; probe_table[i]; i++)
		if (strcmp(probe_table[i]->name, name) == 0)
			return probe_table[i];
	return NULL;
}
