/* Helpers the command-line tools share; see tool_util.h. */
#include "tool_util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* How long a process that found the processes lost waits before it ends
 * the launch (tool_procs_end). */
#define TOOL_LOST_GRACE_MS 1000

const char *progname = "overlap-sim";

int usage_error(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", progname);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help' for more information.\n", progname);
  return TOOL_EXIT_USAGE;
}

/* The one number syntax of every flag: decimal digits, with a '-' first
 * only where negative numbers are allowed (neg); no blank, no '+', no
 * hex, no "inf" or "nan". A real (real) may have a '.' and an exponent
 * (e or E, a sign, digits): "0.5", "5.", ".5", "1e-3". Returns whether s
 * is one. */
static bool number_syntax(const char *s, bool neg, bool real) {
  bool digits = false;
  if (*s == '-' && neg)
    s++;
  for (; *s >= '0' && *s <= '9'; s++)
    digits = true;
  if (real && *s == '.')
    for (s++; *s >= '0' && *s <= '9'; s++)
      digits = true;
  if (!digits)
    return false;
  if (real && (*s == 'e' || *s == 'E')) {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!(*s >= '0' && *s <= '9'))
      return false;
    while (*s >= '0' && *s <= '9')
      s++;
  }
  return *s == '\0';
}

bool parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  long v;
  if (!number_syntax(s, lo < 0, false))
    return false;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi || v < INT_MIN ||
      v > INT_MAX)
    return false;
  *out = (int)v;
  return true;
}

bool parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  double v;
  if (!number_syntax(s, lo < 0, true))
    return false;
  errno = 0;
  v = strtod(s, &end);
  /* ERANGE: an overflow is out of range (below); an underflow is the
   * nearest double (4.9e-324 is one; 1e-400 is 0). */
  if (*end != '\0' || !isfinite(v) || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

/* The errno of the first flush_output() that failed. A failed flush
 * empties the buffer, so that at close_output() nothing may be left to
 * fail again and say why. */
static int flush_errno;

/* The reader of stdout went away (EPIPE, where SIGPIPE did not end the
 * tool: it was ignored after tool_signals_init): end now, as SIGPIPE
 * would, with no message. */
static void reader_gone(void) {
  (void)raise(SIGPIPE);
  fflush(stderr);
  _exit(TOOL_EXIT_PIPE);
}

void flush_output(FILE *f) {
  /* A write that failed inside printf (its text was more than the
   * buffer) left the error flag and errno, and an empty buffer: this
   * flush succeeds, and errno is still the write's. */
  if ((fflush(f) != 0 || ferror(f)) && flush_errno == 0)
    flush_errno = errno;
  if (flush_errno == EPIPE)
    reader_gone();
}

int close_output(FILE *f, const char *name, int status) {
  bool failed = ferror(f) != 0;
  int e = 0;
  if (fflush(f) != 0) {
    failed = true;
    e = errno;
  }
  /* EBADF with nothing left to write: the stream's descriptor was closed
   * (`tool >&-`) and nothing was lost, as gnulib's close_stream says. */
  if (fclose(f) != 0 && errno != EBADF && !failed) {
    failed = true;
    e = errno;
  }
  if (!failed)
    return status;
  if (e == 0)
    e = flush_errno;
  /* Nobody reads any more (`| head -1`): a quiet end, as SIGPIPE's. */
  if (e == EPIPE)
    return status == TOOL_EXIT_USAGE ? status : TOOL_EXIT_PIPE;
  if (e != 0)
    fprintf(stderr, "%s: write error on %s: %s\n", progname, name,
            strerror(e));
  else
    fprintf(stderr, "%s: write error on %s\n", progname, name);
  return status == TOOL_EXIT_USAGE ? status : TOOL_EXIT_RUNTIME;
}

/* ------------------------------------------------------------------ */
/* Ends from outside: an interrupt, a reader that went away             */
/* ------------------------------------------------------------------ */

/* "PROG: interrupted\n" (led by "process P: " under mpirun), ready for
 * the handler, which may only make async-signal-safe calls. */
static char interrupted_msg[160];
static volatile sig_atomic_t interrupted_len;

static void on_interrupt(int sig) {
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  ssize_t w = write(STDERR_FILENO, interrupted_msg, (size_t)interrupted_len);
  (void)w;
  /* Die of the signal, as without the handler (the shell's status 130):
   * the signal is blocked while its handler runs, and delivered with the
   * default action when it returns. */
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(sig, &dfl, NULL);
  (void)raise(sig);
}

void tool_signals_rank(int rank) {
  char msg[sizeof interrupted_msg];
  if (rank > 0)
    snprintf(msg, sizeof msg, "process %d: %s: interrupted\n", rank,
             progname);
  else
    snprintf(msg, sizeof msg, "%s: interrupted\n", progname);
  /* The handler reads the length first: never more than the text. */
  interrupted_len = 0;
  memcpy(interrupted_msg, msg, sizeof msg);
  interrupted_len = (sig_atomic_t)strlen(msg);
}

void tool_signals_init(void) {
  struct sigaction sa = {.sa_handler = on_interrupt}, old;
  /* A filter ends when its reader does, whatever was inherited (a shell's
   * `trap '' PIPE`). Before MPI_Init, which may set its own. */
  (void)signal(SIGPIPE, SIG_DFL);
  tool_signals_rank(0);
  /* An interrupt that was ignored stays ignored (sh starts background
   * jobs so). */
  if (sigaction(SIGINT, NULL, &old) != 0 || old.sa_handler == SIG_IGN)
    return;
  sigemptyset(&sa.sa_mask);
  (void)sigaction(SIGINT, &sa, NULL);
}

/* The watcher of stdout's reader: poll() says POLLERR (a pipe) or POLLHUP
 * (a socket) once nobody can read what the tool writes. */
static void *watch_reader(void *arg) {
  struct pollfd p = {.fd = *(const int *)arg, .events = 0};
  for (;;) {
    int n = poll(&p, 1, -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (p.revents & POLLNVAL) != 0)
      return NULL;
    if ((p.revents & (POLLERR | POLLHUP)) != 0)
      break;
  }
  /* SIGPIPE's default action ends the process (the output files' handler,
   * when one is being written, removes its temporary file first); where
   * it is ignored, the next write says EPIPE. */
  (void)raise(SIGPIPE);
  return NULL;
}

void tool_watch_reader(int fd) {
  static int watched;
  struct stat st;
  pthread_t th;
  pthread_attr_t attr;
  if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return;
  watched = fd;
  if (pthread_attr_init(&attr) != 0)
    return;
  (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  (void)pthread_attr_setstacksize(&attr, 64 * 1024);
  (void)pthread_create(&th, &attr, watch_reader, &watched);
  pthread_attr_destroy(&attr);
}

const char *escape_arg(const char *s, char *buf, size_t len) {
  size_t k = 0;
  if (len == 0)
    return buf;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char one[5];
    const char *e = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n"
                    : *p == '\t' ? "\\t" : *p == '\r' ? "\\r" : NULL;
    if (e == NULL && *p >= 0x20 && *p < 0x7f)
      snprintf(one, sizeof one, "%c", *p);
    else if (e == NULL)
      snprintf(one, sizeof one, "\\x%02x", *p);
    size_t n = strlen(e != NULL ? e : one);
    if (k + n + sizeof "..." > len) {
      snprintf(buf + k, len - k, "...");
      return buf;
    }
    memcpy(buf + k, e != NULL ? e : one, n);
    k += n;
  }
  buf[k] = '\0';
  return buf;
}

uint64_t mul_sat(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The environment variable that overrides host_memory(), for tests. */
#define HOST_MEMORY_ENV "OVL_HOST_MEMORY"

/* cgroup v1 writes "no limit" as the largest page count in bytes, just
 * under 2^63; anything from 2^62 up is taken for no limit. */
#define CGROUP_NO_LIMIT ((uint64_t)1 << 62)

/* The limit in one cgroup file: bytes, or 0 for none ("max", v1's huge
 * number, or no such file). */
static uint64_t cgroup_limit(const char *file) {
  FILE *f = fopen(file, "r");
  unsigned long long v = 0;
  if (f == NULL)
    return 0;
  if (fscanf(f, "%llu", &v) != 1)
    v = 0;
  fclose(f);
  return (uint64_t)v >= CGROUP_NO_LIMIT ? 0 : (uint64_t)v;
}

/* The smaller of two limits, 0 meaning none. */
static uint64_t min_limit(uint64_t a, uint64_t b) {
  return a == 0 || (b != 0 && b < a) ? b : a;
}

/* The smallest limit in `file` of the cgroup at `path` (as
 * /proc/self/cgroup gives it, from '/') under the mount `root`, and of
 * every ancestor up to the mount's root: a limit on a parent binds its
 * children too. A path with ".." (a cgroup outside this process's cgroup
 * namespace) is read from the mount's root only. */
static uint64_t cgroup_tree_limit(const char *root, const char *path,
                                  const char *file) {
  char dir[4096], name[4096 + 64];
  size_t rootlen = strlen(root);
  uint64_t lim = 0;
  if (strstr(path, "..") != NULL)
    path = "";
  if ((size_t)snprintf(dir, sizeof dir, "%s%s", root, path) >= sizeof dir)
    snprintf(dir, sizeof dir, "%s", root);
  for (;;) {
    size_t n = strlen(dir);
    while (n > rootlen && dir[n - 1] == '/')
      dir[--n] = '\0';
    snprintf(name, sizeof name, "%s/%s", dir, file);
    lim = min_limit(lim, cgroup_limit(name));
    if (n <= rootlen)
      return lim;
    char *slash = strrchr(dir + rootlen, '/');
    if (slash == NULL)
      slash = dir + rootlen;
    *slash = '\0';
  }
}

/* Whether `list` (comma-separated, as in /proc/self/cgroup) names `c`. */
static bool has_controller(const char *list, size_t len, const char *c) {
  size_t n = strlen(c);
  for (const char *p = list, *end = list + len; p < end;) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    size_t k = comma != NULL ? (size_t)(comma - p) : (size_t)(end - p);
    if (k == n && memcmp(p, c, n) == 0)
      return true;
    p += k + 1;
  }
  return false;
}

uint64_t host_memory_from(const char *proc_cgroup, const char *cgroup_root,
                          uint64_t phys) {
  char line[4096], v1root[4096];
  FILE *f = fopen(proc_cgroup, "r");
  uint64_t lim = 0;
  snprintf(v1root, sizeof v1root, "%s/memory", cgroup_root);
  if (f == NULL) {
    /* No way to tell our own cgroup: the mounts' roots, as they are. */
    lim = min_limit(cgroup_tree_limit(cgroup_root, "", "memory.max"),
                    cgroup_tree_limit(v1root, "", "memory.limit_in_bytes"));
    return min_limit(phys, lim);
  }
  /* Lines "ID:CONTROLLERS:PATH": v2 is "0::PATH"; a v1 hierarchy with the
   * memory controller has it in CONTROLLERS. A machine may have both
   * (hybrid), and each limit applies. */
  while (fgets(line, sizeof line, f) != NULL) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL)
      continue;
    line[strcspn(line, "\n")] = '\0';
    if (c2 == c1 + 1 && strncmp(line, "0:", 2) == 0)
      lim = min_limit(lim,
                      cgroup_tree_limit(cgroup_root, c2 + 1, "memory.max"));
    else if (has_controller(c1 + 1, (size_t)(c2 - c1 - 1), "memory"))
      lim = min_limit(lim, cgroup_tree_limit(v1root, c2 + 1,
                                             "memory.limit_in_bytes"));
  }
  fclose(f);
  return min_limit(phys, lim);
}

/* OVL_HOST_MEMORY as a number of bytes, or 0 when it is not set or not a
 * positive number. */
static uint64_t host_memory_env(void) {
  const char *s = getenv(HOST_MEMORY_ENV);
  char *end;
  unsigned long long v;
  if (s == NULL || *s < '0' || *s > '9')
    return 0;
  errno = 0;
  v = strtoull(s, &end, 10);
  return errno == 0 && *end == '\0' ? (uint64_t)v : 0;
}

bool host_memory_overridden(void) { return host_memory_env() > 0; }

uint64_t host_memory(void) {
  long pages, size;
  if (host_memory_overridden())
    return host_memory_env();
  pages = sysconf(_SC_PHYS_PAGES);
  size = sysconf(_SC_PAGESIZE);
  return host_memory_from("/proc/self/cgroup", "/sys/fs/cgroup",
                          pages > 0 && size > 0
                              ? mul_sat((uint64_t)pages, (uint64_t)size)
                              : 0);
}

const char *format_bytes(uint64_t b, char *buf, size_t len) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB",
                                      "EB"};
  double v = (double)b;
  size_t u = 0;
  while (v >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1000;
    u++;
  }
  snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

/* ------------------------------------------------------------------ */
/* An MPI launch                                                        */
/* ------------------------------------------------------------------ */

/* The processes (tool_procs_init); NULL for one. */
static ovl_procs *tool_procs;
/* The process whose stderr lines the stream below leads with "process P:
 * " (P > 0), and whether the next byte starts a line. */
static int prefix_rank;
static bool prefix_at_line_start = true;

/* Writes all of iov[0..n) to fd 2 (one writev where it can: lines of
 * several processes mix less). Returns false on an error. */
static bool write_stderr(struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t w = writev(STDERR_FILENO, iov, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
  return true;
}

/* The stream `stderr` of a process P > 0 (fopencookie): what the tool
 * says goes at once to the real standard error, each line led by
 * "process P: ". Nothing is kept aside, so nothing can be dropped. */
static ssize_t prefix_write(void *cookie, const char *buf, size_t size) {
  char head[32];
  size_t done = 0;
  (void)cookie;
  snprintf(head, sizeof head, "process %d: ", prefix_rank);
  while (done < size) {
    const char *nl = memchr(buf + done, '\n', size - done);
    size_t n = nl != NULL ? (size_t)(nl - (buf + done)) + 1 : size - done;
    struct iovec iov[2] = {{head, strlen(head)},
                           {(char *)buf + done, n}};
    if (!write_stderr(prefix_at_line_start ? iov : iov + 1,
                      prefix_at_line_start ? 2 : 1))
      return done > 0 ? (ssize_t)done : -1;
    prefix_at_line_start = nl != NULL;
    done += n;
  }
  return (ssize_t)size;
}

/* The launcher's variables that say this process's index (the first of
 * ovl_launcher_rank's that is set) and the number of processes (the
 * first of OMPI_COMM_WORLD_SIZE and PMI_SIZE that is set), as
 * "NAME=VALUE[, NAME=VALUE]" in buf; *size: that number, or -1. */
static const char *launcher_env(char *buf, size_t len, int *size) {
  static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                      "PMI_RANK"};
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  char quoted[32];
  size_t n = 0;
  *size = -1;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0] && n == 0; i++) {
    const char *v = getenv(ranks[i]);
    if (v != NULL)
      n = (size_t)snprintf(buf, len, "%s=%s", ranks[i],
                           escape_arg(v, quoted, sizeof quoted));
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && n < len; i++) {
    const char *v = getenv(sizes[i]);
    if (v == NULL)
      continue;
    if (!parse_int(v, 1, INT_MAX, size))
      *size = -1;
    snprintf(buf + n, len - n, "%s%s=%s", n > 0 ? ", " : "", sizes[i],
             escape_arg(v, quoted, sizeof quoted));
    break;
  }
  return buf;
}

/* Process P > 0: stdout to /dev/null (process 0 prints the report), and
 * stderr a stream that leads each line with "process P: " (fd 2 itself
 * stays: what the runtime writes there, a sanitizer's report, MPI's
 * messages, arrives as it is). Returns false on an error. */
static bool quiet_other_process(int rank) {
  static const cookie_io_functions_t io = {.write = prefix_write};
  FILE *f;
  fflush(stdout);
  fflush(stderr);
  if (freopen("/dev/null", "w", stdout) == NULL)
    return false;
  prefix_rank = rank;
  f = fopencookie(NULL, "w", io);
  if (f == NULL || setvbuf(f, NULL, _IOLBF, BUFSIZ) != 0)
    return false;
  stderr = f;
  return true;
}

int tool_procs_init(int *argc, char ***argv, ovl_procs **out) {
  int who = ovl_launcher_rank(), rank, size, lsize;
  ovl_error err = {0};
  char env[160];
  *out = NULL;
  if (who < 0)
    return -1;
  if (!ovl_mpi_compiled()) {
    /* Every process: one that stayed silent would seem lost. */
    fprintf(stderr,
            "%s: started by an MPI launcher (%s), but built without MPI "
            "(./configure --with-mpi): every process runs alone\n",
            progname, launcher_env(env, sizeof env, &lsize));
    return -1;
  }
  /* Read before MPI_Init, which may set variables of its own (Open MPI
   * alone sets PMIX_RANK=0). */
  launcher_env(env, sizeof env, &lsize);
  if (ovl_procs_init(argc, argv, out, &err) != OVL_OK) {
    if (who > 0)
      fprintf(stderr, "process %d: ", who);
    fprintf(stderr, "%s: %s\n", progname, err.msg);
    return TOOL_EXIT_RUNTIME;
  }
  rank = ovl_procs_rank(*out);
  size = ovl_procs_size(*out);
  /* MPI's word on who this is goes. A process MPI finds alone where the
   * launcher's variables said otherwise (a variable left in the
   * environment, another MPI's launcher) is no launch: it leaves MPI and
   * runs as without a launcher, with a note, never silently as a
   * process P > 0 whose process 0 does not exist. */
  if (size == 1 && (who > 0 || lsize > 1)) {
    fprintf(stderr,
            "%s: note: the launcher's environment (%s) says process %d of "
            "an MPI launch, but MPI found one process: this one runs "
            "alone, as without a launcher\n",
            progname, env, who);
    ovl_procs_free(*out);
    *out = NULL;
    return -1;
  }
  if (who != rank || (lsize > 0 && lsize != size)) {
    if (rank > 0)
      fprintf(stderr, "process %d: ", rank);
    fprintf(stderr,
            "%s: note: the launcher's environment (%s) says process %d, "
            "but MPI says process %d of %d: MPI's word is used\n",
            progname, env, who, rank, size);
  }
  tool_procs = *out;
  if (rank > 0 && !quiet_other_process(rank)) {
    fprintf(stderr, "process %d: %s: cannot set up its output: %s\n", rank,
            progname, strerror(errno));
    return TOOL_EXIT_RUNTIME;
  }
  return -1;
}

bool tool_prints_report(void) { return ovl_procs_rank(tool_procs) == 0; }

void tool_shared_error(const char *fmt, ...) {
  const char *broken = ovl_procs_error(tool_procs);
  char msg[OVL_ERROR_MSG_MAX + 256];
  va_list ap;
  if (!tool_prints_report())
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The processes lost each other: tool_procs_end says why, once. What
   * the message says before that (a run's own error, which the library
   * leads it with) is printed here. */
  if (broken != NULL) {
    static const char then[] = "; then the processes lost each other: ";
    char *at = strstr(msg, broken);
    size_t n;
    if (at != NULL) {
      *at = '\0';
      n = strlen(msg);
      if (n >= sizeof then - 1 && strcmp(msg + n - (sizeof then - 1), then) == 0)
        msg[n - (sizeof then - 1)] = '\0';
      else
        return; /* nothing of its own */
    }
  }
  fprintf(stderr, "%s: %s\n", progname, msg);
}

int tool_agree(ovl_procs *procs, int rc) {
  if (procs == NULL)
    return rc;
  return ovl_procs_agree_exit(procs, rc < 0 ? -1 : rc);
}

int tool_procs_end(ovl_procs *procs, int rc) {
  const char *broken;
  if (procs == NULL)
    return rc;
  rc = ovl_procs_agree_exit(procs, rc);
  broken = ovl_procs_error(procs);
  if (broken != NULL) {
    /* Every process says it, led by "process P: " (process P > 0: its
     * stderr stream adds it), its own name dropped from the library's
     * text; in one write, so that another process's line, which comes at
     * the same moment, cannot land inside it. */
    char own[32];
    int rank = ovl_procs_rank(procs);
    size_t n = (size_t)snprintf(own, sizeof own, "process %d: ", rank);
    if (strncmp(broken, own, n) == 0)
      broken += n;
    fprintf(stderr, "%s%s: %s\n", rank == 0 ? "process 0: " : "", progname,
            broken);
  }
  /* ovl_procs_free ends the launch (MPI_Abort) when the processes lost
   * each other: what was printed must be out first, and the others,
   * which find it at the same step, have a moment to say it too before
   * the launch is ended under them. */
  fflush(NULL);
  if (broken != NULL) {
    struct timespec grace = {TOOL_LOST_GRACE_MS / 1000,
                             (TOOL_LOST_GRACE_MS % 1000) * 1000000L};
    nanosleep(&grace, NULL);
  }
  ovl_procs_free(procs);
  return rc;
}
