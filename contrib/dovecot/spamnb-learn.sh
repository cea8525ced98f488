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
set -eu

SPAMNB_SPAMD=${SPAMNB_SPAMD:-}
SPAMNB=${SPAMNB:-spamnb}

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

case $SPAMNB_SPAMD in
    "") exec "$SPAMNB" learn --"$class" --user "$user" - ;;
    /*) exec spamc -U "$SPAMNB_SPAMD" -u "$user" -L "$class" ;;
    *:*) exec spamc -d "${SPAMNB_SPAMD%:*}" -p "${SPAMNB_SPAMD##*:}" -u "$user" -L "$class" ;;
    *) exec spamc -d "$SPAMNB_SPAMD" -u "$user" -L "$class" ;;
esac
