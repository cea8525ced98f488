# spamnb: a message copied or moved into Junk is spam. Runs for IMAPSieve (see
# 90-spamnb-imapsieve*.conf); pipes the message to spamnb-learn.sh.
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamnb-learn.sh" ["spam", "${username}"];
