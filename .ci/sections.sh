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
