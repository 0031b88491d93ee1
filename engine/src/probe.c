/* SPDX-License-Identifier: MIT */
/* The probe table, expanded from probes.def, and the life of a probe's context. */
#include "probe.h"

#include <stdlib.h>
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

void *probe_ctx_new(const struct probe_ops *p)
{
	size_t size = (p->ctx_size + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	void *ctx = aligned_alloc(RL_CACHELINE, size);
	if (ctx)
		memset(ctx, 0, size);
	return ctx;
}

void probe_ctx_free(const struct probe_ops *p, void *ctx)
{
	p->fini(ctx);
	free(ctx);
}
