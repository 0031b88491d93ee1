/* SPDX-License-Identifier: MIT */
/* Clock domains of the event probe (the offset arithmetic is in phc.c). */
#include "event.h"

const char *const ev_domain_names[] = { "monotonic", "realtime", "phc", "hte", NULL };
