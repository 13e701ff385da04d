#!/bin/sh
# The layers of the code, enforced (docs/ARCHITECTURE.md, "Layers"; the
# model is Chromium's checkdeps: the rule is data, the check is small).
#
# The table of layers in docs/ARCHITECTURE.md, between its two marker
# comments, is the one place that orders them: each row a rank (lowest
# first) and a folder. A file belongs to the layer of the longest folder
# that holds it. This script fails on:
#   - an #include "..." of a header of a higher layer (from the sources);
#   - a call (any reference to a function or object) from a file to one
#     defined in a higher layer (from the built objects, with nm);
#   - two files that call each other, in any layer;
#   - a source file under src/ or tools/ in no layer of the table.
# Public headers (include/) are the API and may be included anywhere.
#
# Before it checks the tree it checks itself: in a scratch tree it plants
# an upward include, an upward call and two files that call each other,
# and fails unless it finds each (and passes a clean scratch tree).
#
# Environment: srcdir (the source tree), OVL_BUILDDIR (the build tree,
# built: the objects are read), CC (to compile the scratch tree's calls).
set -u

src=${srcdir:-.}
build=${OVL_BUILDDIR:-.}
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-layers.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# layers DOC: "RANK FOLDER NAME" per row of the table, folders with no
# backticks and a trailing slash.
layers() {
  awk '
    /<!-- layers: begin/ { on = 1; next }
    /<!-- layers: end/ { on = 0 }
    on && /^\| *[0-9]+ *\|/ {
      n = split($0, f, "|")
      rank = f[2]; name = f[3]; dir = f[4]
      gsub(/[ `]/, "", rank); gsub(/[ `]/, "", name); gsub(/[ `]/, "", dir)
      sub(/\/*$/, "/", dir)
      print rank, dir, name
    }' "$1"
}

# check TREE BUILD: every violation of TREE (sources) and BUILD (its
# objects), one a line, on stdout; the table is TREE's.
check() {
  tree=$1 bld=$2
  layers "$tree/docs/ARCHITECTURE.md" >"$tmp/table"
  if ! [ -s "$tmp/table" ]; then
    echo "no table of layers in $tree/docs/ARCHITECTURE.md (between" \
      "'<!-- layers: begin' and '<!-- layers: end')"
    return
  fi
  # The sources, relative to the tree.
  (cd "$tree" && find src tools -type f \( -name '*.c' -o -name '*.h' -o \
    -name '*.cu' \) 2>/dev/null | LC_ALL=C sort) >"$tmp/files"

  # Includes: "FILE LINE RESOLVED" for each #include "X" that names a file
  # of the tree: X beside the including file, else under src/ (public
  # headers of include/, system and generated headers are left out).
  : >"$tmp/incs"
  while read -r f; do
    d=$(dirname "$f")
    awk '/^[ \t]*#[ \t]*include[ \t]*"/ {
        s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); print FNR, s
      }' "$tree/$f" | while read -r ln inc; do
      [ -n "$inc" ] || continue
      if [ -f "$tree/$d/$inc" ]; then
        r=$d/$inc
      elif [ -f "$tree/src/$inc" ]; then
        r=src/$inc
      else
        continue
      fi
      # Fold "dir/../" away.
      r=$(echo "$r" | sed -e ':a' -e 's|[^/][^/]*/\.\./||' -e 'ta' \
        -e 's|/\./|/|g')
      echo "$f $ln $r"
    done
  done <"$tmp/files" >"$tmp/incs"

  # Symbols: "D FILE SYM" / "U FILE SYM" from every object of the build
  # tree under src/ and tools/, FILE the source it was compiled from (its
  # name without automake's per-target prefix, .c or .cu, beside it in
  # the tree). libtool's PIC objects (.libs/) and the others are the same
  # code: each source is read once.
  : >"$tmp/syms"
  : >"$tmp/seen"
  (cd "$bld" && find src tools -name '*.o' 2>/dev/null | LC_ALL=C sort) |
    while read -r o; do
      d=$(dirname "$o")
      d=${d%/.libs}
      b=$(basename "$o" .o)
      s=
      for cand in "$b" "${b#*-}"; do
        for ext in c cu; do
          if [ -z "$s" ] && [ -f "$tree/$d/$cand.$ext" ]; then
            s=$d/$cand.$ext
          fi
        done
      done
      [ -n "$s" ] || continue
      grep -qxF "$s" "$tmp/seen" && continue
      echo "$s" >>"$tmp/seen"
      nm -P "$bld/$o" 2>/dev/null | awk -v f="$s" '
        $2 == "U" || $2 == "w" { print "U", f, $1; next }
        $2 ~ /^[TDBRCWVGS]$/ { print "D", f, $1 }'
    done >"$tmp/syms"
  if ! [ -s "$tmp/seen" ]; then
    echo "no objects under $bld/src or $bld/tools: build first (the calls" \
      "are read from them)"
  fi

  awk -v table="$tmp/table" -v files="$tmp/files" -v incs="$tmp/incs" \
    -v syms="$tmp/syms" '
    # The layer of a path: the longest folder of the table that holds it.
    function layer(p,   best, len, k) {
      best = ""; len = 0
      for (k in rank)
        if (substr(p, 1, length(k)) == k && length(k) > len) {
          best = k; len = length(k)
        }
      return best
    }
    function desc(dir) { return name[dir] " (" rank[dir] ")" }
    BEGIN {
      while ((getline line < table) > 0) {
        split(line, a, " "); rank[a[2]] = a[1] + 0; name[a[2]] = a[3]
      }
      while ((getline f < files) > 0)
        if (layer(f) == "" && f !~ /\.h$/)
          print f ": in no layer of the table (docs/ARCHITECTURE.md)"
      while ((getline line < incs) > 0) {
        split(line, a, " ")
        lf = layer(a[1]); lt = layer(a[3])
        if (lf != "" && lt != "" && rank[lt] > rank[lf])
          print a[1] ":" a[2] ": includes " a[3] ", of layer " desc(lt) \
            ", from layer " desc(lf)
      }
      while ((getline line < syms) > 0) {
        split(line, a, " ")
        if (a[1] == "D") {
          if ((a[3] in def) && def[a[3]] != a[2]) twice[a[3]] = 1
          def[a[3]] = a[2]
        } else
          use[++nuse] = a[2] " " a[3]
      }
      for (i = 1; i <= nuse; i++) {
        split(use[i], a, " ")
        if (!(a[2] in def) || (a[2] in twice) || def[a[2]] == a[1])
          continue
        from = a[1]; to = def[a[2]]
        if (!((from, to) in calls)) calls[from, to] = a[2]
        else if (index(" " calls[from, to] " ", " " a[2] " ") == 0)
          calls[from, to] = calls[from, to] " " a[2]
        lf = layer(from); lt = layer(to)
        if (lf != "" && lt != "" && rank[lt] > rank[lf])
          print from ": calls " a[2] " (" to "), of layer " desc(lt) \
            ", from layer " desc(lf)
      }
      for (k in calls) {
        split(k, a, SUBSEP)
        if (a[1] < a[2] && ((a[2], a[1]) in calls))
          print a[1] " and " a[2] " call each other: " a[1] " calls " \
            calls[a[1], a[2]] "; " a[2] " calls " calls[a[2], a[1]]
      }
    }' | LC_ALL=C sort
}

# ---------------------------------------------------------------------
# The check of the check: a scratch tree with the real table.
# ---------------------------------------------------------------------

t=$tmp/tree
b=$tmp/build
mkdir -p "$t/docs" "$t/src/base" "$t/src/run" "$b/src/base" "$b/src/run"
cp "$src/docs/ARCHITECTURE.md" "$t/docs/" || exit 99
cat >"$t/src/run/run.h" <<'EOF'
void planted_up(void);
EOF
cat >"$t/src/base/low.h" <<'EOF'
void planted_low(void);
EOF
# Clean: run includes and calls base.
cat >"$t/src/base/low.c" <<'EOF'
#include "base/low.h"
void planted_low(void) {}
EOF
cat >"$t/src/run/high.c" <<'EOF'
#include "base/low.h"
void planted_up(void) { planted_low(); }
EOF
for f in src/base/low src/run/high; do
  "$cc" -I"$t/src" -c -o "$b/$f.o" "$t/$f.c" || exit 99
done
out=$(check "$t" "$b")
if [ -n "$out" ]; then
  echo "FAIL: a clean scratch tree is refused:"
  echo "$out" | sed 's/^/    /'
  exit 1
fi
echo "PASS: a clean scratch tree passes"

# Planted: an upward include, an upward call, two files that call each
# other, a source in no layer.
cat >"$t/src/base/up.c" <<'EOF'
#include "run/run.h"
void planted_base(void) { planted_up(); }
EOF
cat >"$t/src/run/m1.c" <<'EOF'
void planted_m2(void);
void planted_m1(int n) { if (n) planted_m2(); }
EOF
cat >"$t/src/run/m2.c" <<'EOF'
void planted_m1(int n);
void planted_m2(void) { planted_m1(0); }
EOF
mkdir -p "$t/src/nowhere"
echo 'int planted_nowhere;' >"$t/src/nowhere/x.c"
for f in src/base/up src/run/m1 src/run/m2; do
  "$cc" -I"$t/src" -c -o "$b/$f.o" "$t/$f.c" || exit 99
done
out=$(check "$t" "$b")
bad=0
for want in \
  'src/base/up.c:1: includes src/run/run.h, of layer run' \
  'src/base/up.c: calls planted_up (src/run/high.c), of layer run' \
  'src/run/m1.c and src/run/m2.c call each other' \
  'src/nowhere/x.c: in no layer of the table'; do
  if ! echo "$out" | grep -qF "$want"; then
    echo "FAIL: the planted '$want' was not found"
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "    it said:"
  echo "$out" | sed 's/^/    /'
  exit 1
fi
echo "PASS: planted violations are found ($(echo "$out" | wc -l) lines)"

# ---------------------------------------------------------------------
# The tree.
# ---------------------------------------------------------------------

out=$(check "$src" "$build")
if [ -n "$out" ]; then
  echo "FAIL: the layers of docs/ARCHITECTURE.md are broken:"
  echo "$out" | sed 's/^/    /'
  exit 1
fi
echo "PASS: no include or call goes up a layer, no two files call each" \
  "other ($(wc -l <"$tmp/files") files, $(wc -l <"$tmp/seen") objects," \
  "$(wc -l <"$tmp/table") layers)"
exit 0
