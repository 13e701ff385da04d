/*
 * The schedule language's lexer (docs/LANGUAGE.md): bytes -> tokens that
 * carry their line and column. Internal to src/lang/.
 *
 * Characters are ASCII only, whatever the locale. Float literals are read
 * with strtod, which assumes LC_NUMERIC is "C" (the default of every
 * program that does not call setlocale).
 */
#ifndef OVL_LANG_LEX_H
#define OVL_LANG_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest identifier, and longest number literal. */
#define MAX_IDENT 255
/* How much of a token a diagnostic quotes. */
#define QUOTE_MAX 40

static inline bool is_digit(int c) { return c >= '0' && c <= '9'; }
static inline bool is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static inline bool is_alnum(int c) { return is_alpha(c) || is_digit(c); }
static inline bool is_blank(int c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* A token quoted in a diagnostic: at most QUOTE_MAX bytes, then "...". */
static inline int quote_len(size_t n) {
  return (int)(n > QUOTE_MAX ? QUOTE_MAX : n);
}
static inline const char *quote_more(size_t n) {
  return n > QUOTE_MAX ? "..." : "";
}

typedef enum {
  T_EOF,
  T_NEWLINE,
  T_IDENT,
  T_INT,
  T_FLOAT,
  T_LPAREN,
  T_RPAREN,
  T_LBRACK,
  T_RBRACK,
  T_LBRACE,
  T_RBRACE,
  T_COMMA,
  T_EQUALS,
  /* Integer expressions (docs/LANGUAGE.md): + - * / %, and ':' of a
   * range A:B in ranks=[...]. A '-' that starts a number is part of the
   * number's token (the parser splits `rank -1` into rank - 1). */
  T_PLUS,
  T_MINUS,
  T_STAR,
  T_SLASH,
  T_PERCENT,
  T_COLON
} tok_type;

typedef struct token {
  tok_type type;
  int line, col;
  const char *s; /* the token's text (not terminated) */
  size_t n;
  int64_t i; /* T_INT */
  double f;  /* T_FLOAT */
} token;

typedef struct lexer {
  const char *p, *end, *line_start;
  int line;
  /* Open '(' and '[': a newline inside them does not end the statement. */
  int depth;
  /* The error, when ovl__lex_next returns false. */
  int err_line, err_col;
  char err_msg[256];
} lexer;

void ovl__lex_init(lexer *lx, const char *text, size_t len);
/* The next token into *t. False on a lexical error (see err_*). */
bool ovl__lex_next(lexer *lx, token *t);
/* How a diagnostic names a token: 'text', end of line, end of file. */
const char *ovl__tok_desc(const token *t, char *buf, size_t size);
/* Whether t is of `type` and spelled `word`. */
bool ovl__tok_is(const token *t, tok_type type, const char *word);

#endif /* OVL_LANG_LEX_H */
