#!/bin/sh
# Processes N items (default 20), reporting progress on fd 3 after each, and returns a
# result. Each report extends the budget, so it runs well past a short one.
# Outside Overtime (no fd 3) it runs the same, silently.
n=${1:-20}
report() { [ -n "$OVERTIME_FD" ] && printf '%s\n' "$1" >&3; return 0; }

report "{\"type\":\"progress\",\"completed\":0,\"total\":$n,\"title\":\"Resizing images\"}"
i=1
while [ "$i" -le "$n" ]; do
  sleep 0.25                                   # the real work would go here
  report "{\"type\":\"progress\",\"completed\":$i,\"total\":$n,\"detail\":\"image-$i.jpg\"}"
  i=$((i + 1))
done
report "{\"type\":\"result\",\"value\":{\"resized\":$n}}"
echo "resized $n images"
