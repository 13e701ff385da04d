/* The tools' output files; see outfile.h. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_util.h"

/* "PROG: FLAG=PATH: message" on stderr; returns `status`. */
static int fail(const outfile *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const outfile *out, int status, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: %s=%s: ", progname, out->flag, out->path);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return status;
}

/* ------------------------------------------------------------------ */
/* TARGET.tmp and signals: while it exists, SIGHUP, SIGINT and SIGTERM
 * remove it before the process dies of them, so that an interrupted write
 * leaves the target as it was and nothing beside it. The handler may only
 * make async-signal-safe calls: the path waits in a static buffer. */

static const int cleanup_signals[] = {SIGHUP, SIGINT, SIGTERM};
#define NCLEANUP (sizeof cleanup_signals / sizeof cleanup_signals[0])
static struct sigaction cleanup_saved[NCLEANUP];
static bool cleanup_installed[NCLEANUP];
static char cleanup_path[PATH_MAX + 8];
static volatile sig_atomic_t cleanup_armed;

static void cleanup_handler(int sig) {
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  int saved_errno = errno;
  if (cleanup_armed)
    (void)unlink(cleanup_path);
  /* Die of the signal, as without the handler: the parent sees it. The
   * signal is blocked while its handler runs, so it is delivered, with the
   * default action, when the handler returns. */
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(sig, &dfl, NULL);
  (void)raise(sig);
  errno = saved_errno;
}

/* From now until cleanup_disarm(), a signal removes `path`. A signal that
 * was ignored stays ignored (sh starts background jobs with SIGINT ignored,
 * nohup ignores SIGHUP). False if the path is too long to keep. */
static bool cleanup_arm(const char *path) {
  size_t n = strlen(path);
  if (n >= sizeof cleanup_path)
    return false;
  memcpy(cleanup_path, path, n + 1);
  /* The path is complete before the flag says so, even to a handler. */
  atomic_signal_fence(memory_order_seq_cst);
  cleanup_armed = 1;
  for (size_t i = 0; i < NCLEANUP; i++) {
    struct sigaction sa = {.sa_handler = cleanup_handler};
    cleanup_installed[i] = false;
    if (sigaction(cleanup_signals[i], NULL, &cleanup_saved[i]) != 0 ||
        cleanup_saved[i].sa_handler == SIG_IGN)
      continue;
    sigemptyset(&sa.sa_mask);
    cleanup_installed[i] =
        sigaction(cleanup_signals[i], &sa, NULL) == 0;
  }
  return true;
}

static void cleanup_disarm(void) {
  for (size_t i = 0; i < NCLEANUP; i++)
    if (cleanup_installed[i])
      (void)sigaction(cleanup_signals[i], &cleanup_saved[i], NULL);
  cleanup_armed = 0;
}

/* ------------------------------------------------------------------ */

/* TARGET.tmp (malloc'd), or NULL out of memory. */
static char *tmp_name(const outfile *out) {
  char *tmp = malloc(strlen(out->target) + sizeof ".tmp");
  if (tmp != NULL)
    sprintf(tmp, "%s.tmp", out->target);
  return tmp;
}

/* The absolute path without links of a file that does not exist (yet):
 * its directory's, then its name. NULL with errno set when the directory
 * cannot be resolved; *dir (malloc'd, may be NULL) is that directory. */
static char *missing_canon(const char *path, char **dir) {
  const char *slash = strrchr(path, '/');
  const char *base = slash != NULL ? slash + 1 : path;
  char *real, *canon = NULL;
  *dir = slash == NULL   ? strdup(".")
         : slash == path ? strdup("/")
                         : strndup(path, (size_t)(slash - path));
  if (*dir == NULL)
    return NULL;
  real = realpath(*dir, NULL);
  if (real == NULL)
    return NULL;
  canon = malloc(strlen(real) + strlen(base) + 2);
  if (canon != NULL)
    sprintf(canon, "%s%s%s", real,
            real[strlen(real) - 1] == '/' ? "" : "/", base);
  else
    errno = ENOMEM;
  free(real);
  return canon;
}

/* A path that does not exist: it is created in its directory, which must
 * exist. */
static int resolve_missing(outfile *out) {
  char *dir = NULL;
  size_t n = strlen(out->path);
  int rc = 0;
  if (n > 0 && out->path[n - 1] == '/')
    return fail(out, TOOL_EXIT_RUNTIME,
                "cannot create it: the name ends in '/'");
  out->canon = missing_canon(out->path, &dir);
  if (out->canon == NULL)
    rc = fail(out, TOOL_EXIT_RUNTIME, "cannot create it in %s: %s",
              dir != NULL ? dir : "its directory", strerror(errno));
  else if ((out->target = strdup(out->path)) == NULL)
    rc = fail(out, TOOL_EXIT_RUNTIME, "out of memory");
  free(dir);
  return rc;
}

/* A symbolic link to nothing: writing through it would create a file that
 * the user never named, so it is refused. */
static int refuse_dangling(const outfile *out) {
  char to[PATH_MAX];
  ssize_t n = readlink(out->path, to, sizeof to - 1);
  if (n < 0)
    return fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(ENOENT));
  to[n] = '\0';
  return fail(out, TOOL_EXIT_RUNTIME,
              "a symbolic link to '%s', which does not exist", to);
}

/* What out->path names: the target, whether it exists, whether it is
 * replaced or written in place. */
static int resolve(outfile *out) {
  struct stat lst, st;
  bool link;
  if (lstat(out->path, &lst) != 0) {
    if (errno == ENOENT)
      return resolve_missing(out);
    return fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(errno));
  }
  link = S_ISLNK(lst.st_mode);
  if (link && stat(out->path, &st) != 0) {
    if (errno == ENOENT)
      return refuse_dangling(out);
    return fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(errno));
  }
  if (!link)
    st = lst;
  if (S_ISDIR(st.st_mode))
    return fail(out, TOOL_EXIT_RUNTIME, "is a directory");
  out->exists = true;
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  out->in_place = !S_ISREG(st.st_mode);
  /* A link to a regular file: TARGET.tmp goes beside the target, so that
   * the rename replaces the target and not the link. A link to anything
   * else is opened through the link (/dev/stdout to a pipe has no path). */
  if (link && !out->in_place) {
    out->target = realpath(out->path, NULL);
    if (out->target == NULL)
      return fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(errno));
  } else if ((out->target = strdup(out->path)) == NULL) {
    return fail(out, TOOL_EXIT_RUNTIME, "out of memory");
  }
  return 0;
}

/* Whether the file at `path` is out's target: the same inode, or, where
 * neither exists yet, the same resolved path. */
static bool same_as_path(const outfile *out, const char *path) {
  struct stat st;
  bool exists = stat(path, &st) == 0, same = false;
  char *canon, *dir = NULL;
  if (exists && out->exists)
    return st.st_dev == out->dev && st.st_ino == out->ino;
  if (exists || out->exists)
    return false;
  canon = missing_canon(path, &dir);
  same = canon != NULL && strcmp(canon, out->canon) == 0;
  free(canon);
  free(dir);
  return same;
}

static bool same_outputs(const outfile *a, const outfile *b) {
  if (a->exists && b->exists)
    return a->dev == b->dev && a->ino == b->ino;
  return !a->exists && !b->exists && strcmp(a->canon, b->canon) == 0;
}

/* An output that would replace an input, or that another output would
 * overwrite. One written in place replaces nothing (two outputs may both
 * be /dev/null). */
static int check_conflicts(const outfile *out, const char *const inputs[],
                           size_t ninputs, const outfile *others,
                           size_t nothers) {
  if (out->in_place)
    return 0;
  for (size_t i = 0; i < ninputs; i++)
    if (inputs[i] != NULL && same_as_path(out, inputs[i]))
      return fail(out, TOOL_EXIT_USAGE,
                  "is the same file as the input %s; refusing to overwrite "
                  "it",
                  inputs[i]);
  for (size_t i = 0; i < nothers; i++)
    if (others[i].path != NULL && !others[i].in_place &&
        same_outputs(out, &others[i]))
      return fail(out, TOOL_EXIT_USAGE, "is the same file as %s=%s",
                  others[i].flag, others[i].path);
  return 0;
}

/* TARGET.tmp exists (left by a run that was killed outright): a regular
 * file is replaced; anything else is refused, since the rename would move
 * it over the target. */
static int check_old_tmp(const outfile *out, const char *tmp) {
  struct stat st;
  if (lstat(tmp, &st) != 0 || S_ISREG(st.st_mode))
    return 0;
  return fail(out, TOOL_EXIT_RUNTIME,
              "%s exists and is not a regular file; remove it", tmp);
}

/* Proves that the output can be written, changing nothing. */
static int probe(const outfile *out) {
  char *tmp;
  int fd, rc = 0;
  if (out->in_place) {
    struct stat st;
    bool ok;
    /* Opening a FIFO for writing waits for a reader: only the permission
     * is checked now. O_NONBLOCK: a device does not wait either. */
    if (stat(out->target, &st) == 0 && S_ISFIFO(st.st_mode)) {
      ok = access(out->target, W_OK) == 0;
    } else {
      fd = open(out->target, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      ok = fd >= 0;
      if (ok)
        (void)close(fd);
    }
    return ok ? 0
              : fail(out, TOOL_EXIT_RUNTIME,
                     "cannot open it for writing: %s", strerror(errno));
  }
  if ((tmp = tmp_name(out)) == NULL)
    return fail(out, TOOL_EXIT_RUNTIME, "out of memory");
  if (!cleanup_arm(tmp)) {
    free(tmp);
    return fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(ENAMETOOLONG));
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd >= 0) {
    (void)close(fd);
    (void)unlink(tmp);
  } else if (errno == EEXIST) {
    rc = check_old_tmp(out, tmp);
  } else {
    rc = fail(out, TOOL_EXIT_RUNTIME, "cannot create %s: %s", tmp,
              strerror(errno));
  }
  cleanup_disarm();
  free(tmp);
  return rc;
}

int outfile_prepare(outfile *out, const char *flag, const char *path,
                    const char *const inputs[], size_t ninputs,
                    const outfile *others, size_t nothers) {
  int rc;
  memset(out, 0, sizeof *out);
  out->flag = flag;
  out->path = path;
  rc = resolve(out);
  if (rc == 0)
    rc = check_conflicts(out, inputs, ninputs, others, nothers);
  if (rc == 0)
    rc = probe(out);
  if (rc != 0) {
    outfile_release(out);
    out->path = NULL;
  }
  return rc;
}

/* ------------------------------------------------------------------ */

/* Returns 0, or the errno of the write that failed. */
static int write_all(int fd, const char *text, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, text, len < SSIZE_MAX ? len : SSIZE_MAX);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    if (n == 0)
      return EIO;
    text += n;
    len -= (size_t)n;
  }
  return 0;
}

/* A device, a FIFO...: opened as it is (no O_CREAT, no O_TRUNC), every
 * write and the close checked (/dev/full fails here). */
static int write_in_place(const outfile *out, const char *text,
                          size_t len) {
  int fd = open(out->target, O_WRONLY | O_NOCTTY | O_CLOEXEC), e;
  if (fd < 0) {
    fail(out, TOOL_EXIT_RUNTIME, "cannot open it for writing: %s",
         strerror(errno));
    return -1;
  }
  e = write_all(fd, text, len);
  if (close(fd) != 0 && e == 0)
    e = errno;
  if (e != 0)
    fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(e));
  return e != 0 ? -1 : 0;
}

/* A regular or new file: TARGET.tmp, written whole, renamed over TARGET. */
static int write_replace(const outfile *out, const char *text, size_t len) {
  char *tmp = tmp_name(out);
  int fd = -1, e = 0;
  if (tmp == NULL) {
    fail(out, TOOL_EXIT_RUNTIME, "out of memory");
    return -1;
  }
  if (check_old_tmp(out, tmp) != 0) {
    free(tmp);
    return -1;
  }
  if (!cleanup_arm(tmp)) {
    fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(ENAMETOOLONG));
    free(tmp);
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
            0666);
  if (fd < 0) {
    fail(out, TOOL_EXIT_RUNTIME, "cannot create %s: %s", tmp,
         strerror(errno));
    e = -1;
  } else {
    e = write_all(fd, text, len);
    if (close(fd) != 0 && e == 0)
      e = errno;
    if (e == 0 && rename(tmp, out->target) != 0)
      e = errno;
    if (e != 0) {
      fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(e));
      (void)unlink(tmp);
    }
  }
  cleanup_disarm();
  free(tmp);
  return e != 0 ? -1 : 0;
}

int outfile_write(const outfile *out, const char *text, size_t len) {
  return out->in_place ? write_in_place(out, text, len)
                       : write_replace(out, text, len);
}

void outfile_release(outfile *out) {
  free(out->target);
  free(out->canon);
  out->target = out->canon = NULL;
}
