#!/bin/sh
# The scheduled job of the cron example: appends one line per run to the run log, "works", then writes
# the tick's result to the result store, with the lease's fencing token when it has one.
# usage: job.sh LOG TICK SERVER WORK_SECONDS RESULT_URL [STALL_DIR]
# With STALL_DIR, the first run to create it stops itself (SIGSTOP) before working, as a frozen host
# would; the schedule resumes it later. mkdir is atomic, so exactly one run of the tick stalls.
stalled=false
if [ -n "$6" ] && mkdir "$6" 2>/dev/null; then
  stalled=true
  printf '%s %s %s\n' "$$" "$PPID" "$3" > "$6/pids.tmp" && mv "$6/pids.tmp" "$6/pids"
fi
printf '{"tick":%s,"server":"%s","fencingToken":"%s","stalled":%s}\n' "$2" "$3" "${KEYHOLDER_FENCING_TOKEN:-}" "$stalled" >> "$1"
if [ "$stalled" = true ]; then kill -STOP $$; fi
sleep "$4"
# The write's answer (409 when the fence refuses it) is counted by the store; the job does not retry.
curl -s -o /dev/null --max-time 30 -X PUT \
  -H "fencing-token: ${KEYHOLDER_FENCING_TOKEN:-}" -H 'content-type: application/json' \
  --data-binary "{\"server\":\"$3\",\"stalled\":$stalled}" "$5/ticks/$2"
