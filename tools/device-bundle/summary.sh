# shellcheck shell=bash disable=SC2154
# SPDX-License-Identifier: MIT
# The device check's summary, in bash and coreutils alone (sourced by the bundle's `run`):
# summary.json and summary.txt from the logs of a run. It reads run's variables: started,
# validation, step_names / step_seconds, selectors / names / backends / types / drivers (the
# devices checked) and passed / failed / skipped (per backend), and the logs: runtimes.txt,
# demo-<selector>.log and .rc, bench-<selector>.json and .rc. (SC2154: those variables are run's.)

# A JSON string of $1.
summary_json_string() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

# The worst "max error" of a demo log, or "null".
summary_demo_error() {
    local worst
    worst=$(grep -o 'max error [0-9.eE+-]*' "$1" 2>/dev/null | awk '{print $3}' | sort -g |
        tail -n 1)
    echo "${worst:-null}"
}

# `"prefill": {"f32": r, ...}, "decode": {...}` from a bench --json: each NEOX RoPE row's
# ratio to the same device's copy of the same bytes (1.0: as fast as memory allows).
summary_ratios() {
    local bench=$1 kind first line
    local row='"operation": "rope (prefill|decode)", "dtype": "([a-z0-9]+)", "style": "neox".*"ratio_to_copy": ([0-9.eE+-]+)'
    for kind in prefill decode; do
        printf '"%s": {' "$kind"
        first=1
        while IFS= read -r line; do
            [[ $line =~ $row && ${BASH_REMATCH[1]} == "$kind" ]] || continue
            ((first)) || printf ', '
            printf '"%s": %s' "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
            first=0
        done <"$bench"
        printf '}'
        [[ $kind == decode ]] || printf ', '
    done
}

# A number after "key": in the line of a bench --json holding `anchor`, or null.
summary_bench_number() {
    local bench=$1 anchor=$2 key=$3 value
    value=$(grep -o "\"$anchor\": {[^}]*" "$bench" 2>/dev/null | head -n 1 |
        grep -o "\"$key\": [0-9.eE+-]*" | head -n 1 | awk '{print $2}')
    echo "${value:-null}"
}

summary_write() {
    local out=$1 logs=$2 i selector base backend tests_passed tests_failed tests_skipped
    local demo_rc bench_rc error ok all_ok=1 checked=0 json=$out/summary.json
    local text=$out/summary.txt
    {
        echo "{"
        echo "  \"started\": $(summary_json_string "$started"),"
        echo "  \"posenc\": $(summary_json_string "$("$posenc" --version 2>/dev/null | head -n 1)"),"
        echo "  \"validation\": $(summary_json_string "$validation"),"
        printf '  "runtimes": ['
        local first=1 line
        while IFS= read -r line; do
            ((first)) || printf ', '
            summary_json_string "$line"
            first=0
        done <"$logs/runtimes.txt"
        echo "],"
        printf '  "steps": ['
        for i in "${!step_names[@]}"; do
            ((i)) && printf ', '
            printf '{"step": %s, "seconds": %s}' "$(summary_json_string "${step_names[$i]}")" \
                "${step_seconds[$i]:-0}"
        done
        echo "],"
        echo "  \"seconds\": $((SECONDS - run_start)),"
        echo "  \"devices\": ["
        for i in "${!selectors[@]}"; do
            selector=${selectors[$i]} base=${selectors[$i]/:/-} backend=${backends[$i]}
            tests_passed=${passed[$backend]:-0} tests_failed=${failed[$backend]:-0}
            tests_skipped=${skipped[$backend]:-0}
            demo_rc=$(cat "$logs/demo-$base.rc" 2>/dev/null || echo 1)
            bench_rc=$(cat "$logs/bench-$base.rc" 2>/dev/null || echo 1)
            error=$(summary_demo_error "$logs/demo-$base.log")
            ok=false
            if ((tests_failed == 0 && tests_passed > 0 && demo_rc == 0 && bench_rc == 0)); then
                ok=true
                checked=$((checked + 1))
            else
                all_ok=0
            fi
            ((i)) && echo ","
            printf '    {"selector": %s, "name": %s, "backend": %s, "type": %s, "driver": %s,\n' \
                "$(summary_json_string "$selector")" "$(summary_json_string "${names[$i]}")" \
                "$(summary_json_string "$backend")" "$(summary_json_string "${types[$i]}")" \
                "$(summary_json_string "${drivers[$i]}")"
            printf '     "tests_passed": %s, "tests_failed": %s, "tests_skipped": %s,\n' \
                "$tests_passed" "$tests_failed" "$tests_skipped"
            printf '     "demo_exit": %s, "worst_error": %s, "bench_exit": %s,\n' \
                "$demo_rc" "$error" "$bench_rc"
            printf '     "ratio_to_copy": {%s},\n' "$(summary_ratios "$logs/bench-$base.json")"
            printf '     "first_rope_ms": %s, "fresh_process_ms": %s, "ok": %s}' \
                "$(summary_bench_number "$logs/bench-$base.json" first_call first_rope_ms)" \
                "$(summary_bench_number "$logs/bench-$base.json" fresh_process median_ms)" "$ok"
        done
        ((${#selectors[@]})) && echo
        echo "  ],"
        local result=PASS
        ((all_ok && checked)) || result=FAIL
        echo "  \"result\": \"$result\""
        echo "}"
    } >"$json"

    {
        echo "posenc device check, $started ($("$posenc" --version 2>/dev/null | head -n 1))"
        echo "Vulkan validation: $validation"
        sed 's/^/  /' "$logs/runtimes.txt"
        for i in "${!step_names[@]}"; do
            echo "step ${step_names[$i]}: ${step_seconds[$i]:-0} s"
        done
        for i in "${!selectors[@]}"; do
            selector=${selectors[$i]} base=${selectors[$i]/:/-} backend=${backends[$i]}
            echo
            echo "$selector: ${names[$i]} (${types[$i]}); ${drivers[$i]}"
            echo "  tests ($backend): ${passed[$backend]:-0} passed, ${failed[$backend]:-0}" \
                "failed, ${skipped[$backend]:-0} skipped"
            echo "  demo: exit $(cat "$logs/demo-$base.rc" 2>/dev/null || echo '?'), worst" \
                "error $(summary_demo_error "$logs/demo-$base.log") (promise 4.77e-07)"
            echo "  bench: exit $(cat "$logs/bench-$base.rc" 2>/dev/null || echo '?');" \
                "RoPE / copy: $(summary_ratios "$logs/bench-$base.json" | tr -d '"{}')"
            echo "  first RoPE call $(summary_bench_number "$logs/bench-$base.json" first_call \
                first_rope_ms) ms; fresh process $(summary_bench_number \
                "$logs/bench-$base.json" fresh_process median_ms) ms"
        done
        ((${#selectors[@]})) || echo "no device checked"
        echo "result: $( ((all_ok && checked)) && echo PASS || echo FAIL)"
    } >"$text"
}
