#!/usr/bin/env python3
"""Streams a sales CSV in chunks and returns aggregates, reporting bytes done to Overtime.
Standard library only. Generates the CSV first (seeded, about 9 MB) when it is missing.

    overtime run --budget 5s --json -- python3 workers/aggregate-csv/aggregate.py --csv /tmp/sales.csv

Columns: order_id, day (YYYY-MM-DD), region, product, quantity, unit_price (2 decimals).
The result:
    {"rows": N, "revenue": total of quantity * unit_price (2 decimals),
     "quantity": total units, "by_region": {region: {"rows", "revenue"}},
     "top_product": the product with the most revenue, "first_day", "last_day"}
Money is summed in integer cents, so the totals are exact to the cent.
"""
import argparse
import csv
import datetime
import os
import random
import sys
import time

try:
    import overtime_worker as ot
except ImportError:   # a checkout without `pip install ./workers/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import overtime_worker as ot

HEADER = ["order_id", "day", "region", "product", "quantity", "unit_price"]
REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = ["anvil", "bolt", "cog", "drill", "engine", "flange", "gasket", "hinge", "ingot", "joist"]


def generate(path, rows, seed):
    """Writes `rows` seeded random orders to `path` (atomically), reporting rows written."""
    rng = random.Random(seed)
    start = datetime.date(2024, 1, 1)
    prices = {p: rng.randint(150, 9999) for p in PRODUCTS}   # cents
    tmp = path + ".tmp"
    chunk = 10000
    with open(tmp, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(HEADER)
        for first in range(0, rows, chunk):
            lines = []
            for order in range(first, min(rows, first + chunk)):
                product = rng.choice(PRODUCTS)
                cents = prices[product] + rng.randint(-100, 100)
                lines.append((order + 1, (start + datetime.timedelta(days=rng.randrange(366))).isoformat(),
                              rng.choice(REGIONS), product, rng.randint(1, 20), "{}.{:02d}".format(cents // 100, cents % 100)))
            writer.writerows(lines)
            ot.progress(completed=min(rows, first + chunk), total=rows, title="Generating {}".format(os.path.basename(path)))
    os.replace(tmp, path)


def cents(text):
    units, _, fraction = text.partition(".")
    return int(units) * 100 + int((fraction + "00")[:2])


def aggregate(path, chunk_size, delay=0.0):
    """Reads `path` in chunks of `chunk_size` bytes; returns the aggregates."""
    size = os.path.getsize(path)
    rows = quantity = revenue = 0
    by_region = {}
    by_product = {}
    first_day = last_day = None
    done = 0
    carry = b""
    header = None
    with open(path, "rb") as source:
        while True:
            chunk = source.read(chunk_size)
            done += len(chunk)
            data = carry + chunk
            if chunk:
                cut = data.rfind(b"\n") + 1
                data, carry = data[:cut], data[cut:]
            lines = data.decode("utf-8").splitlines()
            if header is None and lines:
                header = lines.pop(0).split(",")
                if header != HEADER:
                    raise SystemExit("aggregate: {} does not have the columns {}".format(path, ",".join(HEADER)))
            for _, day, region, product, qty, price in csv.reader(lines):
                n = int(qty)
                money = n * cents(price)
                rows += 1
                quantity += n
                revenue += money
                totals = by_region.setdefault(region, [0, 0])
                totals[0] += 1
                totals[1] += money
                by_product[product] = by_product.get(product, 0) + money
                if first_day is None or day < first_day:
                    first_day = day
                if last_day is None or day > last_day:
                    last_day = day
            ot.progress(completed=done, total=size, title="Aggregating {}".format(os.path.basename(path)),
                        detail="{:,} rows".format(rows))
            if not chunk:
                break
            if delay:
                time.sleep(delay)
    return {
        "rows": rows,
        "revenue": revenue / 100,
        "quantity": quantity,
        "by_region": {r: {"rows": t[0], "revenue": t[1] / 100}
                      for r, t in sorted(by_region.items())},
        "top_product": max(sorted(by_product), key=by_product.get) if by_product else None,
        "first_day": first_day,
        "last_day": last_day,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "overtime-sales.csv"),
                        help="the CSV to aggregate (default $TMPDIR/overtime-sales.csv); generated when missing")
    parser.add_argument("--rows", type=int, default=200000, help="rows to generate when the CSV is missing (default 200000)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated data (default 7)")
    parser.add_argument("--chunk-size", type=int, default=1 << 20, metavar="BYTES", help="bytes read at a time (default 1 MiB)")
    parser.add_argument("--chunk-delay", type=float, default=0.0, metavar="SECONDS",
                        help="sleep after each chunk, to play a slow disk (default 0)")
    args = parser.parse_args(argv)
    if not os.path.exists(args.csv):
        print("aggregate: generating {} ({} rows, seed {})".format(args.csv, args.rows, args.seed), flush=True)
        generate(args.csv, args.rows, args.seed)
    started = time.monotonic()
    summary = aggregate(args.csv, args.chunk_size, args.chunk_delay)
    ot.result(summary)
    print("aggregate: {rows:,} rows, revenue {revenue:.2f}, top product {top_product}".format(**summary)
          + " ({:.2f} s)".format(time.monotonic() - started), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
