#!/usr/bin/env bash
# Puts built binaries, every shared library they need that a bare CUDA machine lacks
# (tools/gpu_bundle_libs.sh says which), the check runner and its manifest into one folder; the
# binaries and libraries as one payload.tar.xz.
# Calls no Bazel: tools/gpu_bundle.sh builds and calls this; //tools:gpu_bundle_test calls it on
# its data deps.
#   gpu_bundle_assemble.sh OUTDIR [--label TEXT] [--tool BIN]... [--test BIN]... [--bench BIN]...
#                          [--planned "NAME|why it is not there"]...
# The tools device_query, coordinator, worker and pipectl are required (run_gpu_checks.sh uses them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/gpu_bundle_libs.sh"

readonly MAX_BYTES=$((64 * 1024 * 1024))  # what the device tool carries

die() { echo "gpu_bundle_assemble: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: gpu_bundle_assemble.sh OUTDIR [--label TEXT] [--tool|--test|--bench BIN]... [--planned 'NAME|why']..."
out=$1
shift
label=unlabelled
bins=()      # paths, in the order given
manifest=()  # "kind<TAB>name<TAB>detail" lines
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1: needs a value"
  case "$1" in
    --label) label=$2 ;;
    --tool | --test | --bench)
      [ -f "$2" ] && [ -x "$2" ] || die "$1 $2: not an executable file"
      bins+=("$2")
      manifest+=("${1#--}	$(basename "$2")	-") ;;
    --planned)
      case "$2" in *"|"*) ;; *) die "--planned $2: must be 'NAME|why it is not there'" ;; esac
      manifest+=("planned	${2%%|*}	${2#*|}") ;;
    *) die "$1: unknown option" ;;
  esac
  shift 2
done
names=$(for b in "${bins[@]}"; do basename "$b"; done | sort)
dup=$(uniq -d <<< "$names")
[ -z "$dup" ] || die "two binaries are named $dup: the bundle keeps one folder of binaries"
for required in coordinator device_query pipectl worker; do
  grep -qx "$required" <<< "$names" || die "--tool .../$required is required (run_gpu_checks.sh runs it)"
done

# Replace only a previous bundle, never an unrelated folder.
if [ -e "$out" ]; then
  [ -d "$out" ] || die "$out exists and is not a folder"
  if [ -n "$(ls -A "$out")" ] && [ ! -f "$out/manifest.txt" ]; then
    die "$out is not empty and holds no bundle (manifest.txt): refusing to replace it"
  fi
  rm -rf "$out"
fi
mkdir -p "$out/bin" "$out/lib" "$out/share"

for b in "${bins[@]}"; do
  cp -L "$b" "$out/bin/"
  chmod u+w "$out/bin/$(basename "$b")"
done

# The transitive closure as this machine resolves it (ldd lists indirect needs too).
for b in "${bins[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue  # linux-vdso and the loader have no "=>"
    machine_provided_lib "$name" && continue
    [ "$path" != "not" ] || die "$(basename "$b") needs $name, which this machine lacks"
    [ -f "$out/lib/$name" ] || { cp -L "$path" "$out/lib/$name"; chmod u+w "$out/lib/$name"; }
  done < <(ldd "$b")
done

# Symbols are not needed to run; debugging happens here, on the unstripped Bazel outputs.
strip --strip-unneeded "$out"/bin/* "$out"/lib/*

cp "$here/run_gpu_checks.sh" "$out/run_gpu_checks.sh"
cp "$here/../bench/torch_block_bench.py" "$out/share/torch_block_bench.py"
cp "$here/block_vs_torch.py" "$out/share/block_vs_torch.py"
chmod 755 "$out/run_gpu_checks.sh"
# The end-to-end smoke job: tiny, so the checks stay short on any machine.
cat > "$out/share/smoke_job.json" <<'JSON'
{"name": "gpu-bundle-smoke", "schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 2,
 "steps": 3, "learningRate": 0.01,
 "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "3"}}
JSON
{
  echo "# pipecoord GPU bundle: $label, assembled $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "# kind	name	detail (run_gpu_checks.sh reads this)"
  printf '%s\n' "${manifest[@]}"
} > "$out/manifest.txt"

# The binaries and libraries travel xz-packed (OpenBLAS alone is 36 MiB unpacked; packed, the
# whole bundle is about a third of its size); run_gpu_checks.sh unpacks them into its work folder.
unpacked_bytes=$(du -sb "$out/bin" "$out/lib" | awk '{ s += $1 } END { print s }')
n_libs=$(ls "$out/lib" | wc -l)
tar -C "$out" -cf - bin lib | xz -6 -T2 > "$out/payload.tar.xz"
rm -rf "$out/bin" "$out/lib"
bytes=$(du -sb "$out" | cut -f1)
echo "gpu bundle: $out: ${#bins[@]} binaries, $n_libs libraries, $((unpacked_bytes / 1048576)) MiB unpacked, $((bytes / 1024)) KiB ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of 64) packed"
[ "$bytes" -le "$MAX_BYTES" ] || die "$out is $bytes bytes: over the 64 MiB the device tool carries"
