/* SPDX-License-Identifier: MIT */
/*
 * tracefs for the engine: where it is mounted, an instance of our own created and
 * removed through a `sys` journal (so `rtlab-probe sys restore` and `rtlab restore`
 * remove what a killed engine left), journaled writes of global tracefs files
 * (restored to their old value), and the parsing of header_page. Used by the trace
 * recorder (trace_rec.h) and by probes that need an instance of their own. All
 * functions return 0 or -errno unless they say otherwise.
 */
#ifndef RTLAB_TRACE_FS_H
#define RTLAB_TRACE_FS_H

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "sys.h"

/*
 * Where tracefs is mounted, from /proc/mounts: a tracefs mount, else a debugfs
 * mount's tracing/ directory. -ENOENT when neither is mounted, -EACCES when one is
 * but this process may not look into it (not root).
 */
int tfs_find(char *root, size_t len) RL_WUR;

/* An instance name: 1..64 of [A-Za-z0-9_.-], not "." or "..". */
bool tfs_name_ok(const char *name);

/* Whether path is "<a mounted tracefs>/instances/NAME" with a valid NAME. */
bool tfs_instance_path(const char *path);

/* A journal of tracefs changes (a `sys` journal: docs/sys-protocol.md). */
struct tfs_journal {
	int fd;			/* -1: not open */
	char path[PATH_MAX];
	struct sys_ctx c;
};

/*
 * Create the journal DIR/STEM-PID.journal (DIR made 0700 if missing), locked for as
 * long as it is open, with its header line (owner "rtlab-probe STEM"). -EEXIST when it
 * exists. j->fd is -1 on error.
 */
int tfs_journal_open(struct tfs_journal *j, const char *dir, const char *stem) RL_WUR;

/*
 * Create the instance ROOT/instances/NAME, journaled first (restore: rmdir, which
 * removes everything inside it). -EEXIST when it exists (nothing touched), -EACCES or
 * -EPERM without the right, -EIO when the journal cannot be written. path receives
 * the instance's directory.
 */
int tfs_instance_create(struct tfs_journal *j, const char *root, const char *name, char *path,
			size_t len) RL_WUR;

/* Remove an instance directory (retrying while the kernel says EBUSY, about 1 s). */
int tfs_instance_remove(const char *path) RL_WUR;

/*
 * Write value to a tracefs file outside our instance (e.g. osnoise/cpus), its old
 * value journaled first so restoring writes it back, or writes undo when it is not
 * NULL (for files whose content is not valid input, e.g. hwlat_detector/mode's
 * "none [round-robin] per-cpu"). The kernel's errno on failure (e.g. -EBUSY), -EIO
 * when the journal cannot be written.
 */
int tfs_write_journaled(struct tfs_journal *j, const char *path, const char *value,
			const char *undo) RL_WUR;

/*
 * Restore every entry of the journal in reverse order (the instance removed, old
 * values written back), then delete the journal and close it. -EIO when an entry
 * could not be restored (the journal is kept, for `rtlab restore`).
 */
int tfs_journal_restore(struct tfs_journal *j) RL_WUR;

/* A whole tracefs file (at most 16 MiB), malloc'ed and NUL-terminated. */
int tfs_read(const char *path, char **buf, size_t *len) RL_WUR;

/* Write value to an (instance's) file with one write(2). */
int tfs_write(const char *path, const char *value) RL_WUR;

/* The offsets and sizes of header_page's fields, parsed from its text. */
struct tfs_page_layout {
	unsigned ts_off, ts_size;
	unsigned commit_off, commit_size;
	unsigned data_off, data_size;
};

/* Parse header_page ("field: ... commit; offset:8; size:8; ..."). -EINVAL when a field
 * (timestamp, commit, data) is missing or the sizes make no sense. */
int tfs_page_layout_parse(const char *text, struct tfs_page_layout *l) RL_WUR;

/* The page size: data offset + data size. */
static inline size_t tfs_page_size(const struct tfs_page_layout *l)
{
	return (size_t)l->data_off + l->data_size;
}

/* The ring buffer's flags in a page's commit word. */
#define TFS_MISSED_EVENTS (1UL << 31)
#define TFS_MISSED_STORED (1UL << 30)

/*
 * The length of the page's meaningful bytes: data offset + committed bytes (+ the
 * missed-events count word when TFS_MISSED_STORED is set), at most n. The commit word
 * is read in this machine's byte order. 0 when n is shorter than the header.
 */
size_t tfs_page_trim(const unsigned char *page, size_t n, const struct tfs_page_layout *l);

/*
 * A CPU set as tracing_cpumask wants it: hex, in groups of 32 bits separated by
 * commas, most significant first ("3", "1,00000000"). ncpus: how many CPUs the mask
 * covers (at least the highest set CPU + 1).
 */
void tfs_cpumask_format(const cpu_set_t *set, int ncpus, char *out, size_t len);

#endif
