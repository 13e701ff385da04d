# md2man.awk: a page of this project's markdown as a man page (roff, with
# tbl tables), so that a man page and a doc say the same: Makefile.am
# makes man/ovl-schedule.5 from docs/LANGUAGE.md with it.
#
#   awk -v name=ovl-schedule -v section=5 -v version=0.1.0 \
#       -v date="December 2026" -v title="File Formats" \
#       -v summary="the schedule language of overlap_sim" \
#       -v source=docs/LANGUAGE.md -v seealso=".BR overlap_sim (1)" \
#       -f man/md2man.awk docs/LANGUAGE.md
#
# It knows the markdown these docs use: "# " (the title: the NAME line
# says it instead), "## " and "### " headings, paragraphs, "- " lists
# (continued by indented lines), fenced blocks, tables, `code`, **bold**,
# *emphasis*, [links](target) (the text stays), and <!-- comments -->
# (dropped).

# esc(s): text as roff: backslashes escaped, dashes in code as \-.
function esc(s) {
  gsub(/\\/, "\\e", s)
  return s
}

# inline(s): markdown inline markup as roff fonts.
function inline(s,    out, c, i, j, code) {
  s = esc(s)
  out = ""
  while ((i = index(s, "`")) > 0) {
    j = index(substr(s, i + 1), "`")
    if (j == 0) break
    code = substr(s, i + 1, j - 1)
    gsub(/-/, "\\-", code)
    out = out emph(substr(s, 1, i - 1)) "\\fB" code "\\fR"
    s = substr(s, i + j + 1)
  }
  return out emph(s)
}

# emph(s): **bold**, *emphasis* and [links](target) in text without code.
function emph(s) {
  while (match(s, /\*\*[^*]+\*\*/))
    s = substr(s, 1, RSTART - 1) "\\fB" substr(s, RSTART + 2, RLENGTH - 4) "\\fR" substr(s, RSTART + RLENGTH)
  while (match(s, /\*[^* ][^*]*\*/))
    s = substr(s, 1, RSTART - 1) "\\fI" substr(s, RSTART + 1, RLENGTH - 2) "\\fR" substr(s, RSTART + RLENGTH)
  while (match(s, /\[[^]]*\]\([^)]*\)/)) {
    t = substr(s, RSTART + 1, RLENGTH - 2)
    sub(/\]\(.*$/, "", t)
    s = substr(s, 1, RSTART - 1) t substr(s, RSTART + RLENGTH)
  }
  return s
}

# line(s): one output line of text; a leading . or ' would be a request.
function line(s) {
  if (s ~ /^[.']/) s = "\\&" s
  print s
}

# A paragraph or a list item is gathered whole (markup may span its
# lines), then written.
function flush_text(    n, i, parts) {
  if (text == "") return
  n = split(inline(text), parts, "\n")
  for (i = 1; i <= n; i++) line(parts[i])
  text = ""
}

function add_text(s) { text = (text == "" ? s : text "\n" s) }

function end_list() {
  flush_text()
  if (inlist) { inlist = 0; print ".PP" }
}

function flush_table(    i, n, k, cells, fmt, c) {
  if (nrows == 0) return
  print ".TS"
  print "allbox tab(\t);"
  n = ncols
  fmt = ""
  for (c = 1; c <= n; c++) fmt = fmt (c > 1 ? " " : "") "lb"
  print fmt
  fmt = ""
  for (c = 1; c <= n; c++) fmt = fmt (c > 1 ? " " : "") (c == n ? "lx" : "l")
  print fmt "."
  for (i = 1; i <= nrows; i++) {
    k = split(rows[i], cells, "\t")
    out = ""
    for (c = 1; c <= n; c++)
      out = out (c > 1 ? "\t" : "") "T{\n" cells[c] "\nT}"
    print out
  }
  print ".TE"
  nrows = 0
}

BEGIN {
  print "'\\\" t"
  print ".\\\" Made from " source " by man/md2man.awk: edit that file, not this one."
  printf ".TH %s \"%s\" \"%s\" \"overlap-sim %s\" \"%s\"\n", toupper(name), section, date, version, title
  print ".nh"
  print ".ad l"
  print ".SH NAME"
  gsub(/-/, "\\-", name)
  print name " \\- " summary
  print ".SH DESCRIPTION"
  infence = 0; inlist = 0; incomment = 0; nrows = 0
}

# Comments, also over several lines.
incomment { if ($0 ~ /-->/) incomment = 0; next }
/^<!--/ { if ($0 !~ /-->/) incomment = 1; next }

/^```/ {
  if (!infence) {
    flush_table(); end_list(); flush_text()
    print ".PP"; print ".RS 4"; print ".nf"
    infence = 1
  } else {
    print ".fi"; print ".RE"
    infence = 0; para = 1
  }
  next
}
infence { line(esc($0)); next }

# Tables.
/^\|/ {
  end_list(); flush_text()
  if ($0 ~ /^\|[-| ]+\|$/) next
  s = $0
  gsub(/\\\|/, "\001", s)
  sub(/^\| */, "", s); sub(/ *\|$/, "", s)
  n = split(s, cells, / *\| */)
  ncols = n
  row = ""
  for (c = 1; c <= n; c++) {
    t = cells[c]
    gsub(/\001/, "|", t)
    t = inline(t)
    if (t ~ /^[.']/) t = "\\&" t
    row = row (c > 1 ? "\t" : "") t
  }
  rows[++nrows] = row
  next
}
nrows > 0 { flush_table(); para = 1 }

/^# / { next }
/^## / { end_list(); flush_text(); print ".SH " toupper(inline(substr($0, 4))); para = 0; next }
/^### / { end_list(); flush_text(); print ".SS " inline(substr($0, 5)); para = 0; next }

/^$/ { flush_text(); if (!inlist) para = 1; next }

/^- / {
  flush_text()
  inlist = 1
  print ".IP \\(bu 2"
  add_text(substr($0, 3))
  next
}
inlist && /^  / { s = $0; sub(/^ +/, "", s); add_text(s); next }

{
  if (inlist) end_list()
  else if (para) print ".PP"
  para = 0
  add_text($0)
}

END {
  end_list(); flush_text(); flush_table()
  if (seealso != "") { print ".SH SEE ALSO"; print seealso }
}
