# spamnb: a message copied or moved out of Junk is ham, unless it went to Trash (deleting
# spam teaches nothing). Runs for IMAPSieve (see 90-spamnb-imapsieve*.conf); pipes the
# message to spamnb-learn.sh.
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}

if string :comparator "i;ascii-casemap" "${mailbox}" ["Trash", "Deleted Items", "Deleted Messages", "Junk"] {
  stop;
}

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamnb-learn.sh" ["ham", "${username}"];
