#!/usr/bin/env python3
"""What rules cost `spamnb check`: its throughput with no rules, with spamnb's own rules/ and
with SpamAssassin's whole shipped set, on the same messages, as issue 3 asks (floors: 70%
and 40% of the rule-free rate).

usage: benches/rules_cost.py [--corpus sa-temporal|sa-shuffled] [--rounds N] [--messages N]
  run from the repository root after `cargo build --release`;
  SPAMNB=path/to/spamnb (default target/release/spamnb)

The corpus and its splits are ../shared/bench/compare.py's. A database is learned once from the
split's training half; then `check --format tsv` runs over the first N test messages (one
process, as compare.py runs a batch), each rule set in turn, rounds alternating in order, so
that the machine's drift falls on all alike. Printed: median wall and CPU seconds per set and
throughput relative to no rules. Single runs on a busy machine vary by 15%: trust medians.
"""
import argparse, importlib.util, os, resource, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPARE = os.path.join(ROOT, "..", "shared", "bench", "compare.py")
SA_RULES = "/usr/share/spamassassin"


def splits():
    spec = importlib.util.spec_from_file_location("compare", COMPARE)
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    return compare.CORPORA


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="sa-temporal")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--messages", type=int, default=2000)
    a = ap.parse_args()
    binary = os.environ.get("SPAMNB") or os.path.join(ROOT, "target", "release", "spamnb")
    os.environ["SPAMNB_CONFIG"] = os.devnull  # the defaults, whatever the user's file says
    train, test = splits()[a.corpus]()
    test = [p for p, _ in test][: a.messages]
    sets = [("no rules", ["--no-rules"]), ("rules/", ["--rules", os.path.join(ROOT, "rules")])]
    if os.path.isdir(SA_RULES):
        sets.append(("SpamAssassin's set", ["--rules", SA_RULES]))
    else:
        print(f"{SA_RULES} is missing (apt-get install spamassassin): measuring without it")
    work = tempfile.mkdtemp(prefix="spamnb-rules-cost-")
    try:
        db = os.path.join(work, "db")
        for label in ("spam", "ham"):
            files = [p for p, l in train if l == label]
            subprocess.run([binary, "learn", "--db", db, f"--{label}"] + files,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        runs = {name: [] for name, _ in sets}
        for r in range(a.rounds):
            for name, flags in sets if r % 2 == 0 else sets[::-1]:
                runs[name].append(timed([binary, "check", "--db", db, "--format", "tsv"] + flags + test))
        base = statistics.median(w for w, _ in runs["no rules"])
        print(f"{a.corpus}: check over {len(test)} messages, median of {a.rounds} runs")
        for name, _ in sets:
            wall = statistics.median(w for w, _ in runs[name])
            cpu = statistics.median(c for _, c in runs[name])
            print(f"  {name:20} wall {wall:6.3f} s  cpu {cpu:6.3f} s  "
                  f"{len(test) / wall:7.0f} msg/s  {100 * base / wall:5.1f}% of no rules")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
