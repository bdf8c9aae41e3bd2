#!/bin/sh
# Makes some progress, then hangs (as a stuck download would). Under Overtime the budget
# runs out; the script learns why from fd 3 when SIGTERM arrives, cleans up, and exits.
on_term() {
  reason=unknown
  # The cancel message is written before SIGTERM, so it is already waiting on fd 3
  # (after the budget message sent at start).
  while read -r line <&3; do
    case $line in
      *'"type":"cancel"'*) reason=$(printf '%s' "$line" | sed 's/.*"reason":"\([a-z]*\)".*/\1/'); break ;;
    esac
  done
  echo "stall: cancelled ($reason); removing partial download" >&2
  exit 1
}
trap on_term TERM

printf '{"type":"progress","completed":3,"total":10,"title":"Downloading"}\n' >&3
echo "stall: downloaded 3 of 10 parts, now waiting on a server that never answers"
# `wait` returns as soon as SIGTERM arrives, so the trap runs at once.
while true; do sleep 1 & wait $!; done
