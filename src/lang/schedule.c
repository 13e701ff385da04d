/*
 * Schedules (include/ovl.h, "Schedules"): parse a text or a file into an
 * ovl_schedule (syntax.c), bind it into programs (bind.c); and the
 * one-call forms ovl_program_parse and ovl_program_load, parse then bind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lang/lang.h"

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

/* The line and column of text[off]. */
static void text_pos(const char *text, size_t off, int *line, int *col) {
  const char *start = text, *p = text, *end = text + off;
  *line = 1;
  while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
    (*line)++;
    start = ++p;
  }
  *col = (int)(end - start) + 1;
}

/* What the lexer needs of a text: at most MAX_TEXT bytes, no NUL. */
static ovl_status check_text(const char *text, size_t len,
                             const char *filename, ovl_error *err) {
  const char *nul;
  if (len > MAX_TEXT)
    return ovl__err(err, OVL_EPARSE,
                    "%s: schedule too large (%zu bytes; max %zu MiB)",
                    filename, len, MAX_TEXT >> 20);
  if (len > 0 && (nul = memchr(text, '\0', len)) != NULL) {
    int line, col;
    text_pos(text, (size_t)(nul - text), &line, &col);
    return ovl__err(err, OVL_EPARSE, "%s:%d:%d: binary data (NUL byte)",
                    filename, line, col);
  }
  return OVL_OK;
}

/* A file's bytes into *buf (malloc'd), refusing more than MAX_TEXT. */
static ovl_status read_text(const char *path, char **buf, size_t *len,
                            ovl_error *err) {
  FILE *f;
  struct stat sb;
  char *p;
  size_t cap = 0, n;
  ovl_status st = OVL_OK;
  *buf = NULL;
  *len = 0;
  if ((f = fopen(path, "rb")) == NULL)
    return ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
  /* A regular file's size is known up front; pipes are read up to the
   * limit. */
  if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
      (uint64_t)sb.st_size > MAX_TEXT) {
    fclose(f);
    return ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)", path,
                    MAX_TEXT >> 20);
  }
  for (;;) {
    if (*len == cap) {
      if (cap > MAX_TEXT) {
        st = ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)",
                      path, MAX_TEXT >> 20);
        break;
      }
      cap = cap ? 2 * cap : 65536;
      if ((p = realloc(*buf, cap)) == NULL) {
        st = ovl__err(err, OVL_ENOMEM, "%s: out of memory reading it", path);
        break;
      }
      *buf = p;
    }
    n = fread(*buf + *len, 1, cap - *len, f);
    *len += n;
    if (n == 0) {
      if (ferror(f))
        st = ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
      break;
    }
  }
  if (st == OVL_OK && *len > MAX_TEXT)
    st = ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)", path,
                  MAX_TEXT >> 20);
  fclose(f);
  if (st != OVL_OK) {
    free(*buf);
    *buf = NULL;
  }
  return st;
}

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

void ovl_schedule_free(ovl_schedule *s) {
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->pnames.n; i++) {
    free(s->params[i].name);
    free(s->params[i].plain);
    free(s->params[i].cpu_plain);
  }
  free(s->params);
  ovl__names_free(&s->pnames);
  free(s->stmts);
  free(s->calls);
  free(s->names);
  free(s->kws);
  free(s->items);
  free(s->exprs);
  free(s->enodes);
  if (s->own_text)
    free((char *)s->text);
  free(s->filename);
  free(s);
}

/* Parse a checked text. `owned`: the schedule takes `text` (malloc'd, freed
 * here on failure); else it keeps a copy when `copy`, or borrows it. */
static ovl_status parse_text(const char *text, size_t len,
                             const char *filename, char *owned, bool copy,
                             ovl_schedule **out, ovl_error *err) {
  ovl_schedule *s = calloc(1, sizeof *s);
  ovl_status st;
  if (s == NULL || (s->filename = ovl__strdup(filename)) == NULL) {
    free(s);
    free(owned);
    return ovl__lang_nomem(err, filename);
  }
  s->len = len;
  if (owned != NULL) {
    s->text = owned;
    s->own_text = true;
  } else if (copy && len > 0) {
    char *t = malloc(len);
    if (t == NULL) {
      ovl_schedule_free(s);
      return ovl__lang_nomem(err, filename);
    }
    memcpy(t, text, len);
    s->text = t;
    s->own_text = true;
  } else {
    s->text = len > 0 ? text : "";
  }
  if ((st = ovl__syntax_parse(s, err)) != OVL_OK) {
    ovl_schedule_free(s);
    return st;
  }
  *out = s;
  return OVL_OK;
}

ovl_status ovl_schedule_parse(const char *text, size_t len,
                              const char *filename, ovl_schedule **out,
                              ovl_error *err) {
  ovl_status st;
  if (filename == NULL)
    filename = "<string>";
  if ((text == NULL && len > 0) || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_schedule_parse: %s is NULL",
                    out == NULL ? "out" : "text");
  if ((st = check_text(text, len, filename, err)) != OVL_OK)
    return st;
  return parse_text(text, len, filename, NULL, true, out, err);
}

ovl_status ovl_schedule_load(const char *path, ovl_schedule **out,
                             ovl_error *err) {
  char *buf;
  size_t len;
  ovl_status st;
  if (path == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_schedule_load: %s is NULL",
                    path == NULL ? "path" : "out");
  if ((st = read_text(path, &buf, &len, err)) != OVL_OK)
    return st;
  if ((st = check_text(buf, len, path, err)) != OVL_OK) {
    free(buf);
    return st;
  }
  return parse_text(buf, len, path, buf, false, out, err);
}

const char *ovl__schedule_text(const ovl_schedule *s, size_t *len) {
  *len = s->len;
  return s->text;
}

ovl_status ovl__schedule_parse_owned(char *text, size_t len,
                                     const char *filename, ovl_schedule **out,
                                     ovl_error *err) {
  ovl_status st = check_text(text, len, filename, err);
  if (st != OVL_OK) {
    free(text);
    return st;
  }
  return parse_text(text, len, filename, text, false, out, err);
}

const char *ovl_schedule_filename(const ovl_schedule *s) {
  return s->filename;
}

size_t ovl_schedule_param_count(const ovl_schedule *s) {
  return s->pnames.n;
}

void ovl_schedule_param(const ovl_schedule *s, size_t i, const char **name,
                        const char **plain_default,
                        const char **cpu_default) {
  const sparam *p = i < s->pnames.n ? &s->params[i] : NULL;
  if (name != NULL)
    *name = p != NULL ? p->name : NULL;
  if (plain_default != NULL)
    *plain_default = p != NULL ? p->plain : NULL;
  if (cpu_default != NULL)
    *cpu_default = p != NULL ? p->cpu_plain : NULL;
}

static ovl_status check_nranks(int nranks, ovl_error *err) {
  /* Past OVL_MAX_RANKS only a program whose ranks all run the same ops
   * binds (the binder says so where one does not). */
  if (nranks < 1 || nranks > OVL_MAX_MODEL_RANKS)
    return ovl__err(err, OVL_EINVAL, "nranks must be 1..%d, got %d",
                    OVL_MAX_MODEL_RANKS, nranks);
  return OVL_OK;
}

/* A program just bound keeps the -D strings it was bound with. */
static ovl_status keep_defines(ovl_status st, const char *const *defines,
                               size_t n, ovl_program **out, ovl_error *err) {
  if (st == OVL_OK &&
      (st = ovl__program_set_defines(*out, defines, n, err)) != OVL_OK) {
    ovl_program_free(*out);
    *out = NULL;
  }
  return st;
}

ovl_status ovl_schedule_bind(const ovl_schedule *s,
                             const ovl_bind_opts *opts_in, ovl_program **out,
                             ovl_error *err) {
  defines defs = {0};
  ovl_bind_opts o, *opts = &o;
  ovl_status st;
  if (s == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_schedule_bind: %s is NULL",
                    s == NULL ? "schedule" : "out");
  if (opts_in == NULL)
    return ovl__schedule_bind(s, 2, false, &(defines){0}, 0, out, err);
  if ((st = ovl__opts_read(&o, sizeof o, opts_in, "ovl_bind_opts", err)) !=
      OVL_OK)
    return st;
  if ((st = check_nranks(opts->nranks, err)) != OVL_OK ||
      (st = ovl__defines_parse(opts->defines, opts->ndefines, s->filename,
                               &defs, err)) != OVL_OK) {
    ovl__defines_free(&defs);
    return st;
  }
  st = ovl__schedule_bind(s, opts->nranks, opts->cpu_defaults != 0, &defs,
                          opts->max_ops, out, err);
  ovl__defines_free(&defs);
  return keep_defines(st, opts->defines, opts->ndefines, out, err);
}

/* ------------------------------------------------------------------ */
/* Parse and bind in one call                                          */
/* ------------------------------------------------------------------ */

/* ovl_program_parse on a checked text (taken when `owned`). */
static ovl_status parse_and_bind(const char *text, size_t len,
                                 const char *filename, char *owned,
                                 const ovl_parse_opts *opts,
                                 ovl_program **out, ovl_error *err) {
  defines defs = {0};
  ovl_schedule *s = NULL;
  ovl_status st = OVL_OK;
  if (opts != NULL)
    st = ovl__defines_parse(opts->defines, opts->ndefines, filename, &defs,
                            err);
  /* A -D that names no param comes before the schedule's errors when the
   * text lexes: ovl__params_scan says why. */
  if (st == OVL_OK && defs.n > 0) {
    name_list scanned = {0};
    bool complete;
    st = ovl__params_scan(len > 0 ? text : "", len, filename, &scanned,
                          &complete, err);
    if (st == OVL_OK && complete)
      st = ovl__defines_check(&defs, &scanned, filename, err);
    ovl__names_free(&scanned);
  }
  if (st == OVL_OK) {
    st = parse_text(text, len, filename, owned, false, &s, err);
    owned = NULL; /* parse_text took it */
  }
  if (st == OVL_OK)
    st = keep_defines(
        ovl__schedule_bind(s, opts != NULL ? opts->nranks : 2,
                           opts != NULL && opts->cpu_defaults != 0, &defs,
                           opts != NULL ? opts->max_ops : 0, out, err),
        opts != NULL ? opts->defines : NULL,
        opts != NULL ? opts->ndefines : 0, out, err);
  ovl_schedule_free(s);
  ovl__defines_free(&defs);
  free(owned);
  return st;
}

ovl_status ovl_program_parse(const char *text, size_t len,
                             const char *filename,
                             const ovl_parse_opts *opts_in, ovl_program **out,
                             ovl_error *err) {
  ovl_parse_opts o, *opts = opts_in != NULL ? &o : NULL;
  ovl_status st;
  if (filename == NULL)
    filename = "<string>";
  if ((text == NULL && len > 0) || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_program_parse: %s is NULL",
                    out == NULL ? "out" : "text");
  if ((st = ovl__opts_read(&o, sizeof o, opts_in, "ovl_parse_opts", err)) !=
      OVL_OK)
    return st;
  if ((opts != NULL && (st = check_nranks(opts->nranks, err)) != OVL_OK) ||
      (st = check_text(text, len, filename, err)) != OVL_OK)
    return st;
  return parse_and_bind(text, len, filename, NULL, opts, out, err);
}

ovl_status ovl_program_load(const char *path, const ovl_parse_opts *opts_in,
                            ovl_program **out, ovl_error *err) {
  ovl_parse_opts o, *opts = opts_in != NULL ? &o : NULL;
  char *buf;
  size_t len;
  ovl_status st;
  if (path == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_program_load: %s is NULL",
                    path == NULL ? "path" : "out");
  if ((st = ovl__opts_read(&o, sizeof o, opts_in, "ovl_parse_opts", err)) !=
      OVL_OK)
    return st;
  if ((st = read_text(path, &buf, &len, err)) != OVL_OK)
    return st;
  if ((opts != NULL && (st = check_nranks(opts->nranks, err)) != OVL_OK) ||
      (st = check_text(buf, len, path, err)) != OVL_OK) {
    free(buf);
    return st;
  }
  return parse_and_bind(buf, len, path, buf, opts, out, err);
}
