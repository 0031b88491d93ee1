/* SPDX-License-Identifier: MIT */
/* The counter as the probes that spin on it report it (counter.h). */
#include "counter.h"

#include "jsonw.h"

void counter_write_effective(struct jsonw *w, const struct counter *c, const char *why,
			     bool with_calibration)
{
	jw_obj_begin(w, "counter");
	jw_str(w, "kind", counter_kind_name(c->kind));
	jw_str(w, "why", why ? why : "");
	jw_uint(w, "ps_per_tick", (uint64_t)(c->ns_per_tick * 1000.0 + 0.5));
	if (with_calibration)
		jw_uint(w, "calibration_ns", c->cal_span_ns);
	jw_obj_end(w);
}
