#!/usr/bin/env bash
# pipectl data, run as a user would: prepare (text to a byte-level dataset: the exact bytes,
# the split, the sidecars, progress for big inputs) and check (flat and Megatron-LM datasets,
# each refusal with its exact message and exit 2).
source cli/cli_test_lib.sh
PYW=data/python_written

# --- help -----------------------------------------------------------------------------------
expect_ok data_help data --help
grep -q "^  prepare " "$TMP/data_help.out" && grep -q "^  check " "$TMP/data_help.out" || fail "data --help lists no subcommands"
expect_ok prepare_help data prepare --help
for flag in --out --val-fraction --format --help; do
  grep -qE -- "^ *(-h, )?$flag " "$TMP/prepare_help.out" || fail "data prepare --help does not explain $flag"
done
expect_ok check_help data check --help
grep -qE -- "^ *--vocab " "$TMP/check_help.out" || fail "data check --help does not explain --vocab"
expect_ok top --help
grep -q "^  data " "$TMP/top.out" || fail "pipectl --help does not list data"
"$PIPECTL" data >/dev/null 2>&1
[ $? -eq 2 ] || fail "pipectl data with no subcommand should exit 2"

# --- prepare ----------------------------------------------------------------------------------
printf 'It was the best of times, it was the worst of times.\n' >"$TMP/a.txt"
: >"$TMP/empty.txt"
printf 'caf\xc3\xa9 \xe2\x82\xac\n' >"$TMP/b.txt"   # UTF-8: bytes above 127 are ids above 127
expect_ok prepare data prepare "$TMP/a.txt" "$TMP/empty.txt" "$TMP/b.txt" --out "$TMP/ds" --val-fraction 0.25
want="train: $TMP/ds/train.bin (47 tokens, 1 document), $TMP/ds/train.json
val:   $TMP/ds/val.bin (16 tokens, 2 documents), $TMP/ds/val.json
from 3 files, 63 bytes; byte-level tokens (vocabulary 256) as uint16"
[ "$(cat "$TMP/prepare.out")" == "$want" ] || fail "prepare printed [$(cat "$TMP/prepare.out")], want [$want]"
[ ! -s "$TMP/prepare.err" ] || fail "prepare wrote on stderr for a small input: $(cat "$TMP/prepare.err")"
$PY - "$TMP" <<'PYEOF' || fail "prepare's files"
import json, os, struct, sys
tmp = sys.argv[1]
text = open(tmp + "/a.txt", "rb").read() + open(tmp + "/b.txt", "rb").read()
assert len(text) == 63
cut = 63 - round(0.25 * 63)  # 16 held out
for name, part, starts in (("train", text[:cut], [0]), ("val", text[cut:], [0, 53 - cut])):
    raw = open("%s/ds/%s.bin" % (tmp, name), "rb").read()
    ids = struct.unpack("<%dH" % (len(raw) // 2), raw)
    assert bytes(ids) == part, (name, ids)
    side = json.load(open("%s/ds/%s.json" % (tmp, name)))
    assert side == {"dtype": "uint16", "vocab_size": 256, "tokens": len(part), "document_starts": starts,
                    "tokenizer": "bytes"}, side
assert sorted(os.listdir(tmp + "/ds")) == ["train.bin", "train.json", "val.bin", "val.json"]
PYEOF

expect_ok prepare_json --format json data prepare "$TMP/a.txt" "$TMP/b.txt" --out "$TMP/ds2"
check prepare_json "assert d['tokenizer'] == 'bytes' and d['vocab_size'] == 256 and d['dtype'] == 'uint16'; \
assert d['input_files'] == 2 and d['input_bytes'] == 63 and d['val_fraction'] == 0.1; \
assert d['train'] == {'bin': '$TMP/ds2/train.bin', 'sidecar': '$TMP/ds2/train.json', 'tokens': 57, 'documents': 2}; \
assert d['val'] == {'bin': '$TMP/ds2/val.bin', 'sidecar': '$TMP/ds2/val.json', 'tokens': 6, 'documents': 1}"
expect_ok prepare_noval data prepare "$TMP/a.txt" --out "$TMP/ds3" --val-fraction 0 --format json
check prepare_noval "assert d['val'] is None and d['train']['tokens'] == 53"
[ ! -e "$TMP/ds3/val.bin" ] || fail "--val-fraction 0 wrote val.bin"

# Big inputs report progress on stderr, a line per tenth.
head -c $((33 << 20)) /dev/zero | tr '\0' 'x' >"$TMP/big.txt"
expect_ok prepare_big data prepare "$TMP/big.txt" --out "$TMP/big"
[ "$(wc -l <"$TMP/prepare_big.err")" -eq 10 ] || fail "big input: $(wc -l <"$TMP/prepare_big.err") progress lines, want 10"
[ "$(tail -n 1 "$TMP/prepare_big.err")" == "pipectl data prepare: 100% (33.0 of 33.0 MiB)" ] ||
  fail "big input: last progress line [$(tail -n 1 "$TMP/prepare_big.err")]"
rm -f "$TMP/big.txt" "$TMP"/big/*.bin

# --- check ------------------------------------------------------------------------------------
expect_ok check_text data check "$TMP/ds/train" "$TMP/ds/val.bin"
want="$TMP/ds/train: flat, uint16, 47 tokens, 1 document, every id below 256
$TMP/ds/val.bin: flat, uint16, 16 tokens, 2 documents, every id below 256"
[ "$(cat "$TMP/check_text.out")" == "$want" ] || fail "check printed [$(cat "$TMP/check_text.out")], want [$want]"
# --entropy: the unigram entropy, computed here again from the bytes by Python.
expect_ok check_entropy data check "$TMP/ds/train" --entropy --format json
/usr/bin/python3 - "$TMP" <<'PYEOF' || fail "check --entropy: wrong unigram entropy"
import collections, json, math, sys
tmp = sys.argv[1]
raw = open(tmp + "/ds/train.bin", "rb").read()[::2]
n = len(raw)
h = -sum(c / n * math.log2(c / n) for c in collections.Counter(raw).values())
d = json.load(open(tmp + "/check_entropy.out"))
assert abs(d[0]["unigram_entropy_bits"] - h) < 1e-12, (d, h)
PYEOF
expect_ok check_entropy_text data check "$TMP/ds/train" --entropy
grep -qE "^$TMP/ds/train: flat, uint16, 47 tokens, 1 document, every id below 256; unigram entropy [0-9]+\.[0-9]{4} bits per token\$" \
  "$TMP/check_entropy_text.out" || fail "check --entropy printed [$(cat "$TMP/check_entropy_text.out")]"
expect_ok check_megatron data check "$PYW/megatron_u16" "$PYW/megatron_i32" --vocab 70000 --format json
check check_megatron "assert [(x['format'], x['dtype'], x['tokens'], x['documents'], x['vocab_size']) for x in d] == \
[('megatron', 'uint16', 53, 4, 70000), ('megatron', 'int32', 53, 4, 70000)]; assert d[0]['layout'] == '$PYW/megatron_u16.idx'"

# --- errors: exit 2 and the exact message -----------------------------------------------------
expect_error no_text 2 "pipectl data prepare: needs at least one TEXT file" data prepare --out "$TMP/x"
expect_error no_out 2 "pipectl data prepare: --out: required (the folder to write)" data prepare "$TMP/a.txt"
expect_error fraction 2 "pipectl data prepare: --val-fraction: must be in [0, 1), got 1" \
  data prepare "$TMP/a.txt" --out "$TMP/x" --val-fraction 1
expect_error missing 2 "pipectl data prepare: cannot open $TMP/nope.txt: No such file or directory" \
  data prepare "$TMP/nope.txt" --out "$TMP/x"
expect_error only_empty 2 "pipectl data prepare: the inputs hold no text (0 bytes)" \
  data prepare "$TMP/empty.txt" --out "$TMP/x"
expect_error out_is_file 2 "pipectl data prepare: $TMP/b.txt: exists and is not a folder" \
  data prepare "$TMP/a.txt" --out "$TMP/b.txt"
expect_error sub 2 "pipectl data: unknown subcommand \"convert\" (there: prepare, check)

usage: pipectl data prepare TEXT... --out DIR [--val-fraction F] [--format text|json]
       pipectl data check PREFIX... [--vocab N] [--entropy] [--format text|json]
       (pipectl data SUBCOMMAND --help for its options)

Training data on disk.

subcommands:
  prepare      text files to a byte-level token dataset (vocabulary 256): train and validation
  check        open token datasets (flat or Megatron-LM) and report them, or the rule one breaks" data convert x
expect_error megatron_vocab 2 "pipectl data check: $PYW/megatron_u16.idx: a Megatron-LM index records no vocabulary size; give the model's" \
  data check "$PYW/megatron_u16"
expect_error id_too_big 2 "pipectl data check: $PYW/megatron_u16.bin: token 529 at offset 14 (byte 28) is >= the vocabulary size 500 (the model's vocabulary)" \
  data check "$PYW/megatron_u16" --vocab 500
head -c 51 "$TMP/ds/train.bin" >"$TMP/cut.bin" && cp "$TMP/ds/train.json" "$TMP/cut.json"
expect_error truncated 2 "pipectl data check: $TMP/cut.bin: 51 bytes is not a whole number of uint16 tokens (2 bytes each, as $TMP/cut.json says): the file is truncated" \
  data check "$TMP/cut"
head -c 50 "$TMP/ds/train.bin" >"$TMP/cut.bin"
expect_error disagrees 2 "pipectl data check: $TMP/cut.json says 47 tokens (94 bytes of uint16), but $TMP/cut.bin has 50 bytes (25 tokens)" \
  data check "$TMP/cut"
expect_error no_dataset 2 "pipectl data check: $TMP/none: no dataset: neither $TMP/none.json (flat token sidecar) nor $TMP/none.idx (Megatron-LM index) exists" \
  data check "$TMP/none"

finish_tests "pipectl data"
