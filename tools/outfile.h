/*
 * The output files of tools/overlap_sim (--json=FILE, --trace=FILE,
 * --svg=FILE): checked before anything runs, so that a path that cannot be
 * written fails in a second, not after the run; written after the run.
 * Not part of libovl.
 *
 * A regular file (or a path that does not exist yet) is written whole to
 * TARGET.tmp in the target's directory and renamed over TARGET, so that a
 * reader never sees half a file; a signal (SIGHUP, SIGINT, SIGTERM) during
 * that write removes TARGET.tmp. Anything else (/dev/null, a terminal, a
 * FIFO) is written in place, since renaming over it would replace the node
 * itself. A symbolic link is followed: its target is the file written, and
 * the link stays. A dangling link and a directory are refused.
 */
#ifndef OVL_OUTFILE_H
#define OVL_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  const char *flag; /* "--json": messages name the flag and the path */
  const char *path; /* as given; NULL: this output is not wanted */
  char *target;     /* the file written: path, or a symbolic link's target */
  char *canon;      /* the target as an absolute path without links */
  bool exists;      /* the target exists (dev, ino are its identity) */
  dev_t dev;
  ino_t ino;
  bool in_place; /* not a regular file: written in place, not replaced */
} outfile;

/* Resolves `path` for `flag` and proves that it can be written: a regular
 * or missing file by creating and removing TARGET.tmp, anything else by
 * opening it for writing. Refuses a path that is the same file as one of
 * the `ninputs` inputs (which must not be overwritten) or as one of the
 * `nothers` outputs prepared before (entries whose path is NULL are
 * skipped), since one would overwrite the other. Returns 0, or the exit
 * status with the message printed: TOOL_EXIT_USAGE for such a conflict,
 * TOOL_EXIT_RUNTIME for a path that cannot be written. */
int outfile_prepare(outfile *out, const char *flag, const char *path,
                    const char *const inputs[], size_t ninputs,
                    const outfile *others, size_t nothers);

/* Writes `len` bytes of `text` as the whole file. Returns 0, or -1 with
 * the message printed (it names the flag and the path). */
int outfile_write(const outfile *out, const char *text, size_t len);

/* Frees what outfile_prepare allocated; a zeroed outfile is fine too. */
void outfile_release(outfile *out);

#endif /* OVL_OUTFILE_H */
