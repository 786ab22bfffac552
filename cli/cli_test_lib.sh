# Shared by the CLI tests that run the real pipectl binary (sourced; tests run from the runfiles
# root). Each check records a failure and goes on; finish_tests reports and sets the exit code.
set -uo pipefail

PIPECTL=cli/pipectl
PY=/usr/bin/python3
TMP=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_ok NAME ARGS...: exit 0; stdout in $TMP/NAME.out.
expect_ok() {
  local name=$1
  shift
  "$PIPECTL" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: pipectl $* exited $rc: $(cat "$TMP/$name.err")"
}

# expect_error NAME CODE MESSAGE ARGS...: exit CODE, stderr exactly MESSAGE, stdout empty.
expect_error() {
  local name=$1 code=$2 message=$3
  shift 3
  "$PIPECTL" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$name: pipectl $* exited $rc, want $code"
  [ "$(cat "$TMP/$name.err")" == "$message" ] ||
    fail "$name: stderr was [$(cat "$TMP/$name.err")], want [$message]"
  [ ! -s "$TMP/$name.out" ] || fail "$name: printed on stdout: $(cat "$TMP/$name.out")"
}

# expect_golden NAME: $TMP/NAME.out equals cli/testdata/NAME.golden.
expect_golden() {
  diff -u "cli/testdata/$1.golden" "$TMP/$1.out" >&2 || fail "$1: output differs from cli/testdata/$1.golden"
}

# check NAME PYTHON: runs PYTHON with `d` bound to the JSON in $TMP/NAME.out; it asserts.
check() {
  "$PY" -c "import json,sys; d=json.load(open('$TMP/$1.out')); $2" || fail "$1: check failed: $2"
}

# finish_tests WHAT: the closing line and the exit code.
finish_tests() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
  fi
  echo "all $1 checks passed"
}
