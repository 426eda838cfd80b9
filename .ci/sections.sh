# shellcheck shell=bash
# Sourced by .ci/run and .ci/beside: `section NAME` starts a section of the log. Each
# section's wall time and the CPU time of its processes (user + system, children the
# shell waited for) are printed when the next one starts, and the totals at exit: a slow
# section shows in the log, and CPU below wall time shows room for parallelism.
current="" started=$SECONDS cpu_started=0 cpu=0 times_file=$(mktemp)
read_cpu() { # cpu := user + system ms of the shell's waited-for children (no subshell:
  # `times` in one would report the subshell's children)
  times >"$times_file"
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
    printf "%d", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }' "$times_file")
}
finish_section() {
  [ -z "$current" ] && return 0
  read_cpu
  local used=$((cpu - cpu_started))
  printf -- '-- %s: %d s wall, %d.%d s CPU\n' "$current" "$((SECONDS - started))" \
    "$((used / 1000))" "$((used % 1000 / 100))"
}
section() {
  finish_section
  read_cpu
  current="$*" started=$SECONDS cpu_started=$cpu
  printf '\n== %s ==\n' "$*"
}
# at_exit LABEL: prints the last section's figures and the totals when the shell exits.
at_exit() {
  # shellcheck disable=SC2064 # the label is fixed now
  trap "status=\$?; finish_section; rm -f \"\$times_file\"; printf '== %s total: %d s wall, %d s CPU (exit %d) ==\n' '$1' \"\$SECONDS\" \"\$((cpu / 1000))\" \"\$status\"" EXIT
}

# lane NAME COMMAND...: runs COMMAND in the background beside this shell's sections, in a
# session of its own (so that its whole process group can be stopped if the run fails
# first: it is red then, and the lane's log is not needed), its output to a log of its
# own. `join NAME` waits for it, prints its log and returns its status.
declare -A lane_pid lane_log
lane() {
  local name="$1"
  shift
  lane_log[$name]=$(mktemp)
  # shellcheck disable=SC2016 # expanded by the lane's shell
  setsid bash -c 'TIMEFORMAT="-- lane $0: %0R s wall, %0U s user + %0S s system CPU"; time "$@"' \
    "$name" "$@" >"${lane_log[$name]}" 2>&1 &
  lane_pid[$name]=$!
  trap 'for p in "${lane_pid[@]}"; do kill -- -"$p" 2>/dev/null || true; done' ERR
}
join() {
  local name="$1" status=0
  wait "${lane_pid[$name]}" || status=$?
  printf '\n######## lane %s (exit %d) ########\n' "$name" "$status"
  cat "${lane_log[$name]}"
  rm -f "${lane_log[$name]}"
  unset "lane_pid[$name]"
  return "$status"
}
