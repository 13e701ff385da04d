/*
 * The body of a JSON string, always valid UTF-8, whatever bytes it is made
 * from. Used by the library's one JSON string writer (ovl__sb_json_str,
 * strbuf.c: race reports, traces, the results of report/json.c), and its
 * UTF-8 rule by the SVG's text (report/svg.c): static functions in a
 * header, exported by none.
 *
 * Why it matters: names, params and paths come from schedules and command
 * lines, and a path may hold any byte (a Latin-1 file name, "\xff"). Raw,
 * such a byte makes the whole file unreadable to a strict JSON reader
 * (Python's json with encoding="utf-8", Perfetto).
 */
#ifndef OVL_JSON_STR_H
#define OVL_JSON_STR_H

#include <stddef.h>
#include <string.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence at s, or 0 when
 * there is none; then *bad is the length of the ill-formed part to replace
 * (the maximal subpart: the lead byte and the continuation bytes that were
 * still possible, at least 1). Well-formed is Unicode's table 3-7: no
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 * Reads no further than a '\0'. */
static inline size_t ovl__utf8_len(const unsigned char *s, size_t *bad) {
  unsigned char c = s[0], lo = 0x80, hi = 0xbf; /* the second byte's range */
  size_t n;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0; /* below: overlong */
    else if (c == 0xed)
      hi = 0x9f; /* above: surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0)
      lo = 0x90; /* below: overlong */
    else if (c == 0xf4)
      hi = 0x8f; /* above: beyond U+10FFFF */
  } else {
    *bad = 1; /* a continuation byte, 0xc0, 0xc1 or 0xf5..0xff */
    return 0;
  }
  for (size_t k = 1; k < n; k++) {
    unsigned char b = s[k];
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) {
      *bad = k;
      return 0;
    }
  }
  return n;
}

/* How many bytes from s a JSON string body takes as they are: printable
 * ASCII other than '"' and '\\', and well-formed UTF-8 sequences. When
 * something else follows (not the terminating '\0'), `esc` receives the
 * text that stands for it and *skip how many bytes that is: '"' and '\\'
 * escaped, control characters as \n, \r, \t or \u00XX, an ill-formed UTF-8
 * sequence as the escape of U+FFFD (the replacement character). At the end
 * of the string esc is "" and *skip 0. A writer copies the span, then esc,
 * and goes on after both until *skip is 0. */
static inline size_t ovl__json_span(const char *str, char esc[8],
                                    size_t *skip) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0, n, bad = 1;
  for (;; i += n) {
    unsigned char c = s[i];
    n = 1;
    if (c == '\0') {
      esc[0] = '\0';
      *skip = 0;
      return i;
    }
    *skip = 1;
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      esc[2] = '\0';
      return i;
    }
    if (c < 0x20) {
      const char *short_form = c == '\n' ? "\\n" : c == '\r' ? "\\r"
                               : c == '\t' ? "\\t" : NULL;
      if (short_form != NULL) {
        memcpy(esc, short_form, 3);
      } else {
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        esc[6] = '\0';
      }
      return i;
    }
    if (c >= 0x80 && (n = ovl__utf8_len(s + i, &bad)) == 0) {
      memcpy(esc, "\\ufffd", 7);
      *skip = bad;
      return i;
    }
  }
}

#endif /* OVL_JSON_STR_H */
