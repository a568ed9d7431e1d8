"""Where each part of `make bench` leaves its answer: a markdown section and CSV files.

The section is printed too; both go to the results directory that bench/report.py assembles.
"""
import csv
import os


def save(out, markdown_name, md_lines, csvs):
    """Writes `md_lines` as `markdown_name`, and each of `csvs` ({file name: (header,
    rows)}, every row a list of already formatted fields)."""
    text = "\n".join(md_lines) + "\n"
    print(text)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, markdown_name), "w") as f:
        f.write(text)
    for name, (header, rows) in csvs.items():
        with open(os.path.join(out, name), "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
