/* SPDX-License-Identifier: MIT */
/*
 * The BPF side of the udp probe's AF_XDP path: the XSKMAP, the filter program
 * (udp_xdp_frame.c builds it) and the BPF link that attaches it to the interface,
 * native mode first, then generic (udp_xdp_setup.h).
 */
#include "udp_xdp_setup.h"

#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int uxdp_make_xskmap(uint32_t entries)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_XSKMAP;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = entries;
	snprintf(a.map_name, sizeof(a.map_name), "rtlab_udp_xsk");
	int fd = (int)sys_bpf(BPF_MAP_CREATE, &a);
	return fd >= 0 ? fd : -errno;
}

int uxdp_load_filter(uint32_t ip, uint16_t port, bool stamp, int map_fd, int miss_action,
		     char *why, size_t whylen)
{
	struct bpf_insn insns[UXF_PROG_MAX];
	size_t n = uxf_filter_prog(insns, ip, port, stamp, map_fd, miss_action);
	if (!n) {
		snprintf(why, whylen, "the program does not fit");
		return -E2BIG;
	}
	static char vlog[4096];
	union bpf_attr a;
	for (int attempt = 0;; attempt++) {
		memset(&a, 0, sizeof(a));
		a.prog_type = BPF_PROG_TYPE_XDP;
		a.insns = (uintptr_t)insns;
		a.insn_cnt = (uint32_t)n;
		a.license = (uintptr_t)"MIT"; /* it calls no GPL-only helper */
		snprintf(a.prog_name, sizeof(a.prog_name), "rtlab_udp");
		if (attempt) { /* again, with the verifier's log for the message */
			vlog[0] = '\0';
			a.log_buf = (uintptr_t)vlog;
			a.log_size = sizeof(vlog);
			a.log_level = 1;
		}
		int fd = (int)sys_bpf(BPF_PROG_LOAD, &a);
		if (fd >= 0)
			return fd;
		int e = errno;
		if (attempt || e == EPERM || e == EACCES) {
			/* the last line of the log says why */
			size_t l = attempt ? strnlen(vlog, sizeof(vlog) - 1) : 0;
			vlog[l] = '\0';
			while (l && vlog[l - 1] == '\n')
				vlog[--l] = '\0';
			const char *last = strrchr(vlog, '\n');
			snprintf(why, whylen, "%s%s%s", strerror(e), l ? ": " : "",
				 last ? last + 1 : vlog);
			return -e;
		}
	}
}

/* The XSKMAP, the filter program and its link to the interface. */
int uxdp_attach_program(struct uxdp *x, const struct oops *o)
{
	x->map = uxdp_make_xskmap(x->queue + 1);
	if (x->map < 0) {
		int e = -x->map;
		if (e == ENOSYS)
			return uxdp_fail(o, e, RL_EXIT_SKIPPED, "--path xdp: this kernel has no bpf(2) (CONFIG_BPF_SYSCALL)");
		if (e == EINVAL)
			return uxdp_fail(o, e, RL_EXIT_SKIPPED, "--path xdp: this kernel has no XSKMAP (CONFIG_XDP_SOCKETS)");
		return uxdp_priv_fail(o, e, "creating the XSKMAP", "CAP_BPF and CAP_NET_ADMIN");
	}
	union bpf_attr a;
	uint32_t key = x->queue, val = (uint32_t)x->xsk;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)x->map;
	a.key = (uintptr_t)&key;
	a.value = (uintptr_t)&val;
	if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) != 0)
		return uxdp_priv_fail(o, errno, "putting the socket into the XSKMAP", "CAP_NET_ADMIN");

	char why[200];
	x->prog = uxdp_load_filter(x->local.ip, x->local.port, x->stamp, x->map, XDP_PASS, why,
				   sizeof(why));
	if (x->prog < 0) {
		int e = -x->prog;
		if (e == EPERM || e == EACCES)
			return uxdp_priv_fail(o, e, "loading the XDP program", "CAP_BPF and CAP_NET_ADMIN");
		return uxdp_fail(o, e, RL_EXIT_SKIPPED,
			    "--path xdp: the kernel refused the XDP filter program: %s", why);
	}
	struct bpf_prog_info info;
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (uint32_t)x->prog;
	a.info.info_len = sizeof(info);
	a.info.info = (uintptr_t)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a) == 0)
		x->prog_id = info.id;

	for (int native = x->mode_req != UXDP_MODE_GENERIC; native >= 0; native--) {
		if (!native && x->mode_req == UXDP_MODE_NATIVE)
			break;
		memset(&a, 0, sizeof(a));
		a.link_create.prog_fd = (uint32_t)x->prog;
		a.link_create.target_ifindex = (uint32_t)x->ifindex;
		a.link_create.attach_type = BPF_XDP;
		a.link_create.flags = native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
		x->link = (int)sys_bpf(BPF_LINK_CREATE, &a);
		if (x->link >= 0) {
			x->native = native;
			return 0;
		}
		int e = errno;
		if (e == EBUSY || e == EEXIST)
			return uxdp_fail(o, e, RL_EXIT_ERROR,
				    "--path xdp: %s already has an XDP program (ip -d link show %s); rtlab does not replace it",
				    x->ifname, x->ifname);
		if (e == EPERM || e == EACCES)
			return uxdp_priv_fail(o, e, "attaching the XDP program", "CAP_NET_ADMIN");
		if (native)
			snprintf(x->native_err, sizeof(x->native_err), "%s", strerror(e));
		else if (e == EINVAL)
			return uxdp_fail(o, e, RL_EXIT_SKIPPED,
				    "--path xdp: the kernel cannot attach XDP through a BPF link (needs Linux 5.9 or later): %s",
				    strerror(e));
		else
			return uxdp_fail(o, e, RL_EXIT_ERROR, "--path xdp: attaching to %s: %s", x->ifname,
				    strerror(e));
	}
	return uxdp_fail(o, EOPNOTSUPP, RL_EXIT_SKIPPED,
		    "--xdp-mode native: %s cannot run XDP in the driver (%s); use --xdp-mode generic or auto",
		    x->ifname, x->native_err);
}
