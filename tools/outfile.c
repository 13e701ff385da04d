/* The tools' output files; see outfile.h. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
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
/* The temporary file and signals: while it exists, SIGHUP, SIGINT,
 * SIGTERM and SIGPIPE (the reader of stdout gone: tool_watch_reader)
 * remove it before the process dies of them, so that an
 * interrupted write leaves the target as it was and nothing beside it.
 * The handler may only make async-signal-safe calls: the path waits in a
 * static buffer. */

static const int cleanup_signals[] = {SIGHUP, SIGINT, SIGTERM, SIGPIPE};
#define NCLEANUP (sizeof cleanup_signals / sizeof cleanup_signals[0])
static struct sigaction cleanup_saved[NCLEANUP];
static bool cleanup_installed[NCLEANUP];
static char cleanup_path[PATH_MAX + 16];
static volatile sig_atomic_t cleanup_armed;

static void cleanup_handler(int sig) {
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  const struct sigaction *then = &dfl;
  int saved_errno = errno;
  if (cleanup_armed)
    (void)unlink(cleanup_path);
  /* Then as without this handler: the one before it (the tool's, which
   * says "interrupted": tool_signals_init), or the default action, dying
   * of the signal so that the parent sees it. The signal is blocked while
   * its handler runs, so it is delivered, to that action, when the handler
   * returns. */
  for (size_t i = 0; i < NCLEANUP; i++)
    if (cleanup_signals[i] == sig && cleanup_installed[i])
      then = &cleanup_saved[i];
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(sig, then, NULL);
  (void)raise(sig);
  errno = saved_errno;
}

/* The handlers, until cleanup_disarm(). A signal that was ignored stays
 * ignored (sh starts background jobs with SIGINT ignored, nohup ignores
 * SIGHUP). */
static void cleanup_install(void) {
  for (size_t i = 0; i < NCLEANUP; i++) {
    struct sigaction sa = {.sa_handler = cleanup_handler};
    cleanup_installed[i] = false;
    if (sigaction(cleanup_signals[i], NULL, &cleanup_saved[i]) != 0 ||
        cleanup_saved[i].sa_handler == SIG_IGN)
      continue;
    sigemptyset(&sa.sa_mask);
    cleanup_installed[i] = sigaction(cleanup_signals[i], &sa, NULL) == 0;
  }
}

static void cleanup_disarm(void) {
  cleanup_armed = 0;
  for (size_t i = 0; i < NCLEANUP; i++) {
    if (cleanup_installed[i])
      (void)sigaction(cleanup_signals[i], &cleanup_saved[i], NULL);
    cleanup_installed[i] = false;
  }
}

/* ------------------------------------------------------------------ */
/* Paths                                                               */
/* ------------------------------------------------------------------ */

/* The directory of `path` (malloc'd): ".", "/", or all before its last
 * '/'. NULL when out of memory. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash == NULL   ? strdup(".")
         : slash == path ? strdup("/")
                         : strndup(path, (size_t)(slash - path));
}

/* The umask, without changing it (/proc/self/status says it since Linux
 * 4.7; elsewhere umask() is set back at once). */
static mode_t current_umask(void) {
  static mode_t mask;
  static bool known;
  char line[128];
  FILE *f;
  if (known)
    return mask;
  f = fopen("/proc/self/status", "re");
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    unsigned m;
    if (sscanf(line, "Umask: %o", &m) == 1) {
      mask = (mode_t)m;
      known = true;
      break;
    }
  }
  if (f != NULL)
    fclose(f);
  if (!known) {
    mask = umask(022);
    (void)umask(mask);
    known = true;
  }
  return mask;
}

/* A new empty file of a name no file has, .ovl-XXXXXX in the directory of
 * `target` (short, so that any name the directory takes works), open for
 * writing; its path in *tmp (malloc'd; NULL when out of memory). From
 * its creation on, a signal removes it (cleanup_disarm() ends that).
 * Returns the descriptor, or -1 with errno set. */
static int tmp_create(const char *target, char **tmp) {
  static const char name[] = "/.ovl-XXXXXX";
  char *dir = dir_of(target);
  sigset_t block, old;
  int fd, e;
  *tmp = NULL;
  if (dir == NULL) {
    errno = ENOMEM;
    return -1;
  }
  if (strlen(dir) + sizeof name > sizeof cleanup_path) {
    free(dir);
    errno = ENAMETOOLONG;
    return -1;
  }
  *tmp = malloc(strlen(dir) + sizeof name);
  if (*tmp == NULL) {
    free(dir);
    errno = ENOMEM;
    return -1;
  }
  sprintf(*tmp, "%s%s", strcmp(dir, "/") == 0 ? "" : dir, name);
  free(dir);
  /* The name is in the handler's buffer before a signal can find the
   * file: the signals wait while it is made. */
  cleanup_install();
  sigemptyset(&block);
  for (size_t i = 0; i < NCLEANUP; i++)
    sigaddset(&block, cleanup_signals[i]);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  fd = mkostemp(*tmp, O_CLOEXEC);
  e = errno;
  if (fd >= 0) {
    strcpy(cleanup_path, *tmp);
    atomic_signal_fence(memory_order_seq_cst);
    cleanup_armed = 1;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = e;
  return fd;
}

/* The absolute path without links of a file that does not exist (yet):
 * its directory's, then its name. NULL with errno set when the directory
 * cannot be resolved; *dir (malloc'd, may be NULL) is that directory. */
static char *missing_canon(const char *path, char **dir) {
  const char *slash = strrchr(path, '/');
  const char *base = slash != NULL ? slash + 1 : path;
  char *real, *canon = NULL;
  *dir = dir_of(path);
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

/* N of a name that ends in "PREFIXN" (N decimal digits, no more than an
 * int), or -1. */
static int fd_after(const char *s, const char *prefix) {
  size_t n = strlen(prefix);
  long v = 0;
  if (strncmp(s, prefix, n) != 0 || s[n] == '\0')
    return -1;
  for (s += n; *s != '\0'; s++) {
    if (*s < '0' || *s > '9' || v > INT_MAX / 10)
      return -1;
    v = v * 10 + (*s - '0');
  }
  return v <= INT_MAX ? (int)v : -1;
}

/* The descriptor a name says as written, or -1. */
static int descriptor_name(const char *p) {
  static const char *const std[] = {"/dev/stdin", "/dev/stdout",
                                     "/dev/stderr"};
  static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/",
                                     "/proc/thread-self/fd/"};
  char own[64];
  int fd;
  for (int i = 0; i < 3; i++)
    if (strcmp(p, std[i]) == 0)
      return i;
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if ((fd = fd_after(p, dirs[i])) >= 0)
      return fd;
  snprintf(own, sizeof own, "/proc/%ld/fd/", (long)getpid());
  return fd_after(p, own);
}

int outfile_named_descriptor(const char *path) {
  char a[PATH_MAX], b[PATH_MAX];
  const char *p = path;
  /* As many links as the kernel follows (MAXSYMLINKS). */
  for (int hops = 0; hops <= 40; hops++) {
    int fd = descriptor_name(p);
    ssize_t n;
    char *cur = p == a ? b : a; /* the buffer p is not in */
    if (fd >= 0)
      return fd;
    n = readlink(p, cur, sizeof a - 1);
    if (n < 0)
      return -1;
    cur[n] = '\0';
    if (cur[0] != '/') {
      /* Relative to the link's directory. */
      const char *slash = strrchr(p, '/');
      char joined[PATH_MAX];
      if (slash != NULL) {
        if ((size_t)snprintf(joined, sizeof joined, "%.*s/%s",
                             (int)(slash - p), p, cur) >= sizeof joined)
          return -1;
        memcpy(cur, joined, strlen(joined) + 1);
      }
    }
    p = cur;
  }
  return -1;
}

/* ------------------------------------------------------------------ */
/* Resolving                                                           */
/* ------------------------------------------------------------------ */

/* The name of descriptor fd in messages. */
static const char *fd_name(int fd, char *buf, size_t len) {
  static const char *const std[] = {"standard input", "standard output",
                                     "standard error"};
  if (fd >= 0 && fd < 3)
    return std[fd];
  snprintf(buf, len, "descriptor %d", fd);
  return buf;
}

/* A path that names a descriptor: written through it, in place. */
static int resolve_descriptor(outfile *out, int fd) {
  char name[32];
  struct stat st;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0)
    return fail(out, TOOL_EXIT_RUNTIME, "%s is not open",
                fd_name(fd, name, sizeof name));
  if ((fl & O_ACCMODE) == O_RDONLY)
    return fail(out, TOOL_EXIT_RUNTIME, "%s is open for reading only",
                fd_name(fd, name, sizeof name));
  out->fd = fd;
  out->in_place = true;
  if (fstat(fd, &st) == 0) {
    out->exists = true;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->regular = S_ISREG(st.st_mode);
  }
  return 0;
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
  out->regular = true;
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

/* What out->path names: a descriptor, or the target, whether it exists,
 * whether it is replaced or written in place. */
static int resolve(outfile *out) {
  struct stat lst, st;
  bool link;
  int fd = outfile_named_descriptor(out->path);
  /* By the name first: /dev/stdout that leads to a regular file
   * (`>> log`) is still the tool's standard output. */
  if (fd >= 0)
    return resolve_descriptor(out, fd);
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
  out->regular = S_ISREG(st.st_mode);
  out->in_place = !out->regular;
  /* A link to a regular file: the temporary file goes beside the target,
   * so that the rename replaces the target and not the link. A link to
   * anything else is opened through the link. */
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
  if (exists || out->exists || out->canon == NULL)
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
  return !a->exists && !b->exists && a->canon != NULL && b->canon != NULL &&
         strcmp(a->canon, b->canon) == 0;
}

/* An output that would replace an input, or that another output would
 * overwrite. Outputs written in place replace nothing: two may share a
 * node (both /dev/null, both standard output); one whose descriptor
 * leads to a regular file still must not be the schedule, nor a file
 * that another output replaces. */
static int check_conflicts(const outfile *out, const char *const inputs[],
                           size_t ninputs, const outfile *others,
                           size_t nothers) {
  if (out->in_place && !out->regular)
    return 0;
  for (size_t i = 0; i < ninputs; i++)
    if (inputs[i] != NULL && same_as_path(out, inputs[i]))
      return fail(out, TOOL_EXIT_USAGE,
                  "is the same file as the input %s; refusing to overwrite "
                  "it",
                  inputs[i]);
  for (size_t i = 0; i < nothers; i++)
    if (others[i].path != NULL && !(out->in_place && others[i].in_place) &&
        same_outputs(out, &others[i]))
      return fail(out, TOOL_EXIT_USAGE, "is the same file as %s=%s",
                  others[i].flag, others[i].path);
  return 0;
}

/* Proves that the output can be written, changing nothing. */
static int probe(const outfile *out) {
  char *tmp = NULL, *dir;
  int fd, rc = 0;
  if (out->fd >= 0)
    return 0; /* resolve_descriptor saw it open for writing */
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
  (void)current_umask();
  fd = tmp_create(out->target, &tmp);
  if (fd >= 0) {
    (void)close(fd);
    (void)unlink(tmp);
  } else {
    int e = errno;
    dir = dir_of(out->target);
    rc = fail(out, TOOL_EXIT_RUNTIME, "cannot create a file in %s: %s",
              dir != NULL ? dir : "its directory", strerror(e));
    free(dir);
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
  out->fd = -1;
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
/* Writing                                                             */
/* ------------------------------------------------------------------ */

/* Returns 0, or the errno of the write that failed. A descriptor that
 * does not block (a pipe the shell left non-blocking) is waited for. */
static int write_all(int fd, const char *text, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, text, len < SSIZE_MAX ? len : SSIZE_MAX);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      (void)poll(&p, 1, -1);
      continue;
    }
    if (n < 0)
      return errno;
    if (n == 0)
      return EIO;
    text += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Through the descriptor the path names, after what the tool printed on
 * its streams: at the descriptor's offset, or at the end where it
 * appends. */
static int write_descriptor(const outfile *out, const char *text,
                            size_t len) {
  int e;
  flush_output(stdout);
  fflush(stderr);
  e = write_all(out->fd, text, len);
  if (e != 0)
    fail(out, TOOL_EXIT_RUNTIME, "%s", strerror(e));
  return e != 0 ? -1 : 0;
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

/* The new file `fd` takes the mode and owner of the target it replaces
 * (the group alone where the owner cannot be given, and neither where
 * that is not permitted either: not an error); a new target gets 0666
 * less the umask, as open(2) would give it. */
static void keep_identity(int fd, const char *target) {
  struct stat st;
  if (stat(target, &st) != 0 || !S_ISREG(st.st_mode)) {
    (void)fchmod(fd, 0666 & ~current_umask());
    return;
  }
  if ((st.st_uid != geteuid() || st.st_gid != getegid()) &&
      fchown(fd, st.st_uid, st.st_gid) != 0 &&
      fchown(fd, (uid_t)-1, st.st_gid) != 0) {
    /* Neither permitted: the file keeps the caller's owner. */
  }
  (void)fchmod(fd, st.st_mode & 07777);
}

/* A regular or new file: a new file beside it, written whole, renamed
 * over TARGET. */
static int write_replace(const outfile *out, const char *text, size_t len) {
  char *tmp = NULL;
  int fd, e = 0;
  fd = tmp_create(out->target, &tmp);
  if (fd < 0) {
    char *dir = dir_of(out->target);
    e = errno;
    fail(out, TOOL_EXIT_RUNTIME, "cannot create a file in %s: %s",
         dir != NULL ? dir : "its directory", strerror(e));
    free(dir);
  } else {
    keep_identity(fd, out->target);
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
  if (out->fd >= 0)
    return write_descriptor(out, text, len);
  return out->in_place ? write_in_place(out, text, len)
                       : write_replace(out, text, len);
}

void outfile_release(outfile *out) {
  free(out->target);
  free(out->canon);
  out->target = out->canon = NULL;
}
