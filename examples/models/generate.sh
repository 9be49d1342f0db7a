#!/usr/bin/env bash
# Writes examples/models/*.json from the model definitions beside them, with tessel's importer
# (Debian's python3-torch; no weights: the modules live on the meta device). importers_test checks
# that the committed descriptions are what this writes.
# Usage: examples/models/generate.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="${1:-$HERE/../../build}"
OUT="${2:-$HERE}"
import() {  # FILE MODEL EXAMPLE NAME
  PYTHONPATH="$BUILD/client/python" /usr/bin/python3 -m tessel.from_torch "$HERE/$1" --model "$2" \
    --example "$3" --name "$4" --out "$OUT/$5.json"
}
import llama3_8b_layer.py layer prefill llama3-8b-prefill llama3_8b_prefill
import llama3_8b_layer.py decode_layer decode llama3-8b-decode llama3_8b_decode
import bert_base_layer.py layer tokens bert-base bert_base
import resnet50.py net image resnet50 resnet50
