#!/usr/bin/env bash
# Measures each tokenizer and model choice against the defaults on both corpus splits,
# through ../shared/bench/compare.py: one row per choice and split, 1-AUC% and the errors
# at the default thresholds. Run from the repository root, whose rules/ are the default rules.
# Usage: benches/choices.sh [compare.py]   (after cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
compare=${1:-../shared/bench/compare.py}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

choice() {
    local name=$1 toml=$2
    printf '%b' "$toml" >"$dir/$name.toml"
    for corpus in sa-temporal sa-shuffled; do
        SPAMNB=target/release/spamnb SPAMNB_CONFIG="$dir/$name.toml" python3 "$compare" --corpus "$corpus" spamnb |
            awk -F'\t' -v n="$name" 'NR == 2 { printf "%-28s %-12s 1-AUC%% %6s  fp %3s  fn %4s  unsure %4s\n", n, $2, $15, $9, $10, $11 }'
    done
}

choice defaults ''
choice 'no rules' 'rules = []\n'
choice 'no header tokens' '[tokenizer]\nheader_tokens = false\n'
choice 'no url tokens' '[tokenizer]\nurl_tokens = false\n'
choice 'caps tokens' '[tokenizer]\ncaps_tokens = true\n'
choice 'html tag tokens' '[tokenizer]\nhtml_tokens = true\n'
choice 'pair tokens' '[tokenizer]\npair_tokens = true\n'
choice 'multinomial counts' '[model]\nevent_model = "multinomial"\n'
choice 'all features alike' '[model]\nstrongest_features = 0\n'
choice 'strongest 15 alone' '[model]\nall_features_share = 0.0\n'
choice 'no length normalization' '[model]\nnormalize_length = false\n'
choice 'no min token weight' '[model]\nmin_token_weight = 0.0\n'
choice 'alpha 1' '[model]\nalpha = 1.0\n'
choice 'alpha 0.01' '[model]\nalpha = 0.01\n'
