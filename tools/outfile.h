/*
 * The output files of tools/overlap_sim (--json=FILE, --trace=FILE,
 * --svg=FILE): checked before anything runs, so that a path that cannot be
 * written fails in a second, not after the run; written after the run.
 * Not part of libovl.
 *
 * A path that names one of the tool's open descriptors (/dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N, or a symbolic link to one of
 * those names) is written in place through that descriptor, whatever it
 * leads to: at its offset, appending where it was opened to append
 * (`>> log`), after what the tool printed before. Any other node that is
 * not a regular file (/dev/null, a terminal, a FIFO) is opened and written
 * in place, since renaming over it would replace the node itself.
 *
 * A regular file (or a path that does not exist yet) is written whole to
 * a new file of a name no file has (.ovl-XXXXXX, mkstemp) in the target's
 * directory, given the target's mode and owner (or, for a new file, 0666
 * less the umask), and renamed over TARGET, so that a reader never sees
 * half a file, and no other file (the schedule, another output, a file
 * named TARGET.tmp) can be in the way; a signal (SIGHUP, SIGINT, SIGTERM,
 * SIGPIPE) during that write removes it, and then takes the action it had
 * before (the tool's "interrupted", or death). A symbolic link is
 * followed: its target is the file written, and the link stays. A
 * dangling link and a directory are refused.
 */
#ifndef OVL_OUTFILE_H
#define OVL_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  const char *flag; /* "--json": messages name the flag and the path */
  const char *path; /* as given; NULL: this output is not wanted */
  char *target;     /* the file written: path, or a symbolic link's target
                       (NULL when written through a descriptor) */
  char *canon;      /* a missing target as an absolute path without links */
  bool exists;      /* the target exists (dev, ino are its identity) */
  dev_t dev;
  ino_t ino;
  bool regular;     /* the target is a regular file */
  bool in_place;    /* written in place (a descriptor, or not a regular
                       file), not replaced */
  int fd;           /* the descriptor the path names, or -1 */
} outfile;

/* Resolves `path` for `flag` and proves that it can be written: a regular
 * or missing file by creating and removing a temporary file beside it, a
 * descriptor by its open mode, anything else by opening it for writing.
 * Refuses a path that is the same file as one of the `ninputs` inputs
 * (which must not be overwritten) or as one of the `nothers` outputs
 * prepared before (entries whose path is NULL are skipped), since one
 * would overwrite the other (two outputs written in place may share a
 * node: both /dev/null, both standard output). Returns 0, or the exit
 * status with the message printed: TOOL_EXIT_USAGE for such a conflict,
 * TOOL_EXIT_RUNTIME for a path that cannot be written. */
int outfile_prepare(outfile *out, const char *flag, const char *path,
                    const char *const inputs[], size_t ninputs,
                    const outfile *others, size_t nothers);

/* Writes `len` bytes of `text` as the whole file (in place: at the
 * descriptor's offset, after flushing stdout and stderr). Returns 0, or
 * -1 with the message printed (it names the flag and the path). */
int outfile_write(const outfile *out, const char *text, size_t len);

/* Frees what outfile_prepare allocated; a zeroed outfile is fine too. */
void outfile_release(outfile *out);

/* The descriptor that `path` names as written, or through the symbolic
 * links it goes through: /dev/stdin, /dev/stdout, /dev/stderr (0, 1, 2),
 * /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N and
 * /proc/PID/fd/N of this process (N); -1 for any other path. */
int outfile_named_descriptor(const char *path);

#endif /* OVL_OUTFILE_H */
