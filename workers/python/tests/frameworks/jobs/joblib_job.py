"""joblib.Parallel as data people write it, with no Overtime call: items of 200 ms each over
two workers, verbose as given, on the backend given, with as many items as last until
JOB_UNTIL (a Unix time). Usage: joblib_job.py BACKEND VERBOSE"""

import os
import sys
import time

from joblib import Parallel, delayed

backend, verbose = sys.argv[1], int(sys.argv[2])
until = float(os.environ["JOB_UNTIL"])
ITEM_SECONDS = 0.2


def work(item):
    time.sleep(ITEM_SECONDS)
    return item * item


workers = 1 if backend == "sequential" else 2
items = max(1, int((until - time.time()) / ITEM_SECONDS * workers) + 1)
results = Parallel(n_jobs=workers, backend=backend, verbose=verbose)(delayed(work)(i) for i in range(items))
print("job done", len(results), flush=True)
