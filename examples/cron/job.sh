#!/bin/sh
# The scheduled job of the cron example: appends one line per run to the run log, then "works".
# usage: job.sh LOG TICK SERVER WORK_SECONDS
printf '{"tick":%s,"server":"%s","fencingToken":"%s"}\n' "$2" "$3" "${KEYHOLDER_FENCING_TOKEN:-}" >> "$1"
sleep "$4"
