/*
 * What the language layer (src/lang/) offers the layers above it beyond
 * the public API (ovl_schedule_*, ovl_program_parse/load): the text a
 * schedule was parsed from, and parsing a text it takes, for the re-check
 * of fix hints (check/fix.c), which edits a schedule's text and parses it
 * again, and which of its errors is the limit on a program's length.
 */
#ifndef OVL_LANG_SCHEDULE_H
#define OVL_LANG_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

/* The text `s` was parsed from (*len its bytes). */
const char *ovl__schedule_text(const ovl_schedule *s, size_t *len);
/* A schedule parsed from a malloc'd text that it takes (freed on failure
 * too); `filename` names it in messages. */
ovl_status ovl__schedule_parse_owned(char *text, size_t len,
                                     const char *filename, ovl_schedule **out,
                                     ovl_error *err);
/* Whether `err` is ovl_schedule_bind's refusal of a program longer than
 * ovl_bind_opts.max_ops, which is OVL_ENOMEM as running out of memory is
 * (the re-check of an edit counts it an edit that does not bind, not a
 * failure). */
bool ovl__bind_over_limit(const ovl_error *err);

#endif /* OVL_LANG_SCHEDULE_H */
