/* SPDX-License-Identifier: MIT */
/*
 * Whole files, mostly the kernel's small ones (/proc, /sys): read, written, and
 * written as JSON members. The one reader of such files for every layer (the
 * probes' headers, `sys`, the preemption model), so that a file is read, trimmed
 * and reported the same way wherever it is named. All functions return 0 or -errno
 * unless they say otherwise.
 */
#ifndef RTLAB_SYSFILE_H
#define RTLAB_SYSFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"

/* A small text file into buf (NUL-terminated, trailing newlines and blanks removed). */
int sf_read(const char *path, char *buf, size_t len) RL_WUR;

/* A file holding one integer (e.g. -1 or 950000). */
int sf_read_int(const char *path, int64_t *v) RL_WUR;

/* Everything readable from fd into a malloc'ed, NUL-terminated buffer (at most 16 MiB). */
int sf_slurp(int fd, char **buf, size_t *len) RL_WUR;

/* The whole file at path, as sf_slurp. */
int sf_read_all(const char *path, char **buf, size_t *len) RL_WUR;

/* The whole file at path, malloc'ed, trailing newlines removed (a sysfs value). */
int sf_read_text(const char *path, char **out) RL_WUR;

/* Write value with one write(2), as sysfs and procfs want it. */
int sf_write(const char *path, const char *value) RL_WUR;

/* Field 22 (starttime) of /proc/TID/stat; 0 when the task does not exist. */
uint64_t sf_starttime(int tid);

/*
 * One line of /proc/PID/cgroup, "ID:CONTROLLERS:PATH" (a trailing newline is dropped),
 * split in place: *controllers is the comma-separated list of a v1 hierarchy or ""
 * (the v2 line "0::"), *path the cgroup's path in its hierarchy. -EINVAL when the line
 * has fewer than two colons.
 */
int sf_cgroup_line(char *line, char **controllers, char **path) RL_WUR;

/* One mount of /proc/self/mountinfo: where, which file system, its super options. */
struct sf_mount {
	char dir[512];
	char fstype[64];
	char opts[1024];
};

/*
 * One line of /proc/self/mountinfo ("ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...]
 * - FSTYPE SOURCE SUPEROPTS"). -EINVAL when it is not such a line.
 */
int sf_mountinfo_line(const char *line, struct sf_mount *m) RL_WUR;

/* The file's text as a string member; null when unreadable. */
void sf_json_str(struct jsonw *w, const char *key, const char *path);
/* The file's integer; null when unreadable or not an integer. */
void sf_json_int(struct jsonw *w, const char *key, const char *path);
/* A kernel CPU list file ("0-3,6") as an array; empty or "(null)" -> [], null when
 * unreadable or not a list. */
void sf_json_cpulist(struct jsonw *w, const char *key, const char *path);

#endif
