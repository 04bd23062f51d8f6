#!/bin/sh
# A stand-in for podman/docker (neither can start containers on the test machine). It records
# each invocation's argv, one argument per line after a "== <verb>" header, in argv.log next to
# itself, and the values of the variables named by `-e NAME` in env.log. `run` then prints
# "container ran" and exits 0, or, when the last argument is "hang", waits the way a container
# that ignores its client would (the timeout discipline must `rm -f` it by name).
# `info` and `--version` answer like a working engine.
here=$(dirname "$0")
case "$1" in
  --version) echo "fake-runtime version 1.0"; exit 0 ;;
  info) echo "fake engine"; exit 0 ;;
esac
{
  echo "== $1"
  for arg in "$@"; do printf '%s\n' "$arg"; done
} >> "$here/argv.log"
if [ "$1" = run ]; then
  previous=
  for arg in "$@"; do
    if [ "$previous" = -e ]; then
      eval "value=\${$arg-}"
      printf '%s=%s\n' "$arg" "$value" >> "$here/env.log"
    fi
    previous=$arg
    last=$arg
  done
  if [ "$last" = hang ]; then
    trap '' TERM
    while :; do sleep 1; done
  fi
  echo "container ran"
fi
exit 0
