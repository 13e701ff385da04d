#!/bin/sh
# Every command shown in README.md and docs/*.md runs here, and prints what
# the doc shows. The markup (docs/TESTING.md, "Examples in the docs"):
#
#   ```console               a block of commands and what they print
#   $ COMMAND                a command: "$ " and the command line; a line
#                            ending in "\" continues on the next line
#   OUTPUT                   the lines the command prints (stdout and
#                            stderr together), to the next "$ " line or
#                            the end of the block; nothing: it prints nothing
#   ```
#
#   "…" (U+2026) in an output line stands for any text within the line,
#   the blanks around it included (times, a core count; columns move as
#   numbers widen); a line that is "…" alone for any number of lines, none
#   included. Trailing blanks do not count.
#   A command must exit 0; one that exits otherwise is followed by
#   "$ echo $?" and the status it prints.
#
#   <!-- docs-test: skip REASON -->     before a block: its commands are not
#                                       run (a GPU, MPI, a build, minutes);
#                                       counted and listed with the reason
#   <!-- docs-test: file NAME -->       before a fenced block of any kind:
#                                       its text is the file NAME that the
#                                       next commands use (a schedule the
#                                       reader is asked to save)
#   <!-- docs-test: append ARGS (REASON) -->
#                                       before a block: ARGS are added to
#                                       the end of each of its commands here
#                                       (`--trials=2` for a default run, which
#                                       repeats for up to 10 s)
#
# A line that starts with "$ " anywhere else (prose, another kind of block,
# an indented block) is an error: a command the test would not run.
#
# Each doc runs in its own scratch directory, command after command in
# file order, each in its own `sh` (files persist; `cd` and variables do
# not), as from the top of a source tree built in place: tools/ is the
# build tree's, schedules/, machines/, docs/ and tests/ are the source
# tree's. The cpu backend runs (CUDA_VISIBLE_DEVICES is empty),
# OVL_SCHEDULE_PATH, OVL_SCHEDULE_DIR and OVL_HOST_MEMORY are unset,
# ThreadSanitizer's reports are off, and a
# command that runs for more than DOCS_TIMEOUT seconds (default 300: a
# hang, not a slow sanitizer build) fails.
#
# Also: every relative link of the docs ([text](path#anchor)) names a file
# that exists and, in a .md file, a heading that makes that anchor.
#
# Environment (Makefile.am's AM_TESTS_ENVIRONMENT): srcdir (the source
# tree), OVL_BUILDDIR (the build tree). DOCS="README.md docs/X.md" runs
# only those; DOCS_VERBOSE=1 prints every command run with its seconds;
# DOCS_KEEP=1 keeps the scratch directories; DOCS_JOBS=N runs N docs side
# by side (default 4).
set -u
LC_ALL=C
export LC_ALL
unset OVL_SCHEDULE_PATH OVL_SCHEDULE_DIR OVL_HOST_MEMORY
# The examples run racy schedules on purpose, whose races on the emulated
# device memory are real: a ThreadSanitizer build would rightly report
# them (tests/lib.sh's run_racy does the same for its racy runs).
TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_bugs=0"
export TSAN_OPTIONS

# match_output SHOWN GOT DOC: SHOWN is the output a doc shows (lines
# "DOCLINE<tab>TEXT"), GOT what the command printed. Prints nothing when
# they match, else what differs first, naming the doc's line.
match_output() {
  awk -v doc="$3" -v ell="…" '
    function strip(s) { sub(/[ \t]+$/, "", s); return s }
    # linematch(p, s): p with "…" standing for any text (the blanks around
    # it included: columns move as numbers widen) matches all of s.
    function linematch(p, s,    k, parts, i, pos, q) {
      if (index(p, ell) == 0) return p == s
      k = split(p, parts, ell)
      for (i = 1; i <= k; i++) {
        if (i < k) sub(/[ \t]+$/, "", parts[i])
        if (i > 1) sub(/^[ \t]+/, "", parts[i])
      }
      if (substr(s, 1, length(parts[1])) != parts[1]) return 0
      pos = length(parts[1]) + 1
      for (i = 2; i < k; i++) {
        q = index(substr(s, pos), parts[i])
        if (q == 0) return 0
        pos += q - 1 + length(parts[i])
      }
      if (length(s) - pos + 1 < length(parts[k])) return 0
      return substr(s, length(s) - length(parts[k]) + 1) == parts[k]
    }
    BEGIN { m = 0; n = 0 }
    FILENAME == ARGV[1] {
      m++
      t = index($0, "\t")
      eline[m] = substr($0, 1, t - 1)
      e[m] = strip(substr($0, t + 1))
      wild[m] = (e[m] ~ /^ *…$/)
      next
    }
    { a[++n] = strip($0) }
    END {
      # pre[i, j]: the first i lines shown match the first j lines got.
      pre[0, 0] = 1
      for (i = 0; i <= m; i++)
        for (j = 0; j <= n; j++) {
          if (i == 0 && j == 0) continue
          v = 0
          if (i > 0 && wild[i]) v = pre[i - 1, j] || (j > 0 && pre[i, j - 1])
          else if (i > 0 && j > 0) v = pre[i - 1, j - 1] && linematch(e[i], a[j])
          pre[i, j] = v
        }
      if (pre[m, n]) exit 0
      # The furthest line shown that matches, and where the output was then.
      bi = 0; bj = 0
      for (i = 0; i <= m; i++)
        for (j = 0; j <= n; j++)
          if (pre[i, j] && i >= bi) {
            if (i > bi) { bi = i; bj = j }
            break
          }
      if (bi < m) {
        # Skip wildcard lines: report the first real line that fails.
        while (bi < m && wild[bi + 1]) bi++
        printf "%s:%d: the output differs\n", doc, eline[bi + 1]
        printf "  expected: %s\n", e[bi + 1]
        if (bj < n) printf "  got:      %s   (line %d of the output)\n", a[bj + 1], bj + 1
        else printf "  got:      the end of the output (%d lines)\n", n
      } else {
        printf "%s:%d: more output than shown (the doc ends at line %d)\n", doc, (m ? eline[m] : 0), (m ? eline[m] : 0)
        printf "  unexpected: %s   (line %d of the output)\n", a[bj + 1], bj + 1
      }
      exit 1
    }
  ' "$1" "$2"
}

# run_doc DOC: runs the steps of DOC (from the plan, below) in its scratch
# directory; writes its report to $tmp/report.ID and its counts ("run
# failed skipped errors") to $tmp/count.ID, ID being DOC with / as _.
run_doc() {
  doc=$1
  id=$(echo "$doc" | tr / _)
  w=$tmp/w/$id
  rep=$tmp/report.$id
  mkdir -p "$w" || exit 99
  ln -s "$build/tools" "$w/tools"
  ln -s "$src/schedules" "$w/schedules"
  ln -s "$src/docs" "$w/docs"
  ln -s "$src/tests" "$w/tests"
  ln -s "$src/machines" "$w/machines"
  : >"$rep"
  : >"$tmp/skips.$id"
  run=0; failed=0; skipped=0; errors=0; prev_st=0
  awk -F '\t' -v doc="$doc" '$3 == doc' "$tmp/plan/steps" >"$tmp/steps.$id"
  while IFS="$(printf '\t')" read -r k kind _ line arg; do
    case $kind in
    error)
      errors=$((errors + 1))
      echo "FAIL: $doc:$line: $arg" >>"$rep"
      ;;
    file)
      cp "$tmp/plan/$k.cmd" "$w/$arg"
      ;;
    skip)
      skipped=$((skipped + 1))
      printf 'SKIP: %s:%s: $ %s   (%s)\n' "$doc" "$line" \
        "$(head -1 "$tmp/plan/$k.cmd")" "$arg" >>"$rep"
      echo "$arg" >>"$tmp/skips.$id"
      ;;
    cmd)
      run=$((run + 1))
      cmd=$(cat "$tmp/plan/$k.cmd")
      [ -n "$arg" ] && cmd="$cmd $arg"
      printf '(exit %d)\n%s\n' "$prev_st" "$cmd" >"$tmp/run.$id.sh"
      [ -n "${DOCS_VERBOSE:-}" ] && t0=$(date +%s.%N)
      (cd "$w" && CUDA_VISIBLE_DEVICES='' $timeout_cmd sh "$tmp/run.$id.sh") \
        >"$tmp/out.$id" 2>&1 </dev/null
      st=$?
      [ -n "${DOCS_VERBOSE:-}" ] &&
        printf 'RUN: %.2f s %s:%s: $ %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" \
          "$doc" "$line" "$(head -1 "$tmp/plan/$k.cmd")" >>"$rep"
      # A status other than 0 is shown by the next command: "$ echo $?".
      next_cmd=
      if [ "$(awk -F '\t' -v k=$((k + 1)) '$1 == k { print $2 }' "$tmp/steps.$id")" = cmd ]; then
        next_cmd=$(cat "$tmp/plan/$((k + 1)).cmd")
      fi
      why=
      if [ "$st" -ne 0 ] && [ "$next_cmd" != 'echo $?' ]; then
        why="exited $st: a command that exits non-zero is followed by \"\$ echo \$?\" and its status in the doc"
        [ "$st" -eq 124 ] && [ -n "$timeout_cmd" ] && why="ran for more than ${timeout_cmd#timeout } s"
      fi
      diff=$(match_output "$tmp/plan/$k.exp" "$tmp/out.$id" "$doc")
      if [ -n "$why" ] || [ -n "$diff" ]; then
        failed=$((failed + 1))
        {
          printf 'FAIL: %s:%s: $ %s\n' "$doc" "$line" "$(cat "$tmp/plan/$k.cmd")"
          [ -n "$arg" ] && echo "  (run with $arg added: a docs-test append marker)"
          [ -n "$why" ] && echo "$doc:$line: $why"
          [ -n "$diff" ] && echo "$diff"
          echo "  the command printed:"
          sed 's/^/    | /' "$tmp/out.$id" | head -60
        } >>"$rep"
      fi
      prev_st=$st
      ;;
    esac
  done <"$tmp/steps.$id"
  echo "$run $failed $skipped $errors" >"$tmp/count.$id"
}

# Called back by xargs (below) for one doc, in a process of its own; tmp,
# build, src and timeout_cmd come in the environment.
if [ "${1:-}" = --run-doc ]; then
  run_doc "$2"
  exit 0
fi

src=${srcdir:-.}
build=${OVL_BUILDDIR:-.}
case $src in /*) ;; *) src=$(cd "$src" && pwd) ;; esac
case $build in /*) ;; *) build=$(cd "$build" && pwd) ;; esac
[ -x "$build/tools/overlap_sim" ] || {
  echo "docs.sh: no $build/tools/overlap_sim (OVL_BUILDDIR: the build tree)"
  exit 99
}
# Under ThreadSanitizer the examples run ten times slower or more (README's
# default run alone takes minutes), and what they check is the docs, which
# the plain build checks: skip.
for bin in "$build/tools/.libs/overlap_sim" "$build/tools/overlap_sim"; do
  if [ -f "$bin" ] && grep -q -a __tsan_init "$bin"; then
    echo "SKIP: docs.sh: a ThreadSanitizer build (the plain build runs the docs' commands)"
    exit 77
  fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-docs.XXXXXX") || exit 99
[ -n "${DOCS_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT INT TERM
start=$(date +%s)

docs=${DOCS:-}
if [ -z "$docs" ]; then
  docs=README.md
  for f in "$src"/docs/*.md; do
    [ -f "$f" ] && docs="$docs docs/${f##*/}"
  done
fi

timeout_cmd=
docs_timeout=${DOCS_TIMEOUT:-300}
command -v timeout >/dev/null 2>&1 && timeout_cmd="timeout $docs_timeout"

# --- 1. The plan: each doc's steps, in order -----------------------------
# $tmp/plan/steps: one line a step, tab-separated: N KIND DOC LINE ARG
#   KIND cmd (ARG: args to append), skip (ARG: the reason), file (ARG: name)
#   or error (ARG: what is wrong);
# $tmp/plan/N.cmd: the command (or the file's text); $tmp/plan/N.exp: the
# output shown, each line "DOCLINE<tab>TEXT".
mkdir "$tmp/plan" || exit 99
: >"$tmp/plan/steps"
n=0
for doc in $docs; do
  [ -f "$src/$doc" ] || { echo "docs.sh: no $src/$doc"; exit 99; }
  n=$(awk -v doc="$doc" -v dir="$tmp/plan" -v n="$n" '
    function step(kind, line, arg) {
      n++
      cur = n
      printf "%d\t%s\t%s\t%d\t%s\n", n, kind, doc, line, arg >> (dir "/steps")
      close(dir "/steps")
      printf "" > (dir "/" n ".cmd"); close(dir "/" n ".cmd")
      printf "" > (dir "/" n ".exp"); close(dir "/" n ".exp")
    }
    function add(file, text) { print text >> file; close(file) }
    function err(line, what) { step("error", line, what) }
    BEGIN { infence = 0; console = 0; marker = ""; cont = 0 }
    {
      sub(/\r$/, "")
    }
    # A fence opens or closes.
    /^ *(```|~~~)/ {
      if (!infence) {
        infence = 1
        info = $0
        sub(/^ *(```|~~~)/, "", info)
        gsub(/ /, "", info)
        console = (info == "console")
        fence_line = NR
        kind = "show"; arg = ""
        if (marker != "") {
          m = marker
          if (m ~ /^skip /) { kind = "skip"; arg = substr(m, 6) }
          else if (m ~ /^file /) { kind = "file"; arg = substr(m, 6) }
          else if (m ~ /^append /) { kind = "append"; arg = substr(m, 8) }
          else err(marker_line, "unknown docs-test marker: " m)
          if (kind == "file") { step("file", NR, arg); filestep = cur }
          if (kind != "file" && !console)
            err(marker_line, "docs-test " kind " before a block that is not ```console")
          if (kind == "append") {
            reason = arg
            if (arg !~ / \(.*\)$/)
              err(marker_line, "docs-test append wants: append ARGS (REASON)")
            sub(/ \(.*$/, "", arg)
          }
        }
        marker = ""
        have_cmd = 0
        cont = 0
        next
      } else {
        if (console && cont) err(NR, "the block ends inside a command (a line ending in \\)")
        infence = 0; console = 0
        next
      }
    }
    infence && kind == "file" { add(dir "/" filestep ".cmd", $0); next }
    infence && console {
      if (cont) {
        add(dir "/" cur ".cmd", $0)
        cont = ($0 ~ /\\$/)
        next
      }
      if ($0 ~ /^\$ /) {
        cmd = substr($0, 3)
        if (kind == "skip") step("skip", NR, arg)
        else step("cmd", NR, kind == "append" ? arg : "")
        add(dir "/" cur ".cmd", cmd)
        have_cmd = 1
        cont = ($0 ~ /\\$/)
        next
      }
      if (!have_cmd) { err(NR, "output before the first command of a ```console block"); next }
      add(dir "/" cur ".exp", NR "\t" $0)
      next
    }
    # Outside a console block.
    /^ *\$ / { err(NR, "a command outside a ```console block: " $0) }
    !infence && /^<!-- docs-test:/ {
      m = $0
      sub(/^<!-- docs-test: */, "", m)
      sub(/ *-->$/, "", m)
      marker = m; marker_line = NR
      next
    }
    !infence && marker != "" && NF > 0 {
      err(marker_line, "a docs-test marker not followed by a fenced block")
      marker = ""
    }
    END {
      if (infence) err(fence_line, "a fenced block that never closes")
      if (marker != "") err(marker_line, "a docs-test marker at the end of the file")
      print n
    }
  ' "$src/$doc")
done

# --- 2. Run the steps -------------------------------------------------------
# The docs run side by side, DOCS_JOBS at a time (most of a command's time
# is waiting: for a timeout, a delay, the loader), each in a process of its
# own (this script again, with --run-doc); the reports follow in doc order.
export tmp build src timeout_cmd
awk -F '\t' '{ print $3 }' "$tmp/plan/steps" | uniq >"$tmp/docs"
xargs -P "${DOCS_JOBS:-4}" -I '{}' sh "$0" --run-doc '{}' <"$tmp/docs"
run=0
failed=0
skipped=0
errors=0
: >"$tmp/skips"
while read -r doc; do
  id=$(echo "$doc" | tr / _)
  cat "$tmp/report.$id" 2>/dev/null
  cat "$tmp/skips.$id" >>"$tmp/skips" 2>/dev/null
  if read -r r f k e <"$tmp/count.$id" 2>/dev/null; then
    run=$((run + r)); failed=$((failed + f))
    skipped=$((skipped + k)); errors=$((errors + e))
  else
    echo "FAIL: $doc: its commands did not all run"
    errors=$((errors + 1))
  fi
done <"$tmp/docs"

# --- 3. Links ---------------------------------------------------------------
# anchors FILE: the anchors its headings make (GitHub's rule: lower case,
# punctuation other than - and _ dropped, spaces to -, repeats get -1, -2).
anchors() {
  awk '
    /^ *(```|~~~)/ { fence = !fence; next }
    fence { next }
    /^#+ / {
      h = $0
      sub(/^#+ +/, "", h)
      sub(/ +#*$/, "", h)
      h = tolower(h)
      gsub(/[^a-z0-9 _-]/, "", h)
      gsub(/ /, "-", h)
      if (h in seen) { seen[h]++; h = h "-" seen[h] } else seen[h] = 0
      print h
    }
  ' "$1"
}
links=0
for doc in $docs; do
  dir=$(dirname "$doc")
  awk '
    /^ *(```|~~~)/ { fence = !fence; next }
    fence { next }
    {
      s = $0
      gsub(/`[^`]*`/, "", s)
      while (match(s, /\]\([^)]*\)/)) {
        t = substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
        if (t ~ /^[a-z]+:/) continue
        print FNR "\t" t
      }
    }
  ' "$src/$doc" >"$tmp/links"
  while IFS="$(printf '\t')" read -r line t; do
    links=$((links + 1))
    path=${t%%#*}
    anchor=
    case $t in *'#'*) anchor=${t#*#} ;; esac
    if [ -z "$path" ]; then target=$src/$doc; else target=$src/$dir/$path; fi
    if [ ! -e "$target" ]; then
      errors=$((errors + 1))
      echo "FAIL: $doc:$line: link to $t: no such file"
    elif [ -n "$anchor" ] && ! anchors "$target" | grep -qxF -- "$anchor"; then
      errors=$((errors + 1))
      echo "FAIL: $doc:$line: link to $t: no heading makes #$anchor"
    fi
  done <"$tmp/links"
done

end=$(date +%s)
if [ "$skipped" -gt 0 ]; then
  echo "skipped, by reason:"
  sort "$tmp/skips" | uniq -c | sed 's/^ */  /'
fi
echo "docs.sh: $run commands run, $failed failed; $skipped skipped; $links links checked; $errors errors of markup or links; $((end - start)) s"
[ "$failed" -eq 0 ] && [ "$errors" -eq 0 ]
