#!/bin/sh
# spamnb-learn.sh spam|ham USER: learns the message on stdin for USER. Dovecot's
# report-spam.sieve and report-ham.sieve pipe to it.
#
# While the spamnb daemon runs it owns the database, and `spamnb learn` goes through its
# control socket. To use `spamc -L` instead, set SPAMNB_SPAMD below (or in the
# environment) to the daemon's spamd unix socket path; host:port works only with
# `allow_tell = true` in its [spamd] section, as learning over TCP is off by default.
# Without the daemon, `spamnb learn` opens the database directly, which needs write
# access to it as the mail user Dovecot runs this as.
#
# Dovecot kills a pipe program after 10 s, and the user's MOVE waits for it. While another
# spamnb process holds the database (a `spamnb learn` of a folder, say), `spamnb learn`
# waits SPAMNB_LOCK_WAIT seconds for it, then gives up and nothing is learned; while
# `spamnb watch` holds it, which it does for as long as it runs, it gives up at once: let
# the daemon watch the Maildirs instead, and this script learns through the daemon.
# Dovecot runs this under default_vsz_limit (256 MB of address space): `spamnb learn` of
# one message takes 60-90 MB of it with spamnb's own rules, ~160 MB with SpamAssassin's.
#
# Dovecot runs this without a PATH: the shell's default finds spamnb in /usr/local/bin or
# /usr/bin; installed elsewhere (~/.cargo/bin), write its path as the default of SPAMNB
# below (where "spamnb" is).
#
# Dovecot logs whatever this writes to stderr as an error: the one-line summary of a learn
# that worked is dropped, and everything spamnb or spamc said is passed on when it failed.
set -eu

SPAMNB_SPAMD=${SPAMNB_SPAMD:-}
SPAMNB=${SPAMNB:-spamnb}
SPAMNB_LOCK_WAIT=${SPAMNB_LOCK_WAIT:-5}
export SPAMNB_LOCK_WAIT

if [ $# -ne 2 ]; then
    echo "usage: $0 spam|ham USER < message" >&2
    exit 64
fi
class=$1
user=$2
case $class in
    spam | ham) ;;
    *)
        echo "$0: the class must be spam or ham, not '$class'" >&2
        exit 64
        ;;
esac

# Runs the command with its output held back, and passes the output on to stderr only
# when the command fails.
quiet_unless_failed() {
    if output=$("$@" 2>&1); then
        return 0
    else
        status=$?
        printf '%s\n' "$output" >&2
        return "$status"
    fi
}

case $SPAMNB_SPAMD in
    "") quiet_unless_failed "$SPAMNB" learn --"$class" --user "$user" - ;;
    /*) quiet_unless_failed spamc -U "$SPAMNB_SPAMD" -u "$user" -L "$class" ;;
    *:*) quiet_unless_failed spamc -d "${SPAMNB_SPAMD%:*}" -p "${SPAMNB_SPAMD##*:}" -u "$user" -L "$class" ;;
    *) quiet_unless_failed spamc -d "$SPAMNB_SPAMD" -u "$user" -L "$class" ;;
esac
