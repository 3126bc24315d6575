#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The device check's summary, written once for both of its runners: the bundle's `run` (on a
# bare GPU machine) and tools/device-check.sh (on a machine that builds). bash, coreutils, grep,
# sed and awk only, as on a bare machine.
#   summary.sh LOGS OUT    writes OUT/summary.json and OUT/summary.txt from the logs in LOGS;
#                          exits 0 when the result is PASS, 1 when FAIL, 2 on a usage error.
# LOGS holds:
#   meta.txt      key=value lines: tool, posenc, host, started, seconds, allow_software (0/1),
#                 validation, bench_mode, and hint_vulkan / hint_opencl (why a build left a
#                 backend out); one "step=NAME<tab>SECONDS" line per timed step
#   runtimes.txt  what the runner found of the runtimes and drivers, a line each (optional)
#   devices.json  posenc devices --json
#   tests.tsv     NAME<tab>PASS<tab>RESULT<tab>SECONDS per test program run: PASS is the backend
#                 the run was limited to (POSENC_TEST_BACKEND), or "all"; RESULT is "passed",
#                 "skipped" or "FAILED ..."; the program's output is test-PASS-NAME.log. Absent
#                 when no test ran.
#   demo-S.log and demo-S.rc, bench-S.json and bench-S.rc for each device checked, S being its
#                 selector with '-' for ':' (vulkan-0)
# A test program prints "  vulkan:1   NAME   ok" (or FAILED) for each device it ran on, after the
# worst errors it found there ("... 2.76 x 2^-24 ... worst of tolerance 0.500 ..."): the counts
# and errors per device come from those lines.
set -euo pipefail
export LC_ALL=C
if ((BASH_VERSINFO[0] < 4)); then
    echo "summary.sh: needs bash 4 or newer, this is $BASH_VERSION (macOS: brew install bash)" >&2
    exit 2
fi

if (($# != 2)); then
    echo "usage: summary.sh LOGS OUT" >&2
    exit 2
fi
logs=$1
out=$2
[[ -d $logs ]] || { echo "summary.sh: $logs: no such folder" >&2; exit 2; }
mkdir -p "$out"

# ---- helpers ------------------------------------------------------------------------------

# A JSON string of $1.
json_string() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

# $1 as a JSON number, or null when it is empty.
json_number() { printf '%s' "${1:-null}"; }

# A JSON list of strings from the arguments.
json_strings() {
    local first=1 s
    printf '['
    for s in "$@"; do
        ((first)) || printf ', '
        json_string "$s"
        first=0
    done
    printf ']'
}

# $1 rounded to $2 decimals, or "?" when empty.
decimals() {
    if [[ -z $1 ]]; then
        printf '?'
    else
        printf "%.${2}f" "$1"
    fi
}

# The larger of two numbers, either possibly empty.
max_of() {
    if [[ -z $1 ]]; then
        printf '%s' "$2"
    elif [[ -z $2 ]]; then
        printf '%s' "$1"
    else
        awk -v a="$1" -v b="$2" 'BEGIN { print (b + 0 > a + 0) ? b : a }'
    fi
}

failures=()
fail() { failures+=("$1"); }

# ---- the run ------------------------------------------------------------------------------
declare -A meta=([tool]="" [posenc]="" [host]="" [started]="" [seconds]="" [allow_software]=0
    [validation]="" [bench_mode]="" [hint_vulkan]="" [hint_opencl]="")
step_names=()
step_seconds=()
if [[ -f $logs/meta.txt ]]; then
    while IFS= read -r line; do
        if [[ $line =~ ^step=(.*)$'\t'([0-9]+)$ ]]; then
            step_names+=("${BASH_REMATCH[1]}")
            step_seconds+=("${BASH_REMATCH[2]}")
        elif [[ $line =~ ^([a-z_]+)=(.*)$ ]]; then
            meta[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
        fi
    done <"$logs/meta.txt"
fi
runtimes=()
if [[ -f $logs/runtimes.txt ]]; then
    mapfile -t runtimes <"$logs/runtimes.txt"
fi

# ---- devices and backends -----------------------------------------------------------------
# posenc devices --json puts a device's selector, backend and type on its object's first line
# and its name and driver on the second.
selectors=() names=() backends=() types=() drivers=()
declare -A backend_state=()
if [[ -f $logs/devices.json ]]; then
    device_line='"selector": "((vulkan|opencl|cpu):[0-9]+)", "backend": "([a-z]+)", .*"type": "([^"]*)"'
    name_line='"name": "(([^"\\]|\\.)*)", .*"driver": "(([^"\\]|\\.)*)"'
    backend_line='"backend": "([a-z]+)", "available": (true|false), "reason": "(([^"\\]|\\.)*)"'
    pending=""
    while IFS= read -r line; do
        if [[ $line =~ $device_line ]]; then
            # posenc's own CPU path is checked by the full test suite, not here.
            if [[ ${BASH_REMATCH[3]} == cpu ]]; then
                pending=""
            else
                pending="${BASH_REMATCH[1]}|${BASH_REMATCH[3]}|${BASH_REMATCH[4]}"
            fi
        elif [[ -n $pending && $line =~ $name_line ]]; then
            IFS='|' read -r selector backend type <<<"$pending"
            pending=""
            selectors+=("$selector") backends+=("$backend") types+=("$type")
            names+=("$(printf '%s' "${BASH_REMATCH[1]}" | sed 's/\\"/"/g; s/\\\\/\\/g')")
            drivers+=("$(printf '%s' "${BASH_REMATCH[3]}" | sed 's/\\"/"/g; s/\\\\/\\/g')")
        elif [[ $line =~ $backend_line && ${BASH_REMATCH[1]} != cpu ]]; then
            backend=${BASH_REMATCH[1]}
            if [[ ${BASH_REMATCH[2]} == true ]]; then
                backend_state[$backend]=available
            else
                reason=$(printf '%s' "${BASH_REMATCH[3]}" | sed 's/\\"/"/g; s/\\\\/\\/g')
                backend_state[$backend]="unavailable: $reason"
                hint=${meta[hint_$backend]:-}
                if [[ $reason == "not compiled in" && -n $hint ]]; then
                    backend_state[$backend]+=" ($hint)"
                fi
            fi
        fi
    done <"$logs/devices.json"
else
    fail "no device list (posenc devices --json did not run)"
fi

# ---- the tests ----------------------------------------------------------------------------
tests_ran=0
tests_passed=0 tests_failed=0 tests_skipped=0
failed_names=() skipped_names=()
declare -A device_ok=() device_failed=() device_skipped=() device_f32=() device_tolerance=()
if [[ -f $logs/tests.tsv ]]; then
    tests_ran=1
    while IFS=$'\t' read -r name pass result seconds; do
        [[ -n $name && $name != \#* ]] || continue
        case $result in
            passed) tests_passed=$((tests_passed + 1)) ;;
            skipped)
                tests_skipped=$((tests_skipped + 1))
                skipped_names+=("$name")
                ;;
            *)
                tests_failed=$((tests_failed + 1))
                failed_names+=("$name")
                ;;
        esac
        # Each device line of the program's output, with the worst errors printed before it:
        # "SELECTOR<tab>ok|FAILED<tab>f32<tab>tolerance".
        lines=$(awk '
            function keep(v) { if (v != "" && (f32 == "" || v + 0 > f32 + 0)) f32 = v }
            function keep_tol(v) { if (v != "" && (tol == "" || v + 0 > tol + 0)) tol = v }
            /^    .*error .* x 2\^-24 .*worst of tolerance / {
                line = $0
                while (match(line, /[0-9.]+ x 2\^-24/)) {
                    v = substr(line, RSTART, RLENGTH); sub(/ .*/, "", v); keep(v)
                    line = substr(line, RSTART + RLENGTH)
                }
                line = $0; sub(/.*worst of tolerance /, "", line)
                split(line, t, /[^0-9.]+/); keep_tol(t[1])
                if (match(line, /^[0-9.]+ \/ [0-9.]+/)) {
                    split(substr(line, 1, RLENGTH), t, / \/ /); keep_tol(t[2])
                }
                next
            }
            /^  (vulkan|opencl|cpu):[0-9]+ .* (ok|FAILED)$/ {
                print $1 "\t" $NF "\t" f32 "\t" tol
                f32 = ""; tol = ""
            }' "$logs/test-$pass-$name.log" 2>/dev/null || true)
        if [[ -n $lines ]]; then
            while IFS=$'\t' read -r selector verdict f32 tolerance; do
                if [[ $verdict == ok ]]; then
                    device_ok[$selector]=$((${device_ok[$selector]:-0} + 1))
                else
                    device_failed[$selector]=$((${device_failed[$selector]:-0} + 1))
                fi
                device_f32[$selector]=$(max_of "${device_f32[$selector]:-}" "$f32")
                device_tolerance[$selector]=$(max_of "${device_tolerance[$selector]:-}" \
                    "$tolerance")
            done <<<"$lines"
        elif [[ $result != passed ]]; then
            # A program that failed or skipped before naming a device did so on every device
            # its run covered.
            for i in "${!selectors[@]}"; do
                [[ $pass == all || $pass == "${backends[$i]}" ]] || continue
                selector=${selectors[$i]}
                if [[ $result == skipped ]]; then
                    device_skipped[$selector]=$((${device_skipped[$selector]:-0} + 1))
                else
                    device_failed[$selector]=$((${device_failed[$selector]:-0} + 1))
                fi
            done
        fi
    done <"$logs/tests.tsv"
    if ((tests_passed + tests_failed + tests_skipped == 0)); then
        fail "no test ran"
    fi
    if ((tests_failed)); then
        fail "$tests_failed test(s) failed: $(IFS=,; echo "${failed_names[*]}" | sed 's/,/, /g')"
    fi
fi

# ---- the demo and the bench ---------------------------------------------------------------

# posenc demo: "  positions 0 .. 2047   max error 1.96e-07 = 0.412 x promise ..." under
# "rope: ..." and "sinusoidal: ...", and "result: PASS"; prints "ROPE_ERROR ROPE_X SIN_ERROR
# SIN_X RESULT", "-" for what is missing.
demo_read() {
    awk '
        function keep(name, v) { if (v != "" && (!(name in worst) || v + 0 > worst[name] + 0)) worst[name] = v }
        /^(rope|sinusoidal): / { section = $1; sub(/:/, "", section); next }
        / max error [^ ]+ = [^ ]+ x promise/ {
            match($0, / max error [^ ]+ = [^ ]+ x/)
            split(substr($0, RSTART, RLENGTH), w, " ")
            keep(section "_error", w[3]); keep(section "_x", w[5]); next
        }
        /^result: PASS/ { result = "PASS" }
        /^result: FAIL/ { result = "FAIL" }
        END {
            n = split("rope_error rope_x sinusoidal_error sinusoidal_x", k, " ")
            for (i = 1; i <= n; i++) printf "%s ", (k[i] in worst) ? worst[k[i]] : "-"
            print (result != "") ? result : "-"
        }' "$1"
}

# posenc bench --json, one row per line: prints key<tab>value lines: ok, rows, the min and max
# RoPE ratios to the copy per kind, the f32 NeoX prefill and its copy's GB/s, "ratio KIND DTYPE"
# for each NeoX row, first_rope_ms, fresh_process_ms, and "row" with each row's JSON.
bench_read() {
    awk '
        function field(line, key,    v) {
            if (!match(line, "\"" key "\": ")) return ""
            v = substr(line, RSTART + RLENGTH)
            if (substr(v, 1, 1) == "\"") { v = substr(v, 2); sub(/".*/, "", v); return v }
            sub(/[,}].*/, "", v)
            return v
        }
        function keep(name, v, larger) {
            if (v == "") return
            if (!(name in best) || (larger ? v + 0 > best[name] + 0 : v + 0 < best[name] + 0)) best[name] = v
        }
        /"first_call": / {
            first = $0; sub(/.*"first_call": \{/, "", first)
            print "first_rope_ms\t" field(first, "first_rope_ms")
            fresh = $0
            if (sub(/.*"fresh_process": \{/, "", fresh)) print "fresh_process_ms\t" field(fresh, "median_ms")
        }
        /^ *\{"operation": / {
            op = field($0, "operation"); dtype = field($0, "dtype"); style = field($0, "style")
            # The memory rows (device buffer, host tensor, wrapped host) have no dtype and
            # no copy to compare with.
            if (dtype == "") next
            rows++
            ratio = field($0, "ratio_to_copy"); gbps = field($0, "gb_per_s")
            copy = field($0, "copy_gb_per_s"); ok = field($0, "ok")
            if (op ~ /^rope (prefill|decode)$/) {
                kind = substr(op, 6)
                keep(kind "_min", ratio, 0); keep(kind "_max", ratio, 1)
                if (style == "neox") print "ratio\t" kind "\t" dtype "\t" ratio
                if (kind == "prefill" && dtype == "f32" && style == "neox") {
                    print "prefill_f32_gbps\t" gbps; print "copy_gbps\t" copy
                }
            }
            printf "row\t{\"operation\": \"%s\", \"dtype\": \"%s\", \"style\": \"%s\", \"ok\": %s, \"ratio_to_copy\": %s, \"gb_per_s\": %s, \"copy_gb_per_s\": %s}\n",
                op, dtype, style, (ok == "true") ? "true" : "false", (ratio == "") ? "null" : ratio,
                (gbps == "") ? "null" : gbps, (copy == "") ? "null" : copy
        }
        /^ "ok": (true|false)[}]/ { top_ok = ($0 ~ /true/) ? "true" : "false" }
        END {
            print "rows\t" rows + 0
            print "ok\t" ((top_ok != "") ? top_ok : "false")
            for (k in best) print k "\t" best[k]
        }' "$1"
}

# ---- each device --------------------------------------------------------------------------
checked=0
device_json=()
device_text=()
for i in "${!selectors[@]}"; do
    selector=${selectors[$i]} backend=${backends[$i]} type=${types[$i]} name=${names[$i]}
    base=${selector/:/-}
    check=false
    if [[ $type == *GPU ]] || ((meta[allow_software])); then
        check=true
        checked=$((checked + 1))
    fi
    ok_runs=${device_ok[$selector]:-0} failed_runs=${device_failed[$selector]:-0}
    skipped_runs=${device_skipped[$selector]:-0}
    f32=${device_f32[$selector]:-} tolerance=${device_tolerance[$selector]:-}
    problems_before=${#failures[@]}
    if ((failed_runs)); then
        fail "$selector: $failed_runs test run(s) failed on this device"
    fi
    if [[ $check == true ]] && ((tests_ran && ok_runs + failed_runs == 0)); then
        fail "$selector: no test ran on this device"
    fi

    # The demo.
    demo_state="not run" demo_rc=null
    rope_error="" rope_x="" sin_error="" sin_x=""
    if [[ $check == true && -f $logs/demo-$base.log ]]; then
        demo_rc=$(head -n 1 "$logs/demo-$base.rc" 2>/dev/null || true)
        [[ $demo_rc =~ ^[0-9]+$ ]] || demo_rc=null
        read -r rope_error rope_x sin_error sin_x demo_result < <(demo_read "$logs/demo-$base.log")
        [[ $rope_error == - ]] && rope_error=""
        [[ $rope_x == - ]] && rope_x=""
        [[ $sin_error == - ]] && sin_error=""
        [[ $sin_x == - ]] && sin_x=""
        if [[ $demo_rc == 0 && $demo_result == PASS && -n $rope_error && -n $sin_error ]]; then
            demo_state=pass
        else
            demo_state=fail
            fail "$selector: accuracy demo failed (exit $demo_rc, see demo-$base.log)"
        fi
    elif [[ $check == true ]]; then
        fail "$selector: no accuracy demo log"
    fi
    worst_error=$(max_of "$rope_error" "$sin_error")

    # The bench.
    bench_state="not run" bench_rc=null
    declare -A bench=()
    declare -A ratio=()
    rows=()
    if [[ $check == true && -f $logs/bench-$base.json ]]; then
        bench_rc=$(head -n 1 "$logs/bench-$base.rc" 2>/dev/null || true)
        [[ $bench_rc =~ ^[0-9]+$ ]] || bench_rc=null
        while IFS=$'\t' read -r key a b c; do
            case $key in
                row) rows+=("$a") ;;
                ratio) ratio[$a]+="${ratio[$a]:+, }\"$b\": $c" ;;
                *) bench[$key]=$a ;;
            esac
        done < <(bench_read "$logs/bench-$base.json")
        if [[ $bench_rc == 0 && ${bench[ok]} == true ]] && ((bench[rows] > 0)); then
            bench_state=pass
        else
            bench_state=fail
            fail "$selector: bench failed (exit $bench_rc, see bench-$base.json)"
        fi
    elif [[ $check == true ]]; then
        fail "$selector: no bench log"
    fi
    device_good=false
    if [[ $check == true ]] && ((${#failures[@]} == problems_before)); then
        device_good=true
    fi

    rows_json=""
    for row in ${rows[@]+"${rows[@]}"}; do
        rows_json+="${rows_json:+,}"$'\n'"        $row"
    done
    device_json+=("$(
        printf '    {"selector": %s, "name": %s, "backend": %s, "type": %s, "driver": %s,\n' \
            "$(json_string "$selector")" "$(json_string "$name")" "$(json_string "$backend")" \
            "$(json_string "$type")" "$(json_string "${drivers[$i]}")"
        printf '     "checked": %s, "ok": %s,\n' "$check" "$device_good"
        printf '     "tests_passed": %s, "tests_failed": %s, "tests_skipped": %s,\n' \
            "$ok_runs" "$failed_runs" "$skipped_runs"
        printf '     "tests_worst_f32_error_times_2pow24": %s, "tests_worst_16bit_of_tolerance": %s,\n' \
            "$(json_number "$f32")" "$(json_number "$tolerance")"
        printf '     "worst_error": %s,\n' "$(json_number "$worst_error")"
        printf '     "demo": {"state": %s, "exit": %s, "rope_max_error": %s, "rope_x_promise": %s, "sinusoidal_max_error": %s, "sinusoidal_x_promise": %s},\n' \
            "$(json_string "$demo_state")" "$demo_rc" "$(json_number "$rope_error")" \
            "$(json_number "$rope_x")" "$(json_number "$sin_error")" "$(json_number "$sin_x")"
        printf '     "ratio_to_copy": {"prefill": {%s}, "decode": {%s}},\n' \
            "${ratio[prefill]:-}" "${ratio[decode]:-}"
        printf '     "first_rope_ms": %s, "fresh_process_ms": %s,\n' \
            "$(json_number "${bench[first_rope_ms]:-}")" \
            "$(json_number "${bench[fresh_process_ms]:-}")"
        printf '     "bench": {"state": %s, "exit": %s, "rope_prefill_ratio_min": %s, "rope_prefill_ratio_max": %s, "rope_decode_ratio_min": %s, "rope_decode_ratio_max": %s, "rope_prefill_f32_neox_gb_per_s": %s, "copy_gb_per_s": %s,\n' \
            "$(json_string "$bench_state")" "$bench_rc" \
            "$(json_number "${bench[prefill_min]:-}")" "$(json_number "${bench[prefill_max]:-}")" \
            "$(json_number "${bench[decode_min]:-}")" "$(json_number "${bench[decode_max]:-}")" \
            "$(json_number "${bench[prefill_f32_gbps]:-}")" "$(json_number "${bench[copy_gbps]:-}")"
        printf '       "rows": [%s]}}' "$rows_json"
    )")

    # Text.
    if [[ $type == *GPU ]]; then
        role="$type, checked"
    elif [[ $check == true ]]; then
        role="software device (type $type), checked"
    else
        role="software device (type $type), not checked without --allow-software"
    fi
    text="$selector  $name  [$role]"$'\n'"  driver:   ${drivers[$i]}"$'\n'
    if ((tests_ran)); then
        line="  tests:    $ok_runs test programs passed on it, $failed_runs failed"
        ((skipped_runs)) && line+=", $skipped_runs skipped"
        [[ -n $f32 ]] && line+="; worst f32 error $f32 x 2^-24 (promise 8)"
        [[ -n $tolerance ]] && line+=", f16/bf16 $tolerance of tolerance"
        text+="$line"$'\n'
    fi
    if [[ $check == true ]]; then
        if [[ $demo_state == "not run" ]]; then
            text+="  demo:     not run"$'\n'
        else
            text+="  demo:     rope max error ${rope_error:-?} = ${rope_x:-?} x promise,"
            text+=" sinusoidal ${sin_error:-?} = ${sin_x:-?} x; $demo_state"$'\n'
        fi
        if [[ $bench_state == "not run" ]]; then
            text+="  bench:    not run"$'\n'
        elif [[ -z ${bench[prefill_min]:-} ]]; then
            text+="  bench:    $bench_state, no copy figures"$'\n'
        else
            text+="  bench:    rope/copy throughput: prefill $(decimals "${bench[prefill_min]}" 2)"
            text+=" to $(decimals "${bench[prefill_max]}" 2), decode"
            text+=" $(decimals "${bench[decode_min]:-}" 2) to $(decimals "${bench[decode_max]:-}" 2);"
            text+=" prefill f32 neox $(decimals "${bench[prefill_f32_gbps]:-}" 1) GB/s, copy"
            text+=" $(decimals "${bench[copy_gbps]:-}" 1) GB/s; $bench_state"$'\n'
            prefill=${ratio[prefill]:-none} decode=${ratio[decode]:-none}
            text+="            NeoX rope/copy: prefill ${prefill//\"/}; decode ${decode//\"/}"$'\n'
            text+="            first RoPE call ${bench[first_rope_ms]:-?} ms, fresh process"
            text+=" ${bench[fresh_process_ms]:-?} ms"$'\n'
        fi
    fi
    device_text+=("$text")
    unset bench ratio
done

if ((checked == 0)); then
    if ((meta[allow_software])); then
        fail "no GPU device (hardware or software) found"
    else
        fail "no GPU device found (software devices count only with --allow-software)"
    fi
fi

# ---- write --------------------------------------------------------------------------------
ok=true
result="PASS"
if ((${#failures[@]})); then
    ok=false
    result="FAIL: $(printf '%s; ' "${failures[@]}")"
    result=${result%; }
fi

json=$out/summary.json
{
    echo "{\"ok\": $ok, \"result\": $(json_string "${result%%:*}"),"
    echo " \"tool\": $(json_string "${meta[tool]}"), \"posenc\": $(json_string "${meta[posenc]}"),"
    echo " \"host\": $(json_string "${meta[host]}"), \"started\": $(json_string "${meta[started]}"),"
    echo " \"seconds\": $(json_number "${meta[seconds]}"),"
    echo " \"allow_software\": $( ((meta[allow_software])) && echo true || echo false),"
    echo " \"vulkan_validation\": $(json_string "${meta[validation]}"),"
    echo " \"bench_mode\": $(json_string "${meta[bench_mode]}"),"
    printf ' "steps": ['
    for i in "${!step_names[@]}"; do
        ((i)) && printf ', '
        printf '{"step": %s, "seconds": %s}' "$(json_string "${step_names[$i]}")" \
            "${step_seconds[$i]}"
    done
    echo '],'
    echo " \"runtimes\": $(json_strings ${runtimes[@]+"${runtimes[@]}"}),"
    printf ' "backends": {'
    first=1
    for backend in vulkan opencl; do
        [[ -n ${backend_state[$backend]:-} ]] || continue
        ((first)) || printf ', '
        printf '%s: %s' "$(json_string "$backend")" "$(json_string "${backend_state[$backend]}")"
        first=0
    done
    echo '},'
    if ((tests_ran)); then
        printf ' "tests": {"passed": %s, "failed": %s, "skipped": %s, "failed_names": %s, "skipped_names": %s},\n' \
            "$tests_passed" "$tests_failed" "$tests_skipped" \
            "$(json_strings ${failed_names[@]+"${failed_names[@]}"})" \
            "$(json_strings ${skipped_names[@]+"${skipped_names[@]}"})"
    else
        echo ' "tests": null,'
    fi
    echo ' "accuracy_promise": 4.76837158203125e-07,'
    echo ' "devices": ['
    for i in "${!device_json[@]}"; do
        ((i)) && echo ','
        printf '%s' "${device_json[$i]}"
    done
    ((${#device_json[@]})) && echo
    echo ' ],'
    echo " \"failures\": $(json_strings ${failures[@]+"${failures[@]}"})}"
} >"$json.tmp"
mv "$json.tmp" "$json"

case ${meta[validation]} in
    on) validation_text="on (VK_LAYER_KHRONOS_validation)" ;;
    absent*) validation_text="off: the layer is ${meta[validation]}" ;;
    "") validation_text="off" ;;
    *) validation_text=${meta[validation]} ;;
esac
{
    echo "posenc device check (${meta[tool]:-?}, ${meta[posenc]:-posenc}): ${meta[host]:-?}," \
        "${meta[started]:-?}, ${meta[seconds]:-?} s"
    if ((${#step_names[@]})); then
        printf 'steps:'
        for i in "${!step_names[@]}"; do
            ((i)) && printf ';'
            printf ' %s %s s' "${step_names[$i]}" "${step_seconds[$i]}"
        done
        echo
    fi
    if ((${#runtimes[@]})); then
        echo "runtimes:"
        printf '  %s\n' "${runtimes[@]}"
    fi
    echo "backends:"
    for backend in vulkan opencl; do
        echo "  $backend: ${backend_state[$backend]:-not listed}"
    done
    if ((tests_ran)); then
        echo "tests: $tests_passed passed, $tests_failed failed, $tests_skipped skipped," \
            "Vulkan validation $validation_text"
    else
        echo "tests: not run"
    fi
    echo "accuracy against float64, relative to the rotated pair for RoPE, absolute for tables:" \
        "the worst in the tests (every dtype, style and layout they cover) and in posenc demo" \
        "(f32, Llama-sized, positions up to 2^31 - 2). The promise: 8 * 2^-24 = 4.77e-07."
    echo "bench (${meta[bench_mode]:-?}): ratios are RoPE throughput / copy throughput of the" \
        "same bytes on the same device"
    for text in ${device_text[@]+"${device_text[@]}"}; do
        printf '%s' "$text"
    done
    echo "result: $result"
} >"$out/summary.txt.tmp"
mv "$out/summary.txt.tmp" "$out/summary.txt"
[[ $ok == true ]]
