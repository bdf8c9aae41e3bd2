#!/bin/sh
# Knows its next step takes longer than its budget, asks for more time up front, and
# reads what was granted before going on.
seconds=${1:-6}
printf '{"type":"extend","seconds":%s,"why":"compacting the index"}\n' "$((seconds + 2))" >&3
# Skip the budget message sent at start; the next budget message answers the request.
read -r start <&3
read -r reply <&3
echo "needs-more-time: supervisor answered: $reply"
sleep "$seconds"                                  # one long step, no progress to report
printf '{"type":"result","value":"index compacted"}\n' >&3
echo "needs-more-time: done"
