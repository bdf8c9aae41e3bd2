"""``python -m overtime_supervisor ARGS`` runs ``overtime ARGS``: the process becomes the
binary (exec), so signals, the exit status and PID 1 duties are the binary's own."""

import os
import sys

from overtime_supervisor import find_overtime_bin


def main():
    try:
        binary = find_overtime_bin()
    except FileNotFoundError as error:
        sys.stderr.write("{}\n".format(error))
        return 125   # Overtime's own failure, as the binary would say it
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
