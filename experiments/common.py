"""Helpers shared by the experiment scripts: run `refit sim --json` and read its answer."""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Table:
    """Lines printed on stdout and kept in a .txt file beside the CSV."""

    def __init__(self, path):
        self.path = path
        self.lines = []

    def line(self, s):
        print(s, flush=True)
        self.lines.append(s)

    def save(self):
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")


def pyplot(png):
    """matplotlib.pyplot with the Agg backend, or None (and one line on stderr) where this Python
    cannot import matplotlib: the PNG is then not written and the run goes on. Debian's
    python3-matplotlib is /usr/bin/python3's; a `python3` earlier on PATH may lack it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("%s: %s cannot import matplotlib: %s not written (run it with /usr/bin/python3, "
              "Debian python3-matplotlib)" % (os.path.basename(sys.argv[0]), sys.executable, png),
              file=sys.stderr)
        return None
    return plt


def _calibration_lines(platform):
    """The lines of sim/calibration/PLATFORM.cal, each as (group, key, value, line); key and value
    None on a line that sets nothing."""
    group = None
    with open(os.path.join(ROOT, "sim", "calibration", platform + ".cal")) as f:
        for line in f:
            m = re.match(r"\[(\w+)\]", line)
            if m:
                group = m.group(1)
            m = re.match(r"(\w+)\s*=\s*(\S*)", line)
            yield group, m and m.group(1), m and m.group(2), line


def calibration_value(platform, group, key):
    """The value of [group] key in sim/calibration/PLATFORM.cal, as a float."""
    for g, k, v, _ in _calibration_lines(platform):
        if (g, k) == (group, key):
            return float(v)
    sys.exit("%s: no [%s] %s in %s.cal" % (os.path.basename(sys.argv[0]), group, key, platform))


def calibration_copy(platform, changes, directory):
    """A copy of sim/calibration/PLATFORM.cal with changes {(group, key): value}, in directory;
    its path. A key the file does not have ends the script with a message."""
    out, done = [], set()
    for g, k, _, line in _calibration_lines(platform):
        if (g, k) in changes:
            line = "%s=%s\n" % (k, changes[(g, k)])
            done.add((g, k))
        out.append(line)
    missing = sorted(set(changes) - done)
    if missing:
        sys.exit("%s: no %s in %s.cal" % (os.path.basename(sys.argv[0]),
                                           ", ".join("[%s] %s" % g for g in missing), platform))
    fd, path = tempfile.mkstemp(suffix=".cal", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.writelines(out)
    return path


def write_csv(path, rows):
    """Rows (dicts with the same keys) as a CSV file with a header."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def write_error_summary(path, errors):
    """Mean and max |error| (%) per (software, variant): {(software, variant): [|error|, ...]}.
    The format cli/predict.c reads (validate-public-variants.csv, reproduce-models.csv)."""
    with open(path, "w") as f:
        f.write("software,variant,rows,mean_abs_error_pct,max_abs_error_pct\n")
        for (sw, var), e in sorted(errors.items()):
            f.write("%s,%s,%d,%.1f,%.1f\n" % (sw, var, len(e), sum(e) / len(e), max(e)))


def add_refit_args(ap):
    """--build DIR (default $REFIT_BUILD, else build/) and --refit PATH (default DIR/cli/refit)."""
    ap.add_argument("--build", default=os.environ.get("REFIT_BUILD", os.path.join(ROOT, "build")),
                    help="build directory holding cli/refit (default $REFIT_BUILD, else build/)")
    ap.add_argument("--refit", help="the refit binary (default BUILD/cli/refit)")


def refit_path(a):
    """The binary the arguments of add_refit_args name."""
    return a.refit or os.path.join(a.build, "cli", "refit")


def refit_rows(refit, command, model, train, infer, topology, strategies, extra=()):
    """The JSON rows of `refit COMMAND` (sim, plan) as {strategy: row}, and the call's wall time."""
    cmd = [refit, command, "-q", "--json", "-m", model, "-t", train, "-i", infer, "-T", topology,
           "-s", ",".join(strategies)] + list(extra)
    env = dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT))
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit("refit %s failed: %s\n%s" % (command, " ".join(cmd), out.stderr.strip()))
    d = json.loads(out.stdout)
    return {r["strategy"]: r for r in d["strategies"]}, time.time() - t0


def sim(refit, model, train, infer, topology, strategies, extra=()):
    """Predictions of `refit sim` as {strategy: result}, and the wall time of the call."""
    return refit_rows(refit, "sim", model, train, infer, topology, strategies, extra)
